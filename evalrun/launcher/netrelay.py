"""Runs inside a ``strict`` sandbox, in its own network namespace (docs/security.md): listens
on ``127.0.0.1:PORT``, where the grader expects the judge proxy, carries each connection to the
proxy's Unix socket, starts the grader, and exits with the grader's status.

Started as a script with ``python -I -S``: standard library only, nothing of evalrun imported.
Usage: ``netrelay.py PORT SOCKET -- ARGV...``
"""

import contextlib
import os
import socket
import sys
import threading


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _carry(client: socket.socket, path: str) -> None:
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
        try:
            upstream.connect(path)
        except OSError:
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def main(args: list[str]) -> int:
    port, path, separator, *argv = args
    if separator != "--" or not argv:
        print("usage: netrelay.py PORT SOCKET -- ARGV...", file=sys.stderr)
        return 2
    listener = socket.create_server(("127.0.0.1", int(port)))
    child = os.fork()
    if child == 0:
        listener.close()
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            print(f"cannot start {argv[0]!r}: {exc.strerror}", file=sys.stderr)
            os._exit(127)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
