"""The ``multiply`` tool of shop.eval.yaml: the call as JSON on stdin, the result as JSON out."""

import json
import sys

call = json.load(sys.stdin)
arguments = call["arguments"]
print(json.dumps(arguments["a"] * arguments["b"]))
