"""``evalrun targets list`` and ``evalrun targets check NAME``: see what is configured and prove
one target answers, before a long run finds out."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import typer

from evalrun.commands.failing import fail
from evalrun.commands.options import TARGETS
from evalrun.errors import ConfigError, ExitCode
from evalrun.targets import (
    CompletionRequest,
    CompletionResponse,
    TargetConfig,
    TargetError,
    TargetNotConfigured,
    TargetPool,
    TargetsFile,
    TargetsLookup,
    kind_of,
    load_targets,
    locate_targets_file,
)
from evalrun.yamlsource import SourceError

PROBE = "Reply with the single word OK."
#: Judges that answer typed tasks only (docs/proxy.md) are probed with a tiny typed task.
TYPED_PROBE = {
    "kind": "relevance",
    "query": "What is the capital of France?",
    "passage": "Paris is the capital and largest city of France.",
}
_PREVIEW = 80


def _load(targets: Path | None) -> tuple[TargetsLookup, TargetsFile]:
    lookup = locate_targets_file(targets, None)
    return lookup, load_targets(lookup.path)


def _key_column(config: TargetConfig, env: dict[str, str]) -> tuple[str, str]:
    """(where the key comes from, whether it is set) without ever showing the key."""
    names = config.secret_env_names()
    if names:
        return ", ".join(names), "yes" if all(env.get(n) for n in names) else "no"
    if config.api_key:
        return "(inline in file)", "yes"
    return "-", "-"


def list_targets(targets: Path | None = TARGETS) -> None:
    """List configured targets: name, kind, model, key variable and whether it is set."""
    try:
        lookup, file = _load(targets)
    except (ConfigError, SourceError) as exc:
        raise fail(exc) from None
    typer.echo(lookup.describe())
    env = dict(os.environ)
    rows = [("NAME", "KIND", "MODEL", "KEY VARIABLE", "SET")]
    for config in file.targets:
        rows.append((config.name, config.kind, config.model or "-", *_key_column(config, env)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def check_target(
    name: str = typer.Argument(..., help="Target name from targets.yaml."),
    targets: Path | None = TARGETS,
    prompt: str = typer.Option(PROBE, "--prompt", metavar="TEXT", help="What to send."),
    retries: int = typer.Option(0, "--retries", min=0, help="Retries on retryable errors."),
) -> None:
    """Send one tiny request to a target; print latency, tokens and the start of the reply.

    A judge that answers typed tasks only (kind local) gets a small relevance task instead.
    Exit 2 on a configuration problem (unknown target, missing key or extra), 1 if the call fails.
    """
    lookup = None
    try:
        lookup, file = _load(targets)
        config = file.get(name).model_copy(update={"max_retries": retries})
        pool = TargetPool(TargetsFile(targets=[config]))
        pool.check([name])
        target = pool.get(name)
    except TargetNotConfigured as exc:
        raise fail(f"{exc}; {lookup.describe() if lookup else ''}") from None
    except (ConfigError, SourceError) as exc:
        raise fail(exc) from None
    typed = kind_of(config).typed_only
    request = CompletionRequest.from_prompt(
        prompt if not typed else "Is the passage relevant to the question?",
        task=TYPED_PROBE if typed else None,
    )

    async def probe() -> CompletionResponse:
        try:
            return await target.complete(request)
        finally:
            await pool.aclose()

    label = f"{name} ({config.kind}{' ' + config.model if config.model else ''})"
    try:
        response = asyncio.run(probe())
    except TargetError as exc:
        typer.echo(f"FAILED {label}: {exc.message}", err=True)
        raise typer.Exit(ExitCode.GATE_FAILED) from None
    reply = " ".join(response.text.split())
    if len(reply) > _PREVIEW:
        reply = reply[:_PREVIEW] + "..."
    usage = response.usage
    typer.echo(
        f"ok {label}: {response.latency_ms:.0f} ms, {usage.input_tokens} in / {usage.output_tokens} out "
        f"tokens, finish={response.finish_reason or '-'}"
    )
    typer.echo(f"reply: {reply!r}")


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        help="List configured targets and check that one answers.", no_args_is_help=True
    )
    group.command("list")(list_targets)
    group.command("check")(check_target)
    app.add_typer(group, name="targets")
