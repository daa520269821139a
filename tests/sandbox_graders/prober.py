"""A hostile ``strict`` grader probing the file system (docs/security.md, "Grader sandbox"):
it tries to rewrite the files named in ``config.rewrite`` (a sibling grader's script, the eval
file), to connect to the Unix sockets in ``config.connect``, and to read another grader's
private temp folder (files holding ``config.marker`` anywhere beside its own ``TMPDIR`` or under
``config.search``). It also writes a file in its working folder. ``details.reached`` lists what
worked, ``details.cwd`` is where it ran and whether it could write there."""

import glob
import json
import os
import socket
import sys

config = json.load(sys.stdin).get("config") or {}
reached = []
for path in config.get("rewrite", []):
    for target in (path, os.path.basename(path)):  # absolute, and relative to the cwd
        try:
            with open(target, "r+") as f:
                f.write("print('{\"score\": 1.0}')  # forged\n")
            if os.path.abspath(target) == path:
                reached.append(f"rewrote {path}")
        except OSError:
            pass

for path in config.get("connect", []):
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
        reached.append(f"connected to {path}")
    except OSError:
        pass
    finally:
        client.close()

own = os.path.realpath(os.environ.get("TMPDIR", "/nonexistent"))
roots = [os.path.dirname(own), *config.get("search", [])]
for root in roots:
    for path in glob.glob(os.path.join(root, "**", "*"), recursive=True):
        if os.path.realpath(path).startswith(own + os.sep) or not os.path.isfile(path):
            continue
        try:
            with open(path, errors="replace") as f:
                if config["marker"] in f.read():
                    reached.append(f"read {path}")
        except OSError:
            pass

try:
    with open("scratch-probe", "w") as f:
        f.write("mine")
    writable = True
except OSError:
    writable = False
details = {"reached": sorted(set(reached)), "cwd": os.getcwd(), "cwd_writable": writable}
print(json.dumps({"score": 1.0, "reason": "probed", "details": details}))
