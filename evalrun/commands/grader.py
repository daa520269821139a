"""``evalrun grader check -- CMD...``: the conformance kit for graders in any language."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from evalrun.errors import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from evalrun.commands.grader_check import CheckResult

grader_app = typer.Typer(
    help="Work on graders: check one against the protocol.", no_args_is_help=True
)


@grader_app.command(
    "check", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def check(
    command: list[str] = typer.Argument(..., help="The grader's argv, after --."),
    max_calls: int = typer.Option(20, "--max-calls", help="Judge-call budget per payload."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per grader run."),
    cwd: Path = typer.Option(Path("."), "--cwd", help="Folder the grader runs in."),
    dump: Path | None = typer.Option(
        None,
        "--dump-payloads",
        metavar="DIR",
        help="Also write the golden payloads to this folder.",
    ),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Also show each payload's reason, its judge calls and the judge's replies.",
    ),
    mode: str = typer.Option(
        "both",
        "--mode",
        help="process (one process per payload), serve (stream mode, one worker) or both.",
    ),
    wire: str = typer.Option(
        "evalrun",
        "--wire",
        help="The payload to send: evalrun, or agentv (what an AgentV file's graders get).",
    ),
) -> None:
    """Run a grader against golden payloads and a scripted judge; report contract violations."""
    from evalrun.commands.grader_check import check_grader, write_golden_payloads
    from evalrun.launcher.payload import WIRES

    chosen = next((w for w in WIRES if w == wire), None)
    if chosen is None:
        raise typer.BadParameter(f"--wire must be {' or '.join(WIRES)}")
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        write_golden_payloads(dump, chosen)
    modes = {"both": ("process", "serve"), "process": ("process",), "serve": ("serve",)}
    if mode not in modes:
        raise typer.BadParameter("--mode must be process, serve or both")
    results = asyncio.run(
        check_grader(
            command,
            cwd=cwd.resolve(),
            max_calls=max_calls,
            timeout=timeout,
            modes=modes[mode],
            wire=chosen,
        )
    )
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"grader check: {' '.join(command)}", title_justify="left")
    for column in ("payload", "mode", "status", "score", "judge calls", "findings"):
        table.add_column(column)
    broken: set[str] = set()
    for r in results:
        findings = [f"[red]✗ {p}[/]" for p in r.problems] + [
            f"[yellow]! {w}[/]" for w in r.warnings
        ]
        if r.problems:
            broken.add(r.payload)
        calls = str(r.result.proxy.calls) if r.result.proxy else "-"
        score = "-" if r.result.score is None else f"{r.result.score:.3f}"
        table.add_row(
            r.payload,
            r.mode,
            r.result.status,
            score,
            calls,
            "\n".join(findings) or "[green]ok[/]",
        )
    console.print(table)
    if verbose:
        for r in results:
            _print_details(console, r)
    payloads = len({r.payload for r in results if r.payload != "(all)"})
    if broken:
        console.print(f"[red]{len(broken)} of {payloads} payloads broke the protocol[/]")
        raise typer.Exit(ExitCode.GATE_FAILED)
    served = any(r.mode == "serve" and r.payload != "(all)" for r in results)
    how = " (also in stream mode)" if served and mode == "both" else ""
    console.print(f"[green]the grader follows the protocol on all {payloads} payloads{how}[/]")


def _print_details(console: Console, r: CheckResult) -> None:
    """What the grader said and what the judge was asked and answered, for one payload."""
    from rich.markup import escape

    result = r.result
    console.print(f"[bold]{escape(r.payload)}[/] {r.mode} ({result.status})", highlight=False)
    console.print(f"  reason: {escape(result.reason or '-')}", highlight=False)
    if result.stderr_tail:
        console.print(f"  stderr: {escape(result.stderr_tail.splitlines()[-1])}", highlight=False)
    for i, call in enumerate(r.judge_calls, start=1):
        task = call.task or {}
        asked = f"task {task['kind']}" if task.get("kind") else _one_line(call.question)
        console.print(f"  judge call {i}: {escape(asked)}", highlight=False)
        console.print(f"    reply: {escape(_one_line(call.response))}", highlight=False)


def _one_line(text: object, limit: int = 160) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def register(app: typer.Typer) -> None:
    app.add_typer(grader_app, name="grader")
