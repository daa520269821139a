"""An honest grader holding a proxy token while the hostile one looks around: until the hostile
one says it is done, or ``config.wait`` seconds (a ``strict`` hostile cannot write to say so)."""

import json
import os
import sys
import time

config = json.load(sys.stdin).get("config") or {}
sync = config["sync"]
with open(os.path.join(sync, "bystander-up"), "w") as f:
    f.write("up")
deadline = time.monotonic() + config.get("wait", 15)
while not os.path.exists(os.path.join(sync, "hostile-done")) and time.monotonic() < deadline:
    time.sleep(0.02)
print(json.dumps({"score": 1.0, "reason": "waited"}))
