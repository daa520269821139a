"""Run the hand-labelled judge-reply corpus through the real built-in graders (docs/judge-graders.md).

Each corpus entry is one judge reply, written for one grader, with the value a careful reader
takes from it (or ``unreadable``). The grader runs as a real subprocess behind the real judge
proxy, whose judge is an ``openai``-kind target pointed at a loopback fake that speaks the Chat
Completions wire format and answers with the entry's reply (and finish reason). Each run is
classed as

    read right        the label is a value and the grader scored exactly that value
    wrong             the grader scored a value the label does not give (a silent misread)
    abstained right   the label is ``unreadable`` and the grader abstained (exit 3) with a reason
    abstained wrong   the label is a value but the grader left the case unscored
    error             the grader crashed (exit 1 or a broken result)

    python bench/reply_corpus.py [--corpus tests/data/judge_replies.yaml] [--root DIR] [--show]

``--root`` runs the graders (and the proxy) of another checkout, e.g. an export of an older
commit, so the same corpus measures old and new code. Only the standard library, pyyaml and the
checkout's own ``proxy``/``evalrun`` packages are used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
CORPUS = HERE / "tests" / "data" / "judge_replies.yaml"
GRADERS = ("contextual_precision", "contextual_recall", "quality", "pattern", "prompt_quality")
OUTCOMES = ("read right", "wrong", "abstained right", "abstained wrong", "error")
FIXED_STATEMENTS = '{"statements": ["The bridge opened in 1932."]}'
FIXED_ATTRIBUTION = '{"attributable": true, "node": 1, "reason": "passage 1 says so"}'

REACT_TRANSCRIPT = (
    "Thought: I need the population of the town first.\nAction: search[Ravenholt population]\n"
    "Observation: Ravenholt had 12,400 residents in 2020.\nThought: That answers it.\n"
    "Final Answer: About 12,400 people."
)


@dataclass
class Entry:
    id: str
    grader: str
    reply: str
    expected: Any
    call: str = ""
    finish_reason: str = "stop"
    refusal: str | None = None
    #: what the judge answers when asked again with more room than its first request had
    roomy_reply: str | None = None


@dataclass
class Outcome:
    entry: Entry
    outcome: str
    got: Any
    reason: str


def load_corpus(path: Path) -> list[Entry]:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    entries = [Entry(**item) for item in data["replies"]]
    ids = Counter(e.id for e in entries)
    duplicates = [i for i, n in ids.items() if n > 1]
    if duplicates:
        raise ValueError(f"duplicate corpus ids: {', '.join(duplicates)}")
    for entry in entries:
        if entry.grader not in GRADERS:
            raise ValueError(f"{entry.id}: unknown grader {entry.grader!r}")
    return entries


def payload_for(entry: Entry) -> dict[str, Any]:
    """The stdin payload that makes the grader ask the judge exactly the entry's question."""
    base: dict[str, Any] = {"protocol": "evalrun.grader/1", "case_id": entry.id}
    # the corpus holds replies to one item each: the RAG graders' per-item mode asks for those
    if entry.grader == "contextual_precision":
        return {
            **base,
            "input": "When did the Harbour Bridge in Port Ellis open?",
            "criteria": "It opened in 1932.",
            "config": {
                "retrieval_context": ["The Port Ellis bridge opened to traffic in 1932."],
                "mode": "per-item",
            },
        }
    if entry.grader == "contextual_recall":
        return {
            **base,
            "input": "When did the bridge open, and how long is it?",
            "criteria": "The bridge opened in 1932. It is 1,149 metres long.",
            "config": {
                "retrieval_context": [
                    "The bridge opened in 1932.",
                    "Its deck carries eight lanes.",
                ],
                "mode": "per-item",
            },
        }
    if entry.grader == "quality":
        return {
            **base,
            "input": "Why do leaves change colour in autumn?",
            "output": "Chlorophyll breaks down as days shorten, revealing yellow pigments.",
            "config": {"dimensions": ["coherence"]},
        }
    if entry.grader == "pattern":
        return {
            **base,
            "input": "How many people live in Ravenholt?",
            "output": REACT_TRANSCRIPT,
            "config": {"pattern": "react", "runs": 1},
        }
    return {
        **base,
        "input": "Summarise the attached contract in five bullet points for a lawyer.",
        "output": "",
        "config": {"runs": 1},
    }


def token_limit(body: dict[str, Any]) -> int | None:
    """The request's max tokens, under either of the Chat Completions API's names."""
    return body.get("max_completion_tokens") or body.get("max_tokens")


def reply_for(
    entry: Entry, body: dict[str, Any], first_room: int | None
) -> tuple[str, str, str | None]:
    """(text, finish reason, refusal) the fake judge answers ``body`` with; ``first_room`` is
    the max_tokens of the entry's first request (None if it had none)."""
    prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
    if entry.grader == "contextual_recall":
        asks_statements = "<passages>" not in prompt
        if entry.call == "statements" and not asks_statements:
            return FIXED_ATTRIBUTION, "stop", None
        if entry.call != "statements" and asks_statements:
            return FIXED_STATEMENTS, "stop", None
    room = token_limit(body)
    if entry.roomy_reply is not None and room and first_room and room > first_room:
        return entry.roomy_reply, "stop", None
    return entry.reply, entry.finish_reason, entry.refusal


def chat_completion(text: str, finish: str, refusal: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": refusal}
    if refusal is not None and not text:
        message["content"] = None
    return {
        "id": "chatcmpl-corpus",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "fake-judge",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


# --- a loopback fake of the Chat Completions endpoint -------------------------------------------


class FakeJudge:
    """HTTP/1.1 on 127.0.0.1; each entry's target sends its own bearer key, which picks the reply."""

    def __init__(self, entries: dict[str, Entry]) -> None:
        self.entries = entries
        self.bodies: dict[str, list[dict[str, Any]]] = {k: [] for k in entries}
        self.first_room: dict[str, int | None] = {}
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FakeJudge:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = {}
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = json.loads(await reader.readexactly(int(headers.get("content-length", 0))))
                key = headers.get("authorization", "").removeprefix("Bearer ").strip()
                entry = self.entries[key]
                self.bodies[key].append(body)
                self.first_room.setdefault(key, token_limit(body))
                answer = reply_for(entry, body, self.first_room[key])
                data = json.dumps(chat_completion(*answer)).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


# --- running and classing ---------------------------------------------------------------------


def _same_number(a: Any, b: Any) -> bool:
    try:
        return math.isclose(float(a), float(b), abs_tol=1e-6)
    except (TypeError, ValueError):
        return False


def _norm(text: Any) -> str:
    return " ".join(str(text).lower().split()).strip(" .")


def reading(entry: Entry, result: dict[str, Any]) -> Any:
    """The value the grader's result says it read from the entry's reply."""
    details = result.get("details") or {}
    if entry.grader == "contextual_precision":
        return bool(details["nodes"][0]["relevant"])
    if entry.grader == "contextual_recall":
        rows = details.get("statements") or []
        if entry.call == "statements":
            return [row["statement"] for row in rows]
        return bool(rows[0]["attributable"])
    if entry.grader == "quality":
        return int(details["dimensions"]["coherence"]["choice"])
    if entry.grader == "pattern":
        return {**details["universal_scores"], **details["pattern_scores"]}
    return dict(details["scores"])


def matches(entry: Entry, got: Any) -> bool:
    want = entry.expected
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, list):
        return isinstance(got, list) and [_norm(x) for x in got] == [_norm(x) for x in want]
    if isinstance(want, dict):
        return isinstance(got, dict) and all(_same_number(got.get(k), v) for k, v in want.items())
    return _same_number(got, want)


def classify(entry: Entry, code: int, stdout: str) -> Outcome:
    readable = entry.expected != "unreadable"
    try:
        result = json.loads(stdout) if stdout.strip() else {}
    except ValueError:
        result = {}
    reason = str(result.get("reason") or "")
    if code == 3:
        if not reason.strip():
            return Outcome(entry, "error", None, "abstained without a reason")
        return Outcome(entry, "abstained wrong" if readable else "abstained right", None, reason)
    if code != 0 or "score" not in result:
        return Outcome(entry, "error", None, f"exit {code}: {stdout[-200:]}")
    try:
        got = reading(entry, result)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return Outcome(entry, "error", None, f"result without the reading: {exc}")
    if readable and matches(entry, got):
        return Outcome(entry, "read right", got, reason)
    return Outcome(entry, "wrong", got, reason)


async def run_corpus(
    entries: list[Entry],
    root: Path,
    workers: int = 4,
    seen: dict[str, list[dict[str, Any]]] | None = None,
) -> list[Outcome]:
    """Run every entry; ``seen`` (if given) receives the request bodies the judge got per id."""
    sys.path.insert(0, str(root))
    from evalrun.targets import build_provider
    from evalrun.targets.config import TargetConfig
    from proxy import JudgeProxy

    keys = {f"k{i}": e for i, e in enumerate(entries)}
    outcomes: dict[str, Outcome] = {}
    async with FakeJudge(keys) as fake:
        url = f"http://127.0.0.1:{fake.port}/v1"
        targets = {}
        for key in keys:
            config = TargetConfig.model_validate(
                {
                    "name": key,
                    "kind": "openai",
                    "model": "fake-judge",
                    "base_url": url,
                    "api_key_env": "CORPUS_KEY",
                }
            )
            # the key (sent as the bearer) tells the fake which entry's reply to answer with
            targets[key] = build_provider(config, {"CORPUS_KEY": key})
        proxy = JudgeProxy(lambda name: targets[name], list(keys))
        env = {k: v for k, v in os.environ.items() if "TOKEN" not in k and "PROXY" not in k}
        env["PYTHONPATH"] = str(root)
        # graders get a bytecode cache, as an installed package has, so start-up is not compiling
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "reply-corpus-pyc"))
        gate = asyncio.Semaphore(workers)

        async def one(key: str, entry: Entry) -> None:
            async with gate:
                grant = proxy.grant(key, 6, grader=entry.grader)
                payload = {**payload_for(entry), "grader": {"name": entry.grader, "max_calls": 6}}
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    f"graders.{entry.grader}",
                    cwd=str(root),
                    env={
                        **env,
                        "AGENTV_TARGET_PROXY_URL": proxy.url,
                        "AGENTV_TARGET_PROXY_TOKEN": grant.token,
                    },
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                out, _ = await asyncio.wait_for(
                    proc.communicate(json.dumps(payload).encode()), timeout=120
                )
                proxy.revoke(grant)
                outcomes[key] = classify(entry, proc.returncode or 0, out.decode())

        async with proxy:
            await asyncio.gather(*(one(k, e) for k, e in keys.items()))
        for target in targets.values():
            await target.aclose()
        if seen is not None:
            seen.update({keys[k].id: bodies for k, bodies in fake.bodies.items()})
    return [outcomes[k] for k in keys]


def table(outcomes: list[Outcome]) -> str:
    rows = [
        "| grader | replies | " + " | ".join(OUTCOMES) + " |",
        "|---" * (len(OUTCOMES) + 2) + "|",
    ]
    for grader in (*GRADERS, "all"):
        picked = [o for o in outcomes if grader in ("all", o.entry.grader)]
        counts = Counter(o.outcome for o in picked)
        cells = " | ".join(str(counts.get(name, 0)) for name in OUTCOMES)
        rows.append(f"| {grader} | {len(picked)} | {cells} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--root", type=Path, default=HERE, help="checkout whose graders run")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--show", action="store_true", help="list every reply not read right")
    args = parser.parse_args()
    entries = load_corpus(args.corpus)
    started = time.perf_counter()
    outcomes = asyncio.run(run_corpus(entries, args.root.resolve(), args.workers))
    print(table(outcomes))
    print(f"\n{len(entries)} replies, {time.perf_counter() - started:.1f} s, root {args.root}")
    if args.show:
        for o in outcomes:
            if o.outcome not in ("read right", "abstained right"):
                print(f"- {o.entry.id} [{o.outcome}] got {o.got!r}: {o.reason[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
