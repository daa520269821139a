"""A program's argv made absolute (evalrun/argvpaths.py): inline code longer than a file name
may be, or holding a NUL, is an argument, not a path, and never an error that loses a case."""

from __future__ import annotations

from pathlib import Path

from evalrun.argvpaths import absolute_paths


def test_paths_that_exist_become_absolute_and_the_rest_stay(tmp_path: Path) -> None:
    (tmp_path / "grade.py").write_text("")
    argv = ["python", "grade.py", "missing.py", "", "/abs/x"]
    assert absolute_paths(argv, tmp_path) == [
        "python",
        str((tmp_path / "grade.py").resolve()),
        "missing.py",
        "",
        "/abs/x",
    ]


def test_an_argument_no_file_can_be_named_stays_as_it_is(tmp_path: Path) -> None:
    code = "import json; print(json.dumps({'score': 1}))  # " + "x" * 400
    argv = ["node", "-e", code, "a\0b", f"./{'y' * 300}"]
    assert absolute_paths(argv, tmp_path) == argv
