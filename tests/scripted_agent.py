"""A scripted CLI agent for tests: reads the prompt on stdin and prints a recorded transcript.

``python tests/scripted_agent.py RECORDING`` prints the file as the agent's stdout, the way
``claude -p --output-format stream-json`` or ``codex exec --json`` would (docs/agents.md).
``python tests/scripted_agent.py FOLDER`` picks the recording by the prompt: ``FOLDER/routes.json``
lists ``[keyword, file]`` pairs, and the first keyword the prompt contains (ignoring case; ``""``
matches any prompt) names the file, as AgentV's scripted example agents choose their reply.
"""

import json
import sys
from pathlib import Path

prompt = sys.stdin.read()
source = Path(sys.argv[1])
if source.is_dir():
    routes = json.loads((source / "routes.json").read_text())
    source = source / next(file for word, file in routes if word.lower() in prompt.lower())
sys.stdout.write(source.read_text())
