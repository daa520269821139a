"""What an agent did on a case: its messages and tool calls, read from its own stream format.

A neutral model (``model.py``) and the readers that build it from a ``cli`` target's stdout
(``readers.py``); the tool-trajectory matcher (``trajectory.py``) works on it. It imports nothing
of ours, so every stage may carry a transcript (docs/agents.md). The readers' ~20 pydantic
models are built on first use of their names: every run carries the model, few read an agent's
stream (docs/performance.md, "Start cost").
"""

from evalrun.transcripts.model import Step, ToolCall, Transcript, Usage

__all__ = [
    "FORMATS",
    "Step",
    "ToolCall",
    "Transcript",
    "TranscriptError",
    "Usage",
    "read_transcript",
]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from evalrun.transcripts.readers import FORMATS, TranscriptError, read_transcript

_READERS = ("FORMATS", "TranscriptError", "read_transcript")


def __getattr__(name: str) -> object:
    if name in _READERS:
        import evalrun.transcripts.readers

        return getattr(evalrun.transcripts.readers, name)
    raise AttributeError(f"module 'evalrun.transcripts' has no attribute {name!r}")
