"""The root of evalrun's own errors and the exit codes a command ends with: the one place both are
named (docs/results.md, "Exit codes"; the tree is in docs/architecture.md, "Errors").

Every error evalrun raises for a reason of its own derives from :class:`EvalrunError`. The
branch a command can meet before anything ran, :class:`UserError` (a file, an option, a
configuration the user must fix), carries its exit code, which ``evalrun.commands.failing.fail``
reads. The rest are a case's errors (a target that could not answer, a grader's broken output):
the runner records them in the case's result, and the exit code follows from the results.
``grader_sdk`` keeps errors of its own: it imports nothing of ours.
"""

from __future__ import annotations

from typing import ClassVar


class ExitCode:
    """What each exit code means (docs/results.md, "Exit codes")."""

    OK = 0
    GATE_FAILED = 1
    USAGE = 2
    INCOMPLETE = 3
    INTERRUPTED = 130


class EvalrunError(Exception):
    """The root of every error evalrun raises for a reason of its own."""


class UserError(EvalrunError):
    """Bad input the user must fix (a file, an option, a configuration): nothing ran, exit 2."""

    exit_code: ClassVar[int] = ExitCode.USAGE


class ConfigError(UserError):
    """A configuration problem: an unknown or unusable target, a missing key or extra, an option
    a run cannot take; what a run checks before anything starts."""
