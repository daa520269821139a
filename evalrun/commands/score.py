"""``evalrun score``: apply a weighted rubric to precomputed metrics, with no LLM."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from evalrun.commands.failing import fail
from evalrun.errors import ExitCode, UserError
from evalrun.rubric import MissingPolicy, Rubric, RubricError, load_rubric, score


class Missing(str, enum.Enum):
    """What a criterion with no metric counts as."""

    skip = "skip"
    zero = "zero"


class InputError(UserError):
    """The results file cannot be read as a list of result objects."""


def read_metrics_file(path: Path) -> list[dict[str, Any]]:
    """The user's file of precomputed metrics: a JSON list of objects, ``{"results": [...]}``,
    or JSONL (one object a line). A run bundle is read by ``results.reader`` instead."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    items: Any
    try:
        items = json.loads(text)
    except json.JSONDecodeError as whole_error:
        items = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                if lineno == 1 and path.suffix != ".jsonl":
                    raise InputError(f"{path}: invalid JSON: {whole_error}") from None
                raise InputError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
    if isinstance(items, dict):
        items = items["results"] if isinstance(items.get("results"), list) else [items]
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a list of result objects or {{'results': [...]}}")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"{path}: result {index + 1} is not an object")
    return items


def metrics_of(item: dict[str, Any]) -> dict[str, Any]:
    """The metrics of one result: an evalrun case's grader scores, ``metrics``/``scores``, or
    the object's own keys."""
    graders = item.get("graders")
    if isinstance(graders, list) and all(isinstance(g, dict) and "name" in g for g in graders):
        return {g["name"]: g.get("score") for g in graders}
    for key in ("metrics", "scores"):
        if isinstance(item.get(key), dict):
            return item[key]
    return item


def score_results(
    rubric: Rubric, items: list[dict[str, Any]], missing: MissingPolicy = "skip"
) -> dict[str, Any]:
    rows = []
    for index, item in enumerate(items):
        result = score(rubric, metrics_of(item), missing=missing)
        ident = item.get("id", item.get("case_id", index + 1))
        rows.append({"id": ident, **result.to_dict()})
    scored = [r["weighted_score"] for r in rows if r["weighted_score"] is not None]
    mean = sum(scored) / len(scored) if scored else None
    return {
        "rubric": rubric.name,
        "count": len(rows),
        "scored": len(scored),
        "mean_weighted_score": mean,
        "label": rubric.label(mean),
        "results": rows,
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _print_report(report: dict[str, Any]) -> None:
    typer.echo(f"rubric: {report['rubric']}")
    width = max([len(str(r["id"])) for r in report["results"]] + [2])
    for row in report["results"]:
        line = (
            f"  {str(row['id']):<{width}}  weighted {_fmt(row['weighted_score'])}"
            f"  total {_fmt(row['total_score'])}  {row['label']}"
        )
        if row["missing_criteria"]:
            line += f"  missing: {', '.join(row['missing_criteria'])}"
        typer.echo(line)
    typer.echo(
        f"mean weighted score: {_fmt(report['mean_weighted_score'])} "
        f"({report['label']}; {report['scored']} of {report['count']} results scored)"
    )


def score_command(
    results: Annotated[Path, typer.Argument(help="JSON list, {'results': [...]}, or JSONL.")],
    rubric: Annotated[
        str, typer.Option("--rubric", "-r", metavar="NAME", help="Rubric name or YAML path.")
    ],
    fail_under: Annotated[
        float | None, typer.Option("--fail-under", help="Exit 1 if the mean is below this.")
    ] = None,
    rubrics: Annotated[
        Path | None,
        typer.Option("--rubrics", metavar="DIR", help="Folder searched first for rubric names."),
    ] = None,
    missing: Annotated[
        Missing, typer.Option("--missing", help="skip: leave missing criteria out; zero: count 0.")
    ] = Missing.skip,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Score precomputed metrics with a weighted rubric (no LLM calls)."""
    try:
        loaded = load_rubric(rubric, rubrics_dir=rubrics)
        items = read_metrics_file(results)
    except (RubricError, InputError) as exc:
        raise fail(exc) from None
    if not items:
        raise fail(f"{results}: no results to score")
    report = score_results(loaded, items, missing.value)  # type: ignore[arg-type]
    if report["scored"] == 0:
        names = ", ".join(c.name for c in loaded.criteria)
        raise fail(f"no result has any criterion of rubric '{loaded.name}' ({names})")
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        _print_report(report)
    mean = report["mean_weighted_score"]
    if fail_under is not None and mean < fail_under:
        if not as_json:
            typer.echo(f"FAIL: mean {mean:.4f} is below --fail-under {fail_under}")
        raise typer.Exit(ExitCode.GATE_FAILED)


def register(app: typer.Typer) -> None:
    app.command("score")(score_command)
