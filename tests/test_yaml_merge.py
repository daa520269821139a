"""YAML merge keys (``<<: *base``), which AgentV's eval files use, load with their lines."""

from __future__ import annotations

import pytest

from evalrun.yamlsource import SourceError, parse_yaml_with_lines

TEXT = """\
base: &base {x: 1, y: 2}
one:
  <<: *base
  y: 3
two:
  z: 0
  <<: [*base, {w: 4}]
"""


def test_merge_keys_copy_the_mapping_and_own_keys_win() -> None:
    parsed = parse_yaml_with_lines(TEXT, "t.yaml")
    data, lines = parsed.data, parsed.lines
    assert data["one"] == {"x": 1, "y": 3}
    assert data["two"] == {"x": 1, "y": 2, "w": 4, "z": 0}
    assert lines[("one", "x")] == 3  # a merged key is where the merge is
    assert lines[("one", "y")] == 4
    assert lines[("one",)] == 2


def test_a_merge_of_a_scalar_is_an_error_at_its_line() -> None:
    with pytest.raises(SourceError, match=r"^t.yaml:2: '<<' merges mappings only"):
        parse_yaml_with_lines("a:\n  <<: 3\n", "t.yaml")


def test_a_quoted_double_angle_is_an_ordinary_key() -> None:
    data = parse_yaml_with_lines("a:\n  '<<': 3\n", "t.yaml").data
    assert data == {"a": {"<<": 3}}
