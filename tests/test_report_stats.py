"""Summary and repeat statistics: the one implementation the runner and reporters share."""

from __future__ import annotations

import math
from itertools import product

import pytest
from report_helpers import case, grader, mixed_cases

from evalrun.results import stats
from evalrun.results.summary import (
    RunMeta,
    compute_stats,
    latest_results,
    repeat_stats,
    summarize,
)


def test_pass_at_k_matches_the_combinatorial_definition() -> None:
    # 5 attempts, 2 passes: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@4 = 1
    assert stats.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert stats.pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)
    assert stats.pass_at_k(5, 2, 4) == 1.0
    assert stats.pass_at_ks(3, 0) == [0.0, 0.0, 0.0]
    assert stats.pass_at_ks(3, 3) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        stats.pass_at_k(3, 1, 4)


def test_pass_at_k_equals_brute_force_over_subsets() -> None:
    """pass@k is the chance that a random k-subset of the attempts holds a pass."""
    from itertools import combinations

    attempts = [True, False, False, True, False, False]
    n, c = len(attempts), sum(attempts)
    for k in range(1, n + 1):
        subsets = list(combinations(attempts, k))
        expected = sum(any(s) for s in subsets) / len(subsets)
        assert stats.pass_at_k(n, c, k) == pytest.approx(expected)


def test_mean_median_stdev() -> None:
    assert stats.mean([]) is None and stats.stdev([]) is None and stats.median([]) is None
    assert stats.mean([0.2, 0.4]) == pytest.approx(0.3)
    assert stats.median([0.9, 0.1, 0.5, 0.7]) == pytest.approx(0.6)
    assert stats.stdev([0.0, 1.0]) == pytest.approx(0.5)  # population spread
    assert stats.stdev([0.7]) == 0.0


def test_bootstrap_interval_of_constant_deltas_is_that_constant() -> None:
    for c in (0.25, -0.1, 0.0, 1 / 3):
        assert stats.bootstrap_mean_ci([c] * 9, seed=1) == (c, c)


def test_bootstrap_interval_hand_checked() -> None:
    """Deltas [-1, 1, 1, 1]: a resample's mean is (2j - 4)/4 for j ones drawn, j ~ Bin(4, 3/4).
    P(j=0) = 1/256 (0.4%) < 2.5% < P(j<=1) = 13/256 (5.1%), so the 2.5% quantile is j=1 -> -0.5;
    P(j=4) = 81/256 > 2.5%, so the 97.5% quantile is 1.0."""
    low, high = stats.bootstrap_mean_ci([-1.0, 1.0, 1.0, 1.0], confidence=0.95, seed=3)
    assert (low, high) == (-0.5, 1.0)
    # Two deltas [0, 1]: all-zero and all-one resamples each have probability 1/4.
    assert stats.bootstrap_mean_ci([0.0, 1.0], seed=5) == (0.0, 1.0)
    # 50% interval of [0, 1]: quartiles of {0: 1/4, 0.5: 1/2, 1: 1/4} -> both 0.5
    # (the 25% point sits on the boundary; a seed decides which side, so check the set).
    low, high = stats.bootstrap_mean_ci([0.0, 1.0], confidence=0.5, seed=5)
    assert low in (0.0, 0.5) and high in (0.5, 1.0)


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    deltas = [0.1, -0.3, 0.25, 0.0, 0.4, -0.05, 0.2]
    first = stats.bootstrap_mean_ci(deltas, seed=42, resamples=2000)
    assert stats.bootstrap_mean_ci(deltas, seed=42, resamples=2000) == first
    low, high = first
    assert low < stats.mean(deltas) < high


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval as textbooks write it: the two roots p of
    (p - k/n)^2 = z^2 p (1 - p) / n."""
    # n p^2 - 2 k p + k^2/n = z^2 p - z^2 p^2  ->  (n + z^2) p^2 - (2k + z^2) p + k^2/n = 0
    a, b, c = n + z * z, -(2 * k + z * z), k * k / n
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


def test_wilson_interval_matches_hand_computed_values_and_the_quadratic() -> None:
    # 2 of 3: centre (2/3 + z^2/6) / (1 + z^2/3) = 0.5731, half-width 0.3654
    assert stats.wilson_interval(2, 3) == pytest.approx((0.2076596, 0.9385081), abs=1e-7)
    # 0 of 10: [0, z^2/(n + z^2)] = [0, 0.2775]
    assert stats.wilson_interval(0, 10) == pytest.approx((0.0, 0.2775328), abs=1e-7)
    assert stats.wilson_interval(10, 10) == pytest.approx((0.7224672, 1.0), abs=1e-7)
    for n in (1, 2, 7, 40, 1000):
        for k in range(0, n + 1, max(1, n // 7)):
            assert stats.wilson_interval(k, n) == pytest.approx(_wilson(k, n), abs=1e-12)
    assert stats.wilson_interval(0, 0) is None


def _exact_bootstrap_quantiles(values: list[float]) -> tuple[float, float]:
    """The 2.5% and 97.5% quantiles of the mean over all n^n equally likely resamples."""
    n = len(values)
    means = sorted(sum(pick) / n for pick in product(values, repeat=n))
    return means[math.floor(0.025 * len(means))], means[math.ceil(0.975 * len(means)) - 1]


@pytest.mark.parametrize(
    "values",
    [[0.95, 0.6, 0.35, 1.0, 0.55], [1.0, 1.0, 0.0, 1.0, 0.0, 1.0], [0.2, 0.25, 0.9, 0.3, 0.1]],
)
def test_run_mean_interval_is_the_bootstrap_of_the_mean(values: list[float]) -> None:
    """Seeded and so reproducible; close to the exact bootstrap (every resample enumerated):
    1,000 resamples read each tail from 25 of them."""
    low, high = stats.run_mean_ci(values)
    exact_low, exact_high = _exact_bootstrap_quantiles(values)
    spread = max(values) - min(values)
    assert abs(low - exact_low) <= 0.04 * spread and abs(high - exact_high) <= 0.04 * spread
    assert stats.run_mean_ci(values) == (low, high)
    assert stats.run_mean_ci(list(reversed(values))) == (low, high)  # order does not matter


def test_run_mean_interval_of_many_results() -> None:
    """10,000 pass/fail scores, 7,500 passed: the bootstrap agrees with the normal interval
    p +- z sqrt(p(1-p)/n) = 0.75 +- 0.00849; and the seeded interval the reports pin."""
    scores = [1.0] * 7500 + [0.0] * 2500
    low, high = stats.run_mean_ci(scores)
    half = 1.959963984540054 * math.sqrt(0.75 * 0.25 / 10_000)
    assert low == pytest.approx(0.75 - half, abs=0.0015)
    assert high == pytest.approx(0.75 + half, abs=0.0015)
    assert stats.run_mean_ci([0.95, 0.6, 0.35, 1.0, 0.55]) == pytest.approx((0.48, 0.9))
    assert stats.run_mean_ci([0.4, 0.4]) == (0.4, 0.4)
    assert stats.run_mean_ci([]) is None


def test_binomial_draws_have_the_binomial_mean_and_variance() -> None:
    """Both methods (geometric jumps for n*p < 10, BTRS above), and p > 0.5 by symmetry."""
    import random

    rng = random.Random(7)
    for n, p in ((6, 0.3), (40, 0.1), (500, 0.3), (20_000, 0.5), (50, 0.9)):
        draws = [stats.binomial(rng, n, p) for _ in range(20_000)]
        assert all(0 <= d <= n for d in draws)
        mean = sum(draws) / len(draws)
        var = sum((d - mean) ** 2 for d in draws) / len(draws)
        sd_of_mean = math.sqrt(n * p * (1 - p) / len(draws))
        assert abs(mean - n * p) < 5 * sd_of_mean
        assert var == pytest.approx(n * p * (1 - p), rel=0.05)
    assert stats.binomial(rng, 5, 0.0) == 0 and stats.binomial(rng, 5, 1.0) == 5


def test_summary_carries_both_intervals() -> None:
    summary = summarize(mixed_cases())
    assert summary["pass_rate_ci"] == pytest.approx(list(_wilson(2, 7)))
    assert summary["mean_score_ci"] == list(stats.run_mean_ci([0.95, 0.6, 0.35, 1.0, 0.55]))
    assert RunMeta.from_dict(summary).extra == {}  # statistics, recomputed when read


def test_summarize_counts_means_and_graders() -> None:
    cases = mixed_cases()
    summary = summarize(cases, RunMeta(eval="demo", target="mock", shard="1/2"))
    assert summary["eval"] == "demo" and summary["shard"] == "1/2"
    assert summary["counts"] == {"passed": 2, "failed": 2, "error": 2, "unscored": 1, "total": 7}
    scores = [c.score for c in cases if c.score is not None]
    assert summary["mean_score"] == pytest.approx(sum(scores) / len(scores))
    assert summary["pass_rate"] == pytest.approx(2 / 7)
    precision = summary["graders"]["precision"]
    assert precision["count"] == 6 and precision["scored"] == 4
    assert (precision["passed"], precision["failed"], precision["error"]) == (3, 1, 1)
    assert precision["unscored"] == 1
    assert precision["mean"] == pytest.approx((0.9 + 0.2 + 0.7 + 0.55) / 4)
    assert summary["repeat"] == 1 and "repeat_stats" not in summary
    assert summary["usage"]["judge"]["calls"] == 2
    assert summary["usage"]["target"]["input"] == 70


def test_last_result_for_a_case_wins() -> None:
    first = case("a", [grader("g", None, status="error")])
    again = case("a", [grader("g", 0.8)])
    assert latest_results([first, again]) == [again]
    assert summarize([first, again])["counts"]["total"] == 1


def test_repeat_statistics_per_case_and_grader() -> None:
    scores = {"steady": [0.8, 0.8, 0.8], "shaky": [0.0, 1.0, 0.5]}
    cases = [
        case(cid, [grader("g", s)], repeat=r)
        for cid, values in scores.items()
        for r, s in enumerate(values)
    ]
    rep = repeat_stats(latest_results(cases), bound=0.15)
    assert rep is not None and rep.repeats == 3
    shaky = rep.cases["shaky"].overall
    assert shaky.mean == pytest.approx(0.5)
    assert shaky.median == pytest.approx(0.5)
    assert shaky.stdev == pytest.approx(math.sqrt(1 / 6))
    assert shaky.passes == 2  # 1.0 and 0.5 pass the default 0.5 threshold
    assert shaky.pass_at_k == pytest.approx([2 / 3, 1.0, 1.0])
    assert rep.cases["steady"].overall.pass_at_k == [1.0, 1.0, 1.0]
    assert rep.unstable == ["shaky"]
    assert rep.pass_at_k == pytest.approx([(1 + 2 / 3) / 2, 1.0, 1.0])
    assert rep.graders["g"].unstable == ["shaky"]
    assert rep.graders["g"].mean_stdev == pytest.approx(math.sqrt(1 / 6) / 2)
    # The bound is settable: with a wide bound nothing is unstable.
    wide = repeat_stats(latest_results(cases), bound=0.5)
    assert wide is not None and wide.unstable == []
    summary = summarize(cases, unstable_bound=0.15)
    assert summary["repeat"] == 3
    assert summary["repeat_stats"]["unstable"] == ["shaky"]
    assert summary["repeat_stats"]["pass_at_k"]["1"] == pytest.approx(5 / 6)


def test_no_repeat_stats_for_single_runs() -> None:
    assert compute_stats(mixed_cases()).repeats is None


def test_summary_means_do_not_depend_on_order() -> None:
    cases = [case(f"c{i}", [grader("g", v)]) for i, v in enumerate([0.1, 0.2, 0.7, 1 / 3, 0.9])]
    orders = [cases, list(reversed(cases)), cases[2:] + cases[:2]]
    means = {summarize(order)["mean_score"] for order in orders}
    assert len(means) == 1
    for a, b in product(orders, repeat=2):
        assert summarize(a)["graders"] == summarize(b)["graders"]


def test_a_bundle_read_back_drops_superseded_lines_and_orders_problems_first(tmp_path) -> None:
    """The view keeps numbers, not results, yet matches the in-memory statistics: the last
    line of a case wins, and the report order is problems first, then the eval file's lines."""
    from report_helpers import write_bundle

    from evalrun.reporters import load_bundle

    first = case("b", [grader("g", 0.0)])
    first.line = 20
    again = case("b", [grader("g", 0.9)])
    again.line = 20
    lines = {"a": 30, "c": 10, "d": 40}
    others = [case(cid, [grader("g", 0.2 if cid == "d" else 0.8)]) for cid in lines]
    for c in others:
        c.line = lines[c.id]
    cases = [first, *others, again]
    view = load_bundle(write_bundle(tmp_path / "run", cases, summary=False))
    assert view.stats.counts.total == 4
    assert view.stats.to_dict() == compute_stats(cases).to_dict()
    assert [c.id for c in view.cases] == ["d", "c", "b", "a"]  # d failed; the rest by line
    assert next(c for c in view.cases if c.id == "b").score == 0.9


def test_a_bundle_without_a_summary_still_finds_its_repeats(tmp_path) -> None:
    from report_helpers import random_cases, write_bundle

    from evalrun.reporters import load_bundle

    cases = random_cases(["x", "y"], repeats=3)
    view = load_bundle(write_bundle(tmp_path / "run", cases, summary=False))
    assert view.repeats is not None and set(view.repeats.cases) == {"x", "y"}
    assert view.stats.case_count == 2 and view.stats.counts.total == 6


def test_the_run_prints_both_intervals_on_its_last_line(tmp_path) -> None:
    """A real run of 1 passed and 1 failed: Wilson(1, 2) = 0.5 +- 0.4055 (by hand:
    half = z / (1 + z^2/2) * sqrt(1/8 + z^2/16)) and the bootstrap of [1, 0] spans [0, 1]."""
    from conftest import run_cli

    (tmp_path / "e.eval.yaml").write_text(
        "graders:\n  - {name: paris, type: contains, value: Paris}\n"
        "tests:\n  - {id: right, input: q, output: Paris.}\n"
        "  - {id: wrong, input: q, output: Lyon.}\n"
    )
    result = run_cli("e.eval.yaml", "--out", "o", "--no-cache", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    line = "2 cases: 1 passed, 1 failed · pass rate 50% [9%, 91%] · mean score 0.500 [0.000, 1.000]"
    assert line in result.stdout.splitlines()
