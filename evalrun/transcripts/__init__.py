"""What an agent did on a case: its messages and tool calls, read from its own stream format.

A neutral model (``model.py``) and the readers that build it from a ``cli`` target's stdout
(``readers.py``); the tool-trajectory matcher (``trajectory.py``) works on it. It imports nothing
of ours, so every stage may carry a transcript (docs/agents.md).
"""

from evalrun.transcripts.model import Step, ToolCall, Transcript, Usage
from evalrun.transcripts.readers import FORMATS, TranscriptError, read_transcript

__all__ = [
    "FORMATS",
    "Step",
    "ToolCall",
    "Transcript",
    "TranscriptError",
    "Usage",
    "read_transcript",
]
