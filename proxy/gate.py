"""The proxy's gate: what a request must pass before any route reads it (docs/security.md).

The transport checks (loopback ``Host`` and ``Origin``, unambiguous framing, the body cap) run
on the raw headers; the grant checks (a live bearer token, compared in constant time by the
registry, and an atomic budget reservation) run for every route but ``/openapi.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from evalrun.loopback import BAD_HOST, CROSS_ORIGIN, LOOPBACK_HOST, LOOPBACK_ORIGIN
from proxy.grants import Grant, GrantRegistry, Reservation
from proxy.replies import ErrorReply


@dataclass
class RequestHead:
    """The headers the gate and the routes read, from one pass over the raw header list."""

    host: bytes | None = None
    origin: bytes | None = None
    length: bytes | None = None
    authorization: str | None = None
    chunked: bool = False

    @classmethod
    def read(cls, headers: list[tuple[bytes, bytes]]) -> RequestHead:
        head = cls()
        for name, value in headers:
            if name == b"host":
                head.host = b"" if head.host is not None else value  # two Host headers: refuse
            elif name == b"authorization":
                head.authorization = value.decode("latin-1")
            elif name == b"content-length":
                head.length = value
            elif name == b"origin":
                head.origin = value
            elif name == b"transfer-encoding":
                head.chunked = True
        return head


@dataclass(frozen=True)
class Refusal:
    """A request the gate turns away before reading its body; ``close`` ends the connection."""

    error: ErrorReply
    close: bool


def transport_refusal(head: RequestHead, max_body_bytes: int) -> Refusal | None:
    """Why the request may not be read, if it may not: a Host or Origin that is not loopback
    (DNS rebinding, browser pages), two framings (request smuggling), a bad or too large
    Content-Length. A 413 keeps the connection: uvicorn discards the rest of the body, so the
    client reads the error instead of a reset while it is still sending."""
    # the rule `evalrun view` applies too (evalrun/loopback.py), read from this one header pass
    if head.host is None or not LOOPBACK_HOST.fullmatch(head.host):
        return Refusal(ErrorReply(403, "bad_request", BAD_HOST), close=True)
    if head.origin is not None and not LOOPBACK_ORIGIN.fullmatch(head.origin):
        return Refusal(ErrorReply(403, "bad_request", CROSS_ORIGIN), close=True)
    if head.chunked and head.length is not None:
        message = "both Transfer-Encoding and Content-Length are set"
        return Refusal(ErrorReply(400, "bad_request", message), close=True)
    if head.length is not None:
        if not head.length.isdigit():
            return Refusal(ErrorReply(400, "bad_request", "bad Content-Length"), close=True)
        if int(head.length) > max_body_bytes:
            return Refusal(too_large(max_body_bytes), close=False)
    return None


def too_large(max_body_bytes: int) -> ErrorReply:
    return ErrorReply(413, "payload_too_large", f"request body over {max_body_bytes} bytes")


def bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


class GrantGate:
    """The grant checks every route makes: whose token, and may it spend ``n`` more calls."""

    def __init__(self, registry: GrantRegistry) -> None:
        self.registry = registry

    def authorize(self, authorization: str | None) -> Grant:
        """The live grant of the bearer token (the registry compares it in constant time)."""
        if self.registry.closing:
            raise ErrorReply(503, "shutting_down", "the judge proxy is shutting down")
        grant = self.registry.lookup(bearer(authorization))
        if grant is None:
            raise ErrorReply(401, "unauthorized", "missing, invalid or revoked token")
        return grant

    def reserve(self, grant: Grant, n: int) -> None:
        """Charge ``n`` calls now, all or none, or refuse with 429."""
        if not self.registry.reserve(grant, n):
            self.refuse_over_budget(grant, n)

    def reserve_batch(self, grant: Grant, n: int) -> Reservation:
        """Reserve ``n`` calls for a batch, started one by one, or refuse the batch with 429."""
        reservation = self.registry.reserve_batch(grant, n)
        if reservation is None:
            self.refuse_over_budget(grant, n)
        return reservation

    @staticmethod
    def refuse_over_budget(grant: Grant, n: int) -> NoReturn:
        extra: dict[str, int] = {"limit": grant.max_calls, "used": grant.used}
        if n != 1:
            extra["requested"] = n
        raise ErrorReply(
            429,
            "max_calls_exceeded",
            f"this grader may make {grant.max_calls} judge calls and has used {grant.used}",
            **extra,
        )
