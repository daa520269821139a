"""evalrun: run LLM evaluation files with graders in any language.

``import evalrun`` stays cheap (the command line's start-up counts, docs/performance.md): the
Python API (``evalrun.run``, ``Eval``, ``Case``, ``Grader``, ``RunOutcome``, ``EvalError``;
docs/python-api.md) is imported from ``evalrun.api`` the first time one of its names is used,
``evalrun.case`` (docs/pytest.md) from ``evalrun.pytest_items``.
"""

__version__ = "0.1.0"

__all__ = ["Case", "Eval", "EvalError", "Grader", "RunOutcome", "__version__", "case", "run"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from evalrun.api import Case, Eval, EvalError, Grader, RunOutcome, run
    from evalrun.pytest_items import case


def __getattr__(name: str) -> object:
    if name == "case":
        import evalrun.pytest_items

        return evalrun.pytest_items.case
    if name in __all__:
        import evalrun.api

        return getattr(evalrun.api, name)
    raise AttributeError(f"module 'evalrun' has no attribute {name!r}")


def say_interrupted() -> int:
    """A Ctrl-C that stopped ``evalrun`` before a run could report it: one line on stderr, and
    the exit status 130 to end with (docs/results.md, exit codes)."""
    import sys

    print("evalrun: interrupted", file=sys.stderr)
    return 130
