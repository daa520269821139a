"""CLI sub-commands, grouped by what they share (``run.py``: run, validate, schema; ``report.py``:
report, merge, compare; one module for each other command; ``evalrun/cli.py``'s ``COMMANDS``
names each one's module). Every module exposes ``register(app: typer.Typer)``."""
