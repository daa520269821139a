"""Every private API and fast path listed in docs/performance.md ("Private APIs and fast paths")
still exists in the installed version and gives what the public, slower way gives. An upgrade
that renames one fails here, not as a slower or broken run."""

from __future__ import annotations

import importlib.util
import inspect
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import uvicorn

from tests.conftest import ROOT, run_cli


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_the_sdk_socket_client_gets_from_socket_what_socket_gets() -> None:
    """grader_sdk/_http.py: ``_socket``, the extension ``socket`` wraps (its import is the cost)."""
    import _socket

    assert issubclass(socket.socket, _socket.socket)
    for name in ("SOCK_STREAM", "IPPROTO_TCP", "TCP_NODELAY", "MSG_PEEK"):
        assert int(getattr(_socket, name)) == int(getattr(socket, name)), name
    fast = _socket.getaddrinfo("127.0.0.1", 8080, 0, _socket.SOCK_STREAM)
    slow = socket.getaddrinfo("127.0.0.1", 8080, 0, socket.SOCK_STREAM)
    assert [tuple(map(int, a[:3])) + a[3:] for a in fast] == [
        tuple(map(int, a[:3])) + a[3:] for a in slow
    ]


def test_httpx_without_its_cli_module_has_the_same_public_names() -> None:
    """evalrun/targets/providers/_httpx.py keeps ``httpx._main`` (the CLI) from being imported."""
    # a file check, not find_spec: a test before this one in the same process may have marked
    # httpx._main missing in sys.modules already, which makes find_spec say None
    import httpx

    main = Path(httpx.__file__).with_name("_main.py")
    assert main.is_file(), "the hack saves nothing now"
    show = "import sys; print(sorted(httpx.__all__), 'httpx._main' in sys.modules and "
    show += "sys.modules['httpx._main'] is not None)"
    fast = python(f"from evalrun.targets.providers._httpx import httpx; {show}")
    slow = python(f"import httpx; {show}")
    assert fast.returncode == slow.returncode == 0, fast.stderr + slow.stderr
    names_fast, _, skipped = fast.stdout.strip().rpartition(" ")
    assert skipped == "False"
    assert names_fast == slow.stdout.strip().rpartition(" ")[0]


def test_the_usage_line_names_an_argument_through_typers_private_hook() -> None:
    """evalrun/cli.py replaces ``TyperArgument._usage_display_name`` (``{FILES}`` -> ``[FILES...]``) and
    ``display_type_rich``, and reads ``type_descriptor``."""
    import typer.core

    argument = typer.core.TyperArgument
    assert callable(argument._usage_display_name)
    assert callable(argument.display_type_rich)
    assert "type_descriptor" in inspect.signature(argument.__init__).parameters
    done = run_cli("run", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: evalrun run [OPTIONS] [FILES...] " in done.stdout, done.stdout


@pytest.mark.parametrize(
    "finish",
    [
        "from evalrun import cli; sys.argv = ['evalrun', '--help']; cli.entry()",
        "import os; from grader_sdk._grader import MODE_ENV, SERVE, _finish; "
        "os.environ[MODE_ENV] = SERVE; print('out', end=''); _finish(3)",
    ],
)
def test_exiting_without_the_teardown_runs_the_atexit_hooks_like_an_ordinary_exit(
    finish: str,
) -> None:
    """evalrun/cli.py ``entry`` and grader_sdk ``_finish``: ``atexit._run_exitfuncs()`` and
    ``os._exit`` give the output and exit code an ordinary exit (``sys.exit``) gives."""
    hook = "import atexit, sys; atexit.register(lambda: print('hook ran', flush=True)); "
    fast = python(hook + finish)
    ordinary = finish.replace("cli.entry()", "cli.main()").replace("_finish(3)", "sys.exit(3)")
    slow = python(hook + ordinary)
    assert "hook ran" in fast.stdout, fast.stderr
    assert (fast.returncode, fast.stdout) == (slow.returncode, slow.stdout), (fast, slow)


def test_the_proxy_server_overrides_methods_uvicorn_still_has() -> None:
    """proxy/server.py's ``_Server`` replaces ``capture_signals``, ``main_loop`` and ``shutdown``
    and reads ``server_state`` and ``servers``: a rename upstream would leave them uncalled."""
    server = uvicorn.Server(uvicorn.Config(app=None))
    for name in ("capture_signals", "main_loop", "on_tick", "shutdown"):
        assert callable(getattr(uvicorn.Server, name)), name
    assert "sockets" in inspect.signature(uvicorn.Server.serve).parameters
    assert hasattr(server.server_state, "connections") and hasattr(server.server_state, "tasks")
    assert "servers" in inspect.getsource(uvicorn.Server.startup)


@pytest.mark.ray
def test_the_ray_logger_quieted_by_the_executor_exists() -> None:
    """evalrun/runner/ray_executor.py quiets the ``ray._private.runtime_env`` logger by name."""
    pytest.importorskip("ray", reason="the Ray executor needs the [ray] extra")
    assert importlib.util.find_spec("ray._private.runtime_env") is not None
