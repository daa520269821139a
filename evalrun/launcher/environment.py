"""The environment a grader gets: the parent's, minus credentials (named like one, or inside a
URL), plus the proxy variables and where to keep bytecode."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

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
#: The userinfo of any URL in a value, ``scheme://user:password@`` or ``scheme://token@``, up to
#: the last ``@`` before the host (a host holds none): ``DATABASE_URL``, ``HTTPS_PROXY``,
#: ``PIP_INDEX_URL``, a git remote with a token.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@")


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


def without_url_credentials(value: str) -> str:
    """``value`` with the userinfo of every URL in it removed, so ``postgres://u:pw@db/app``
    reaches a grader as ``postgres://db/app`` (docs/security.md)."""
    return _URL_USERINFO.sub(r"\1", value)


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
        name: value if name in allowed else without_url_credentials(value)
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


def agentv_run_variables(
    run_dir: Path, experiment: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The run variables AgentV sets for its graders (docs/grader-protocol.md, "Environment"):
    ``AGENTV_RUN_DIR`` always; ``AGENTV_RUN_TIMESTAMP`` (the run folder's name) and
    ``AGENTV_EXPERIMENT`` only where the caller has not set them, as AgentV keeps those."""
    base = os.environ if base is None else base
    out = {"AGENTV_RUN_DIR": str(run_dir)}
    if not base.get("AGENTV_RUN_TIMESTAMP", "").strip():
        out["AGENTV_RUN_TIMESTAMP"] = run_dir.name
    if not base.get("AGENTV_EXPERIMENT", ""):
        out["AGENTV_EXPERIMENT"] = experiment
    return out


#: Program names that mean the interpreter evalrun runs under, not PATH's: evalrun run from an
#: unactivated venv would otherwise start graders on a python without grader_sdk
#: (docs/eval-files.md, "Which python").
OWN_PYTHON = frozenset({"python", "python3"})


def own_python(argv: list[str]) -> list[str]:
    """``argv`` with a bare ``python``/``python3`` program made evalrun's own interpreter; a
    path (``/usr/bin/python3``, ``./venv/bin/python``) is kept: that is how an eval opts out."""
    if argv and argv[0] in OWN_PYTHON:
        return [sys.executable, *argv[1:]]
    return argv
