"""evalrun: run LLM evaluation files with graders in any language.

The package is kept cheap to import; the public pieces live in their own modules:
``evalrun.spec`` (eval files), ``evalrun.targets`` (providers), ``evalrun.runner``
(running an eval), ``evalrun.results`` (case results and run bundles) and
``evalrun.reporters``.
"""

__version__ = "0.1.0"

#: Exit status and stderr line of a Ctrl-C that stops ``evalrun`` before a run could say more
#: (docs/results.md, exit codes).
INTERRUPTED = 130
INTERRUPTED_LINE = "evalrun: interrupted"
