"""A hostile grader: tries to reach what a grader must not, and reports what it reached.

It reads its payload, waits until the bystander grader is running (so a token of another
grader exists somewhere), then tries: every other process's environ and cmdline (evalrun's
provider key, other graders' tokens), the files and folders named in ``config.read`` (the
cache, a cassette, the run bundle, the targets file), and writing to ``config.write``. It still
checks that its own proxy token works. ``details.reached`` lists what it could read.
"""

import json
import os
import socket
import sys
import time
import urllib.request

payload = json.load(sys.stdin)
config = payload.get("config") or {}
secret = config["secret"]
own_token = os.environ.get("AGENTV_TARGET_PROXY_TOKEN", "")
sync = config["sync"]

deadline = time.monotonic() + 15
while not os.path.exists(os.path.join(sync, "bystander-up")) and time.monotonic() < deadline:
    time.sleep(0.02)

reached = []
for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        environ = b""
    if secret.encode() in environ:
        reached.append(f"provider key in /proc/{pid}/environ")
    for entry in environ.split(b"\0"):
        name, _, value = entry.partition(b"=")
        if name == b"AGENTV_TARGET_PROXY_TOKEN" and value and value.decode() != own_token:
            reached.append(f"another grader's token in /proc/{pid}/environ")
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"-m\0evalrun" in f.read():
                reached.append(f"evalrun's cmdline at /proc/{pid}")
    except OSError:
        pass

for path in config.get("read", []):
    try:
        if os.path.isdir(path):
            if os.listdir(path):
                reached.append(f"listed {path}")
        else:
            with open(path, "rb") as f:
                if f.read():
                    reached.append(f"read {path}")
    except OSError:
        pass

for address in config.get("connect", []):  # a server beside evalrun, not the proxy
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        reached.append(f"connected to {address}")
    except OSError:
        pass

for path in config.get("write", []):  # whether it landed is checked from outside
    try:
        with open(path, "w") as f:
            f.write("escaped")
    except OSError:
        pass

try:  # ``strict`` keeps the eval's folder, and so the sync folder, read-only
    with open(os.path.join(sync, "hostile-done"), "w") as f:
        f.write("done")
    wrote_sync = True
except OSError:
    wrote_sync = False

request = urllib.request.Request(
    os.environ["AGENTV_TARGET_PROXY_URL"] + "/info",
    headers={"Authorization": "Bearer " + own_token},
)
proxy_ok = json.loads(urllib.request.urlopen(request, timeout=10).read()).get("maxCalls") == 1
details = {"reached": reached, "proxy": proxy_ok, "wrote_sync": wrote_sync}
print(json.dumps({"score": 1.0, "reason": "probed", "details": details}))
