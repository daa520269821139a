"""One peer's contextual precision over bench_peers.py's cases, run in the peers' environment
(DeepEval and RAGAS are not dependencies of evalrun; this file imports nothing of ours).

    PYTHON peer_driver.py deepeval|ragas CASES.jsonl SCORES.json BASE_URL MODEL CONCURRENCY

Each peer runs as its documentation shows a user running it, at its defaults except the judge
(the loopback fake at BASE_URL), the concurrency and its progress display. SCORES.json maps
each case id to its score, or null when the peer gave none.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path


def deepeval_scores(
    cases: list[dict], url: str, model: str, concurrency: int
) -> dict[str, float | None]:
    from deepeval import evaluate
    from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig, ErrorConfig
    from deepeval.metrics import ContextualPrecisionMetric
    from deepeval.models import GPTModel
    from deepeval.test_case import LLMTestCase

    judge = GPTModel(model=model, api_key="bench-not-a-key", base_url=url, temperature=0)
    metric = ContextualPrecisionMetric(model=judge)
    tests = [
        LLMTestCase(
            name=case["id"],
            input=case["question"],
            actual_output=case["reference"],
            expected_output=case["reference"],
            retrieval_context=case["passages"],
        )
        for case in cases
    ]
    result = evaluate(
        tests,
        [metric],
        async_config=AsyncConfig(max_concurrent=concurrency),
        display_config=DisplayConfig(show_indicator=False, print_results=False),
        cache_config=CacheConfig(write_cache=False),
        error_config=ErrorConfig(ignore_errors=True),
    )
    scores: dict[str, float | None] = {}
    for test in result.test_results:
        data = test.metrics_data[0] if test.metrics_data else None
        score = None if data is None or data.error is not None else data.score
        scores[test.name] = None if score is None else float(score)
    return scores


def ragas_scores(
    cases: list[dict], url: str, model: str, concurrency: int
) -> dict[str, float | None]:
    from langchain_openai import ChatOpenAI
    from ragas import EvaluationDataset, RunConfig, evaluate
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import LLMContextPrecisionWithReference

    judge = LangchainLLMWrapper(
        ChatOpenAI(model=model, base_url=url, api_key="bench-not-a-key", temperature=0)
    )
    dataset = EvaluationDataset.from_list(
        [
            {
                "user_input": case["question"],
                "reference": case["reference"],
                "retrieved_contexts": case["passages"],
            }
            for case in cases
        ]
    )
    result = evaluate(
        dataset,
        [LLMContextPrecisionWithReference()],
        llm=judge,
        run_config=RunConfig(max_workers=concurrency),
        show_progress=False,
    )
    column = result.to_pandas()["llm_context_precision_with_reference"]
    return {
        case["id"]: None if math.isnan(score) else float(score)
        for case, score in zip(cases, column, strict=True)
    }


def main() -> None:
    peer, cases_file, scores_file, url, model, concurrency = sys.argv[1:]
    os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    cases = [json.loads(line) for line in Path(cases_file).read_text().splitlines()]
    run = {"deepeval": deepeval_scores, "ragas": ragas_scores}[peer]
    scores = run(cases, url, model, int(concurrency))
    Path(scores_file).write_text(json.dumps(scores))


if __name__ == "__main__":
    main()
