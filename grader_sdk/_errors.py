"""Typed errors for the judge proxy's error codes, so graders can react to a cause, not a status."""

from __future__ import annotations

from typing import Any


class ProxyError(Exception):
    """The proxy refused or failed a call. ``code`` is the wire error code, ``body`` its JSON."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body = body or {}


class ProxyNotConfigured(ProxyError):
    """No proxy URL/token in the environment: the grader was not given ``target:`` access."""


class ProxyUnavailable(ProxyError):
    """The proxy could not be reached (connection refused, reset, timed out)."""


class ProtocolError(ProxyError):
    """The proxy answered with something that does not follow the wire contract."""


class Unauthorized(ProxyError):
    """401: the token is missing, wrong or already revoked."""


class BudgetExceeded(ProxyError):
    """429: the call (or the whole batch) would pass this grader's ``max_calls``."""

    @property
    def limit(self) -> int | None:
        return _int_or_none(self.body.get("limit"))

    @property
    def used(self) -> int | None:
        return _int_or_none(self.body.get("used"))

    @property
    def requested(self) -> int | None:
        """Budget units the refused batch would have cost (absent for a single call)."""
        return _int_or_none(self.body.get("requested"))


class UnknownTarget(ProxyError):
    """400: the named target is not one this grader may use."""

    @property
    def allowed(self) -> list[str]:
        allowed = self.body.get("allowed")
        return [str(a) for a in allowed] if isinstance(allowed, list) else []


class BadRequest(ProxyError):
    """400: the request body was rejected."""


class PayloadTooLarge(ProxyError):
    """413: the request body is larger than the proxy accepts."""


class UnsupportedRequest(ProxyError):
    """422: the target cannot answer this kind of request (e.g. free text to the local judge)."""


class UpstreamError(ProxyError):
    """502: the judge target failed after the proxy's retries."""


class UpstreamTimeout(UpstreamError):
    """504: the judge target did not answer in time."""


class ShuttingDown(ProxyError):
    """503: the run is ending and the proxy accepts no new calls."""


class JudgeReplyError(Exception):
    """The judge answered, but its reply could not be read even after a retry."""

    def __init__(self, message: str, *, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


_BY_CODE: dict[str, type[ProxyError]] = {
    "unauthorized": Unauthorized,
    "max_calls_exceeded": BudgetExceeded,
    "unknown_target": UnknownTarget,
    "bad_request": BadRequest,
    "payload_too_large": PayloadTooLarge,
    "unsupported_request": UnsupportedRequest,
    "upstream_error": UpstreamError,
    "upstream_timeout": UpstreamTimeout,
    "shutting_down": ShuttingDown,
}

_BY_STATUS: dict[int, type[ProxyError]] = {
    401: Unauthorized,
    413: PayloadTooLarge,
    422: UnsupportedRequest,
    429: BudgetExceeded,
    502: UpstreamError,
    503: ShuttingDown,
    504: UpstreamTimeout,
    400: BadRequest,
}


def error_from_response(status: int, payload: Any, fallback_text: str = "") -> ProxyError:
    """Map an HTTP error answer to its typed exception (the code wins over the status)."""
    body: dict[str, Any] = {}
    if isinstance(payload, dict):
        inner = payload.get("error")
        if isinstance(inner, dict):  # OpenAI's shape (the /v1 routes)
            body = inner
        elif isinstance(inner, str):  # AgentV's shape: the message, with code and extras beside
            body = {**{k: v for k, v in payload.items() if k != "error"}, "message": inner}
        elif isinstance(payload.get("detail"), str):
            body = {"message": payload["detail"]}
    code = body.get("code") if isinstance(body.get("code"), str) else None
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or ProxyError
    message = str(body.get("message") or fallback_text.strip()[:300] or f"HTTP {status}")
    return cls(
        f"{message} (HTTP {status}{', ' + code if code else ''})",
        status=status,
        code=code,
        body=body,
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
