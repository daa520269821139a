"""The pytest session's config, shared by the plugin's hooks (which set it) and
``@evalrun.case`` (which reads its --evalrun-* options): a module of its own, so neither of the
two imports the other back (docs/pytest.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

session: dict[str, pytest.Config] = {}
