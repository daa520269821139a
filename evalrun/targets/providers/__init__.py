"""Provider plug-ins: one module per target kind, each a ``Target`` (docs/architecture.md)."""
