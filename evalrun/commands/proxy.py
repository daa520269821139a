"""``evalrun proxy``: a judge proxy with one grant, for developing a grader by hand.

Paste the printed ``export`` lines into another shell and run the grader there; it reaches the
judge exactly as it will inside ``evalrun run``, without ever seeing a provider key.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

import typer

from evalrun.commands.failing import fail
from evalrun.commands.options import TARGETS
from evalrun.errors import ConfigError
from evalrun.targets import (
    TargetNotConfigured,
    TargetPool,
    load_targets,
    locate_targets_file,
)
from evalrun.yamlsource import SourceError


async def _serve(pool: TargetPool, target: str, max_calls: int, allow: list[str] | None) -> None:
    from evalrun.launcher.environment import PROXY_ENV_PREFIXES
    from evalrun.runner.judging import judge_proxy

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    proxy = judge_proxy(pool)
    try:
        await proxy.start()
        grant = proxy.grant(target, max_calls, allow, grader="interactive")
        for prefix in PROXY_ENV_PREFIXES:
            print(f"export {prefix}_URL={proxy.url}")
            print(f"export {prefix}_TOKEN={grant.token}")
        sys.stdout.flush()
        print(
            f"judge proxy on {proxy.url}: target '{target}', {max_calls} calls, "
            f"allowed: {', '.join(grant.allowed)}. Ctrl-C to stop.",
            file=sys.stderr,
            flush=True,
        )
        await stop.wait()
        usage = grant.usage()
        print(
            f"stopped: {usage['calls']}/{usage['max_calls']} calls, "
            f"{usage['input_tokens']} in / {usage['output_tokens']} out tokens",
            file=sys.stderr,
        )
    finally:
        await proxy.stop()
        await pool.aclose()


def proxy_command(
    target: str = typer.Option(
        ..., "--target", "-t", metavar="NAME", help="Default judge target of the grant."
    ),
    max_calls: int = typer.Option(100, "--max-calls", min=0, help="Call budget of the grant."),
    targets: Path | None = TARGETS,
    allow: list[str] = typer.Option(
        [],
        "--allow",
        metavar="NAME",
        help="Targets the grant may use besides --target (repeatable; default: all).",
    ),
) -> None:
    """Serve a loopback judge proxy with one grant until Ctrl-C; print its URL and token."""
    lookup = None
    try:
        lookup = locate_targets_file(targets, None)
        file = load_targets(lookup.path)
        pool = TargetPool(file)
        names = [target, *allow]
        for name in names:
            file.get(name)
        pool.check(names)
    except TargetNotConfigured as exc:
        raise fail(f"{exc}; {lookup.describe() if lookup else ''}") from None
    except (ConfigError, SourceError) as exc:
        raise fail(exc) from None
    asyncio.run(_serve(pool, target, max_calls, names if allow else None))


def register(app: typer.Typer) -> None:
    app.command("proxy")(proxy_command)
