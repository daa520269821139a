"""The judge proxy: a loopback HTTP server through which graders reach judge targets with a
per-run token and call budget, never with provider credentials (docs/proxy.md)."""

from proxy.app import create_app
from proxy.grants import Grant, GrantRegistry
from proxy.server import JudgeProxy

__all__ = ["Grant", "GrantRegistry", "JudgeProxy", "create_app"]
