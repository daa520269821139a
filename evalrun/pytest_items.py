"""The pytest plugin's items (docs/pytest.md): an eval file's cases as tests, run once per
file, and ``@evalrun.case`` for a Python test whose return value is graded. Imported only when
the plugin's hooks (``evalrun.pytest_plugin``) need it."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from evalrun.errors import UserError
from evalrun.pytest_state import session

if TYPE_CHECKING:
    from evalrun.results.models import CaseResult
    from evalrun.spec.models import GraderSpec


class EvalFileNode(pytest.File):
    """An eval file: its cases are the items; the first item to run runs the whole file."""

    def collect(self) -> list[pytest.Item]:
        from evalrun.spec.loader import EvalFileError, load_eval

        try:
            loaded = load_eval(self.path)
        except EvalFileError as exc:
            raise EvalCollectError(str(exc)) from None
        return [
            EvalCaseItem.from_parent(self, name=_item_name(case.id, case.prompt))
            for case in loaded.tests
        ]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, EvalCollectError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def outcome(self) -> FileRun:
        """The file's run: made by the first item that asks, in this process or another."""
        found: FileRun | None = getattr(self, "_run", None)
        if found is None:
            found = self._run = _run_once(self.config, self.path)
        return found


class EvalCollectError(UserError):
    """An eval file that does not load: shown as its ``file:line`` problems."""


class EvalCaseItem(pytest.Item):
    """One case of an eval file: passes when the case's result is ``passed``."""

    def runtest(self) -> None:
        node = self.parent
        if not isinstance(node, EvalFileNode):
            raise TypeError(f"{self.nodeid}: an eval case outside its eval file")
        run = node.outcome()
        if run.error is not None:
            raise AssertionError(run.error)
        result = run.results.get(self.name)
        if result is None:
            raise AssertionError(f"case '{self.name}' has no result in {run.bundle}")
        self.user_properties.append(("evalrun_bundle", str(run.bundle)))
        if result.status != "passed":
            raise AssertionError(_explain(result, run.bundle))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, AssertionError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.path.name}::{self.name}"


def _item_name(case_id: str, prompt: str | None) -> str:
    """A case's item: its id, and its prompt variant when it is one (docs/pytest.md)."""
    return case_id if prompt is None else f"{case_id} @ {prompt}"


@dataclass
class FileRun:
    """What the items of one file read: each case's last result, or why the run failed."""

    bundle: Path | None
    results: dict[str, CaseResult]
    error: str | None = None


def _explain(result: CaseResult, bundle: Path | None) -> str:
    score = "no score" if result.score is None else f"score {result.score:.3f}"
    lines = [f"case '{result.id}' {result.status} ({score})"]
    if result.error:
        lines.append(f"  error: {result.error}")
    for grader in result.graders:
        graded = grader.status if grader.score is None else f"{grader.score:.3f}"
        lines.append(f"  {grader.name}: {graded} {grader.reason}".rstrip())
    lines.append(f"run bundle: {bundle}")
    return "\n".join(lines)


def _bundle_root(config: pytest.Config) -> Path:
    """Where this session's bundles go: one folder shared by every xdist worker (the parent of
    the workers' own temp folders), so a file's bundle has one place."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return (base.parent if hasattr(config, "workerinput") else base) / "evalrun"


def _run_once(config: pytest.Config, path: Path) -> FileRun:
    """Run the file into its bundle unless another worker has: a lock per file makes the
    first to come run it and the others read what it wrote."""
    import fcntl  # POSIX: imported here so that the plugin loads anywhere pytest does

    from evalrun.api import EvalError, read_cases, run

    root = _bundle_root(config)
    root.mkdir(parents=True, exist_ok=True)
    bundle = root / re.sub(r"[^A-Za-z0-9._-]+", "_", str(path.resolve()).lstrip("/"))
    with open(f"{bundle}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        failed = Path(f"{bundle}.error")
        if failed.exists():
            return FileRun(None, {}, failed.read_text(encoding="utf-8"))
        if not bundle.exists():
            try:
                run(path, out=bundle, quiet=True, **_options(config))
            except EvalError as exc:
                failed.write_text(str(exc), encoding="utf-8")
                return FileRun(None, {}, str(exc))
    return FileRun(bundle, {_item_name(c.id, c.prompt): c for c in read_cases(bundle)})


def case(
    *, graders: list[GraderSpec], input: Any = "", **fields: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Grade what a test function returns as the ``output`` of one case (docs/pytest.md):
    ``graders`` and the case's other keys (``input``, ``criteria``, ``expected_output``, ...)
    as in an eval file. The test fails with the graders' reasons unless the case passes."""

    def mark(test: Callable[..., Any]) -> Callable[..., Any]:
        folder = Path(inspect.getfile(test)).parent

        @functools.wraps(test)
        def graded(*args: Any, **kwargs: Any) -> None:
            from evalrun.api import Case, Eval, run

            output = test(*args, **kwargs)
            spec = Eval(
                graders=graders,
                tests=[Case(id=test.__name__, input=input, output=output, **fields)],
            )
            config = session.get("config")
            options = {"quiet": True, **(_options(config) if config is not None else {})}
            outcome = run(spec, base_dir=folder, name=test.__name__, **options)
            if not outcome.cases:
                raise AssertionError(f"case '{test.__name__}' has no result in {outcome.bundle}")
            if outcome.cases[0].status != "passed":
                raise AssertionError(_explain(outcome.cases[0], outcome.bundle))

        return graded

    return mark


def _options(config: pytest.Config) -> dict[str, Any]:
    given = {
        "target": config.getoption("evalrun_target"),
        "judge": config.getoption("evalrun_judge"),
        "workers": config.getoption("evalrun_workers"),
    }
    return {key: value for key, value in given.items() if value is not None}
