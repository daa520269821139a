"""The environment a grader gets: the parent's, minus credentials, plus the proxy variables."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping

#: Variable-name patterns that look like credentials (matched case-insensitively).
SECRET_PATTERNS = ("*API_KEY*", "*_TOKEN", "*SECRET*", "*PASSWORD*", "*CREDENTIAL*", "*_KEY")


#: The proxy's URL and token go out under each prefix: AgentV 4.x SDKs read AGENTV_TARGET_PROXY,
#: AgentV's current SDK AGENTV_PROVIDER_PROXY (docs/grader-protocol.md, "Environment").
PROXY_ENV_PREFIXES = ("AGENTV_TARGET_PROXY", "AGENTV_PROVIDER_PROXY", "EVALRUN_PROXY")


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, p) for p in SECRET_PATTERNS)


def grader_environment(
    *,
    secret_names: Iterable[str],
    allow: Iterable[str] = (),
    proxy_url: str | None = None,
    proxy_token: str | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    base = os.environ if base is None else base
    allowed = set(allow)
    secrets = set(secret_names)
    env = {
        name: value
        for name, value in base.items()
        if name in allowed or (name not in secrets and not looks_secret(name))
    }
    if proxy_url and proxy_token:
        for prefix in PROXY_ENV_PREFIXES:
            env[f"{prefix}_URL"] = proxy_url
            env[f"{prefix}_TOKEN"] = proxy_token
    return env
