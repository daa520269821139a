"""What the launcher sees of the judge proxy: a thing that issues and revokes grants.

The launcher never imports the proxy (docs/architecture.md): the runner starts one and hands it
over as a ``GrantIssuer``. ``proxy.JudgeProxy`` is the one implementation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from evalrun.judgecall import JudgeCall


@runtime_checkable
class IssuedGrant(Protocol):
    """One grader run's token, budget and record of judge calls."""

    @property
    def token(self) -> str: ...

    @property
    def records(self) -> list[JudgeCall]: ...

    def usage(self) -> dict[str, Any]:
        """Keyword arguments for ``evalrun.results.models.ProxyUsage``."""
        ...


GrantT = TypeVar("GrantT", bound=IssuedGrant)


@runtime_checkable
class GrantIssuer(Protocol[GrantT]):
    """A started judge proxy: where graders reach it, and the grants it hands out."""

    @property
    def url(self) -> str: ...

    @property
    def port(self) -> int | None: ...

    @property
    def unix_socket(self) -> Path | None:
        """Also listened on for graders in a network namespace of their own (``strict``)."""
        ...

    def grant(
        self,
        default_target: str,
        max_calls: int,
        allowed: Iterable[str] | None = None,
        *,
        grader: str = "",
        case_id: str = "",
    ) -> GrantT: ...

    def revoke(self, grant: GrantT) -> None: ...

    def redact(self, value: Any, token: str) -> Any:
        """``value`` (text or JSON-like data) without the token or any provider key."""
        ...


#: Starts the run's judge proxy on first use and returns it (the runner's, shared by graders).
StartIssuer = Callable[[], Awaitable[GrantIssuer[Any]]]
