"""evalrun: run LLM evaluation files with graders in any language.

The package is kept cheap to import; the public pieces live in their own modules:
``evalrun.spec`` (eval files), ``evalrun.targets`` (providers), ``evalrun.runner``
(running an eval), ``evalrun.results`` (case results and run bundles) and
``evalrun.reporters``.
"""

__version__ = "0.1.0"


def say_interrupted() -> int:
    """A Ctrl-C that stopped ``evalrun`` before a run could report it: one line on stderr, and
    the exit status 130 to end with (docs/results.md, exit codes)."""
    import sys

    print("evalrun: interrupted", file=sys.stderr)
    return 130
