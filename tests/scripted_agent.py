"""A scripted CLI agent for tests: reads the prompt on stdin and prints a recorded transcript.

``python tests/scripted_agent.py RECORDING`` prints the file as the agent's stdout, the way
``claude -p --output-format stream-json`` or ``codex exec --json`` would (docs/agents.md).
"""

import sys
from pathlib import Path

sys.stdin.read()
sys.stdout.write(Path(sys.argv[1]).read_text())
