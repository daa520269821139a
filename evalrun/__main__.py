"""``python -m evalrun``. Ctrl-C while the command line itself loads (typer and the command's
modules take a while), or before ``entry`` is inside its own guard, exits 130 with one line as
it does later (docs/results.md, exit codes)."""

try:
    from evalrun.cli import entry

    entry()
except KeyboardInterrupt:
    from evalrun import say_interrupted

    raise SystemExit(say_interrupted()) from None
