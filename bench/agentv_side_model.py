"""The loopback model that AgentV and evalrun both talk to in the side-by-side check
(docs/eval-files.md, "Side by side with AgentV").

One OpenAI Chat Completions endpoint (``POST .../chat/completions``) plays two roles, told
apart by the request's ``model``:

- ``side-target`` (the system under test): a deterministic answer computed from the last user
  message alone, so both tools get the same answer for the same case. Half the inputs (by a
  hash of the text) get the text echoed back with ``GOOD_MARK``; the rest get a fixed refusal
  with ``BAD_MARK``.
- anything else (the judge): one JSON verdict that AgentV's LLM graders and evalrun's judge
  helpers both read, passing when the prompt it was asked about holds ``GOOD_MARK`` and no
  ``BAD_MARK``. So an LLM grader's verdict follows the answer being judged, never which tool
  asked.

    python bench/agentv_side_model.py      # prints the port, serves until killed
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TARGET_MODEL = "side-target"
JUDGE_MODEL = "side-judge"
GOOD_MARK = "[side:good]"
BAD_MARK = "[side:bad]"
REFUSAL = "I cannot help with that."
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def message_text(content: Any) -> str:
    """The text of a chat message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def target_answer(messages: list[dict[str, Any]]) -> str:
    """The system under test's answer: a pure function of the last user message."""
    users = [message_text(m.get("content")) for m in messages if m.get("role") == "user"]
    last = users[-1] if users else ""
    if hashlib.sha256(last.encode()).digest()[0] % 2 == 0:
        return f"{last}\n{GOOD_MARK}"
    return f"{REFUSAL}\n{BAD_MARK}"


def judge_verdict(messages: list[dict[str, Any]]) -> str:
    """One verdict for the whole prompt, in the fields both tools read (``pass``, ``score``)."""
    prompt = "\n".join(message_text(m.get("content")) for m in messages)
    good = GOOD_MARK in prompt and BAD_MARK not in prompt
    return json.dumps(
        {
            "pass": good,
            "score": 1.0 if good else 0.0,
            "relevant": good,
            "reason": "the answer carries the good mark" if good else "no good mark",
            "confidence": 0.9,
        }
    )


def completion(model: str, text: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-side",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": USAGE,
        }
    ).encode()


def streamed(model: str, text: str) -> bytes:
    """The same answer as server-sent events, as OpenAI streams it (``"stream": true``): a
    chunk with the text, one with the finish reason, one with the usage, then ``[DONE]``."""
    head = {"id": "chatcmpl-side", "object": "chat.completion.chunk", "created": 0, "model": model}
    chunks = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**head, "choices": [], "usage": USAGE},
    ]
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return ("".join(events) + "data: [DONE]\n\n").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if os.environ.get("SIDE_MODEL_LOG"):
            with open(os.environ["SIDE_MODEL_LOG"], "ab") as log:
                log.write(self.path.encode() + b" " + raw + b"\n")
        body = json.loads(raw or b"{}")
        if not self.path.endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "only /chat/completions"}}')
            return
        model = str(body.get("model", ""))
        messages = body.get("messages") or []
        text = target_answer(messages) if model == TARGET_MODEL else judge_verdict(messages)
        if body.get("stream"):
            self._send(200, streamed(model, text), "text/event-stream")
        else:
            self._send(200, completion(model, text))

    def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        pass


def start() -> ThreadingHTTPServer:
    """Serve on 127.0.0.1 (a free port) in a daemon thread; ``server_address[1]`` is the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    running = start()
    print(running.server_address[1], flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        sys.exit(0)
