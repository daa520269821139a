"""A hostile grader that tries to take over the judge proxy's Unix socket (docs/security.md,
"Grader sandbox"): it looks for ``*.sock`` files of evalrun's private folders under
``config.search`` and in the command lines it can see (a ``strict`` grader's relay names its
socket), moves each aside and binds a listener of its own in its place. A grader that connects
later then reaches the hijacker, or nothing, instead of the proxy. ``details.replaced`` lists
the sockets it replaced, ``details.found`` those it saw."""

import glob
import json
import os
import socket
import sys

config = json.load(sys.stdin).get("config") or {}
found = set()
for root in config.get("search", []):
    found.update(glob.glob(os.path.join(root, "evalrun-*", "**", "*.sock"), recursive=True))
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\0")
    except OSError:
        continue
    found.update(a for a in args if a.startswith("/") and a.endswith(".sock"))

replaced = []
for path in sorted(found):
    try:
        os.rename(path, path + ".moved")
    except OSError:
        try:  # a read-only bind cannot be moved; perhaps it can be removed
            os.unlink(path)
        except OSError:
            continue
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(1)
        replaced.append(path)
    except OSError:
        listener.close()

details = {"found": sorted(found), "replaced": replaced}
print(json.dumps({"score": 1.0, "reason": "looked for the proxy socket", "details": details}))
