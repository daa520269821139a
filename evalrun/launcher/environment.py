"""The environment a grader gets: the parent's, minus credentials, plus the proxy variables and
where to keep bytecode."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from evalrun.launcher.bytecode import use_pycache

#: Words that mark a credential anywhere in a variable's name (``MISTRALAPIKEY``).
SECRET_SUBSTRINGS = (
    "APIKEY",
    "API_KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "PRIVATE_KEY",
    "ACCESS_KEY",
)
#: Words that mark a credential when they are a whole ``_``-separated part of the name
#: (``GH_PAT``, ``SSH_AUTH_SOCK``, ``DB_PASS``) but not inside another word (``PATH``,
#: ``GIT_AUTHOR_NAME``, ``KEYBOARD``).
SECRET_WORDS = frozenset(
    {
        "KEY",
        "KEYS",
        "PAT",
        "AUTH",
        "OAUTH",
        "BEARER",
        "PASS",
        "PWD",
        "JWT",
        "DSN",
        "COOKIE",
        "CREDS",
        "SESSIONID",
        "SIGNATURE",
    }
)
#: Names that match the words above but hold no secret.
NOT_SECRET = frozenset({"PWD", "OLDPWD"})
_PARTS = re.compile(r"[^A-Z0-9]+")


#: The proxy's URL and token go out under each prefix: AgentV 4.x SDKs read AGENTV_TARGET_PROXY,
#: AgentV's current SDK AGENTV_PROVIDER_PROXY (docs/grader-protocol.md, "Environment").
PROXY_ENV_PREFIXES = ("AGENTV_TARGET_PROXY", "AGENTV_PROVIDER_PROXY", "EVALRUN_PROXY")


def looks_secret(name: str) -> bool:
    """Whether a variable's name says it holds a credential (case-insensitive); the rules are
    listed in docs/security.md."""
    upper = name.upper()
    if upper in NOT_SECRET:
        return False
    if any(word in upper for word in SECRET_SUBSTRINGS):
        return True
    return any(part in SECRET_WORDS for part in _PARTS.split(upper))


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
    use_pycache(env, allowed)
    if proxy_url and proxy_token:
        env.update(proxy_variables(proxy_url, proxy_token))
    return env


def proxy_variables(url: str, token: str) -> dict[str, str]:
    """The judge proxy's address and one grader run's token, under AgentV's and evalrun's names."""
    out = {}
    for prefix in PROXY_ENV_PREFIXES:
        out[f"{prefix}_URL"] = url
        out[f"{prefix}_TOKEN"] = token
    return out
