"""The ``local`` target: an offline embedding judge for typed tasks (docs/local-judge.md)."""
