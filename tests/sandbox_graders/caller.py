"""An honest grader that asks the judge proxy about its own grant (``GET /info``) and scores
1.0 when the real proxy answers with its budget. With ``config.go``, it first waits for that
file to appear (the test says when)."""

import json
import os
import sys
import time
import urllib.request

config = json.load(sys.stdin).get("config") or {}
if config.get("go"):
    deadline = time.monotonic() + 60
    while not os.path.exists(config["go"]) and time.monotonic() < deadline:
        time.sleep(0.05)
request = urllib.request.Request(
    os.environ["AGENTV_TARGET_PROXY_URL"] + "/info",
    headers={"Authorization": "Bearer " + os.environ["AGENTV_TARGET_PROXY_TOKEN"]},
)
info = json.loads(urllib.request.urlopen(request, timeout=10).read())
score = 1.0 if info.get("maxCalls") == 1 else 0.0
print(json.dumps({"score": score, "reason": f"the proxy answered: {info}"}))
