"""The loopback rule of evalrun's local HTTP servers: which ``Host`` and ``Origin`` headers a
request may carry (docs/security.md, "Host and Origin check, no CORS").

A browser page on another site can reach a loopback port, and DNS rebinding can make its own
name resolve to 127.0.0.1; both are refused because such a request names a non-loopback host or
origin. Kept here, with nothing of ours imported, so every server of evalrun applies one rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: A ``Host`` header naming a loopback address, with or without a port.
LOOPBACK_HOST = re.compile(rb"(?:127\.0\.0\.1|localhost|\[::1\])(?::\d{1,5})?", re.IGNORECASE)
#: An ``Origin`` header of a page served from a loopback address.
LOOPBACK_ORIGIN = re.compile(
    rb"https?://(?:127\.0\.0\.1|localhost|\[::1\])(?::\d{1,5})?", re.IGNORECASE
)
#: The two refusals, as the servers word them.
BAD_HOST = "Host header must be a loopback address"
CROSS_ORIGIN = "cross-origin requests are not allowed"


def refusal(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """Why a request with these (lower-case name, value) headers is refused, or None.

    No ``Host``, two of them, or one that is not loopback is refused; an ``Origin`` is allowed
    only when it is loopback (requests that are not cross-site carry none)."""
    host: bytes | None = None
    origins: list[bytes] = []
    for name, value in headers:
        if name == b"host":
            host = b"" if host is not None else value  # two Host headers: refuse
        elif name == b"origin":
            origins.append(value)
    if host is None or not LOOPBACK_HOST.fullmatch(host):
        return BAD_HOST
    if any(not LOOPBACK_ORIGIN.fullmatch(origin) for origin in origins):
        return CROSS_ORIGIN
    return None
