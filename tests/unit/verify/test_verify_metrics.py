"""The quality metrics on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from ttft.verify.metrics import (
    Thresholds,
    compared_positions,
    first_divergence,
    mean_interval,
    recall_hit,
    top1_agrees,
    topk_kl,
    verdict_for,
)


def _lp(probs: dict[int, float]) -> dict[int, float]:
    return {t: math.log(p) for t, p in probs.items()}


def test_kl_of_identical_distributions_is_zero() -> None:
    p = _lp({1: 0.6, 2: 0.3, 3: 0.05})
    assert topk_kl(p, p) == pytest.approx(0.0, abs=1e-12)


def test_kl_matches_the_closed_form_on_a_full_support() -> None:
    p = _lp({1: 0.5, 2: 0.5})
    q = _lp({1: 0.9, 2: 0.1})
    expected = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert topk_kl(p, q) == pytest.approx(expected, rel=1e-6)


def test_kl_stays_finite_when_the_top_k_sets_differ() -> None:
    p = _lp({1: 0.7, 2: 0.2})
    q = _lp({3: 0.7, 4: 0.2})
    kl = topk_kl(p, q)
    assert math.isfinite(kl) and kl > 1.0  # disjoint top choices: a large divergence
    assert topk_kl(p, _lp({1: 0.68, 2: 0.21})) < 0.01  # a small wobble: a small one


def test_kl_grows_with_the_shift() -> None:
    base = _lp({1: 0.6, 2: 0.3})
    near, far = _lp({1: 0.55, 2: 0.35}), _lp({1: 0.3, 2: 0.6})
    assert 0.0 < topk_kl(base, near) < topk_kl(base, far)


def test_top1_agreement_and_ties_by_lower_id() -> None:
    assert top1_agrees(_lp({5: 0.6, 6: 0.3}), _lp({5: 0.5, 6: 0.4}))
    assert not top1_agrees(_lp({5: 0.6, 6: 0.3}), _lp({5: 0.4, 6: 0.5}))
    assert top1_agrees({7: -1.0, 3: -1.0}, {3: -0.5})
    assert not top1_agrees({}, {1: 0.0})


def test_first_divergence_and_compared_positions() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # one side stopped early
    assert compared_positions([1, 2, 3], [1, 2, 3]) == 3
    assert compared_positions([1, 2, 3, 4], [1, 9, 3, 4]) == 2  # the divergent one counts
    assert compared_positions([], []) == 0


def test_recall_hit_wants_the_number_and_only_it() -> None:
    assert recall_hit("4821", " 4821. The code of room")
    assert recall_hit("4821", "4821")
    assert not recall_hit("4821", " 48210")
    assert not recall_hit("4821", " 4812.")
    assert not recall_hit("4821", " the number 4821")


def test_mean_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [0.0, 0.1, 0.2, 0.3, 0.4]
    ci = mean_interval(values)
    assert ci.low <= 0.2 <= ci.high
    assert mean_interval(values) == ci
    assert mean_interval([0.5]) == mean_interval([0.5, 0.5])
    with pytest.raises(ValueError):
        mean_interval([])


T = Thresholds()


def test_verdict_pass_at_the_noise_floor() -> None:
    assert verdict_for(T, identical_share=1.0, recall_drop=0.0, mean_kl=0.0, top1=1.0) == (
        "pass",
        [],
    )


def test_verdict_degraded_between_the_thresholds() -> None:
    verdict, reasons = verdict_for(T, identical_share=1.0, recall_drop=0.0, mean_kl=0.02, top1=1.0)
    assert verdict == "degraded" and reasons == ["mean KL 0.0200"]


def test_verdict_fail_names_every_reason_worst_first() -> None:
    verdict, reasons = verdict_for(T, identical_share=0.3, recall_drop=0.5, mean_kl=0.2, top1=0.85)
    assert verdict == "fail"
    assert reasons[:2] == ["mean KL 0.2000", "recall lost 50%"]
    assert set(reasons[2:]) == {"top-1 agreement 85%", "identical continuations 30%"}


def test_verdict_without_probabilities_rests_on_the_other_checks() -> None:
    assert verdict_for(T, identical_share=1.0, recall_drop=0.0)[0] == "pass"
    assert verdict_for(T, identical_share=0.1, recall_drop=0.0)[0] == "fail"


def test_thresholds_are_printable() -> None:
    text = " ".join(T.describe())
    assert "pass <= 0.01" in text and "fail > 0.05" in text
    assert T.to_dict()["fail_top1"] == 0.75
