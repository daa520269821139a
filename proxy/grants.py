"""Grants: what one grader run may do through the proxy, and the registry that hands them out.

A grant is a bearer token plus a call budget, the targets it may use, and the record of what it
did. Budgets are reserved before the upstream call, so no burst of concurrent requests can spend
one call more than ``max_calls``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets as _secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evalrun.judgecall import JudgeCall

#: Secrets shorter than this are not redacted: replacing every "a" would destroy the record.
MIN_SECRET_LENGTH = 4
REDACTED = "***"


@dataclass(eq=False)
class Reservation:
    """Calls of one batch that are reserved but not started yet (``pending``): they are given
    back, not charged, when the batch ends early or the grant is revoked."""

    pending: int


@dataclass(eq=False)
class InFlight:
    """A charged upstream call under way, and its record should the grader leave before the
    answer (docs/proxy.md, "Abandoned calls"). The first of the call's end and its abandonment
    settles it, so each call is recorded exactly once."""

    abandoned: JudgeCall
    started: float = field(default_factory=time.perf_counter)
    settled: bool = False


@dataclass(eq=False)
class Grant:
    token: str = field(repr=False)
    default_target: str
    max_calls: int
    allowed: list[str]
    grader: str = ""
    case_id: str = ""
    used: int = 0
    revoked: bool = False
    records: list[JudgeCall] = field(default_factory=list, repr=False)
    #: upstream calls under way, each with its record in case it is abandoned
    in_flight: dict[asyncio.Task[Any], InFlight] = field(default_factory=dict, repr=False)
    reservations: set[Reservation] = field(default_factory=set, repr=False)
    input_tokens: int = 0
    output_tokens: int = 0
    cached_calls: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0

    @property
    def remaining(self) -> int:
        return max(0, self.max_calls - self.used)

    def usage(self) -> dict[str, Any]:
        """Keyword arguments for ``evalrun.results.models.ProxyUsage``."""
        return {
            "calls": self.used,
            "max_calls": self.max_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_calls": self.cached_calls,
            "latency_ms": round(self.latency_ms, 3),
            "cost_usd": self.cost_usd,
        }


class Redactor:
    """Replaces every known secret value in text (longest first, so overlaps redact fully)."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        fresh = {v for v in values if v and len(v) >= MIN_SECRET_LENGTH} - self._values
        if not fresh:
            return
        self._values |= fresh
        ordered = sorted(self._values, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def text(self, value: str | None, extra: str | None = None) -> str | None:
        if value is None:
            return None
        if self._pattern is not None:
            value = self._pattern.sub(REDACTED, value)
        if extra and len(extra) >= MIN_SECRET_LENGTH:
            value = value.replace(extra, REDACTED)
        return value

    def any(self, value: Any, extra: str | None = None) -> Any:
        """Redact strings anywhere inside JSON-like data."""
        if isinstance(value, str):
            return self.text(value, extra)
        if isinstance(value, dict):
            return {k: self.any(v, extra) for k, v in value.items()}
        if isinstance(value, list):
            return [self.any(v, extra) for v in value]
        return value


class GrantRegistry:
    """Issues, finds and revokes grants; the single place where budgets are counted."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._by_digest: dict[bytes, Grant] = {}
        self._lock = threading.Lock()
        self.redactor = Redactor(secrets)
        self.closing = False

    def issue(
        self,
        default_target: str,
        max_calls: int,
        allowed: Iterable[str],
        *,
        grader: str = "",
        case_id: str = "",
    ) -> Grant:
        if max_calls < 0:
            raise ValueError("max_calls must be >= 0")
        names = list(dict.fromkeys(allowed))
        if default_target not in names:
            names.insert(0, default_target)
        grant = Grant(
            token=_secrets.token_urlsafe(32),
            default_target=default_target,
            max_calls=max_calls,
            allowed=names,
            grader=grader,
            case_id=case_id,
        )
        with self._lock:
            self._by_digest[_digest(grant.token)] = grant
        return grant

    def lookup(self, token: str | None) -> Grant | None:
        """The live grant for ``token``, or None. The token itself is compared in constant time;
        the dict is keyed by its SHA-256, so lookup timing says nothing about the token."""
        if not token:
            return None
        grant = self._by_digest.get(_digest(token))
        if grant is None or grant.revoked:
            return None
        if not hmac.compare_digest(grant.token.encode(), token.encode()):
            return None
        return grant

    def reserve(self, grant: Grant, n: int = 1) -> bool:
        """Reserve ``n`` calls, all or none. A reserved call counts even if it later fails."""
        if n < 0:
            raise ValueError("n must be >= 0")
        with self._lock:
            if grant.revoked or grant.used + n > grant.max_calls:
                return False
            grant.used += n
            return True

    def reserve_batch(self, grant: Grant, n: int) -> Reservation | None:
        """Reserve ``n`` calls, all or none, to be started request by request with
        :meth:`start`."""
        with self._lock:
            if n < 0 or grant.revoked or grant.used + n > grant.max_calls:
                return None
            grant.used += n
            reservation = Reservation(n)
            grant.reservations.add(reservation)
            return reservation

    def start(self, grant: Grant, reservation: Reservation, n: int = 1) -> bool:
        """A reserved request costing ``n`` calls (a judge panel: one per upstream call) may go
        upstream now; it is charged from here on."""
        with self._lock:
            if grant.revoked or reservation.pending < n:
                return False
            reservation.pending -= n
            return True

    def release(self, grant: Grant, reservation: Reservation) -> None:
        """Give back the calls of ``reservation`` that never started."""
        with self._lock:
            self._release(grant, reservation)

    @staticmethod
    def _release(grant: Grant, reservation: Reservation) -> None:
        grant.used -= reservation.pending
        reservation.pending = 0
        grant.reservations.discard(reservation)

    def revoke(self, grant: Grant) -> None:
        """Later calls with this token get 401; upstream calls still running are cancelled and
        recorded as abandoned, and queued batch calls are given back, so the usage and the
        records read right after this are final."""
        with self._lock:
            grant.revoked = True
            self._by_digest.pop(_digest(grant.token), None)
            for reservation in list(grant.reservations):
                self._release(grant, reservation)
        for task, flight in list(grant.in_flight.items()):
            task.cancel()
            self.abandon(grant, flight)

    def cancel_all(self) -> None:
        """Cancel every in-flight upstream call (used when the proxy shuts down)."""
        with self._lock:
            grants = list(self._by_digest.values())
        for grant in grants:
            for task in list(grant.in_flight):
                task.cancel()

    def settle(self, flight: InFlight) -> bool:
        """True for the first to settle ``flight`` (its end or its abandonment), which records
        it; False for the other."""
        with self._lock:
            first = not flight.settled
            flight.settled = True
            return first

    def abandon(self, grant: Grant, flight: InFlight) -> None:
        """Record a charged call whose answer the grader will never read: it left (exited,
        hung up, or answered in serve mode) while the call was under way."""
        if self.settle(flight):
            flight.abandoned.latency_ms = round((time.perf_counter() - flight.started) * 1000, 3)
            self.record(grant, flight.abandoned)

    def record(self, grant: Grant, call: JudgeCall) -> None:
        """Account one finished call and keep it, redacted (docs/security.md)."""
        call.finished_ns = time.time_ns()  # its trace span ends here (docs/otel.md)
        grant.latency_ms += call.latency_ms or 0.0
        grant.input_tokens += call.input_tokens
        grant.output_tokens += call.output_tokens
        grant.cached_calls += int(call.cached or call.replayed)
        if call.cost_usd:
            grant.cost_usd += call.cost_usd
        redact, token = self.redactor, grant.token
        call.system_prompt = redact.text(call.system_prompt, token)
        call.question = redact.text(call.question, token)
        call.task = redact.any(call.task, token)
        call.response = redact.text(call.response, token)
        call.panel = redact.any(call.panel, token)
        grant.records.append(call)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
