"""Comparing generations, the trade line, the renderers, side syntax and the window check."""

from __future__ import annotations

import json
import math

import pytest

from ttft.core.errors import TtftError
from ttft.report.verify import markdown_report, text_report
from ttft.verify import (
    Generation,
    Probe,
    QualityOptions,
    QualityReport,
    build_probes,
    check_windows,
    compare_sides,
    parse_side,
)


def _probe(length: int, index: int, expected: str = "4821") -> Probe:
    return Probe(length, index, "prompt", expected, 0.5, length)


def _gen(tokens: list[int], text: str, p1: float = 0.9, ttft: float = 100.0) -> Generation:
    # the greedy token carries p1, one runner-up the rest of the reported mass
    topk = tuple({t: math.log(p1), t + 1000: math.log(1 - p1 - 0.01)} for t in tokens)
    return Generation(tuple(tokens), text, topk, ttft)


def _report(candidate: list[Generation], baseline: list[Generation] | None = None) -> QualityReport:
    probes = [_probe(512, 0), _probe(512, 1), _probe(1024, 0), _probe(1024, 1)]
    base = baseline or [_gen([1, 2, 3, 4], " 4821.", ttft=200.0) for _ in probes]
    return compare_sides(
        probes, base, candidate, baseline_label="f16 KV", candidate_label="q8_0 KV", n_tokens=4
    )


def test_identical_sides_pass_at_the_noise_floor() -> None:
    same = [_gen([1, 2, 3, 4], " 4821.", ttft=150.0) for _ in range(4)]
    report = _report(same)
    assert [s.verdict for s in report.lengths] == ["pass", "pass"]
    assert all(s.mean_kl == pytest.approx(0.0, abs=1e-9) for s in report.lengths)
    assert all(s.top1 == 1.0 and s.identical_share == 1.0 for s in report.lengths)
    assert report.trade() == (
        "q8_0 KV: 50 ms faster TTFT p50 at 1024, KV memory unknown, quality pass to 1K"
    )


def test_divergence_at_the_longer_length_fails_it_and_the_trade_says_so() -> None:
    good = _gen([1, 2, 3, 4], " 4821.")
    bad = _gen([1, 9, 9, 9], " 4812.", p1=0.5)
    report = _report([good, good, bad, bad])
    short, long = report.lengths
    assert short.verdict == "pass"
    assert long.verdict == "fail"
    assert long.recall_candidate == 0.0 and long.recall_baseline == 1.0
    assert long.first_divergence_mean == 1.0
    assert long.top1 == 0.5  # position 0 agrees, position 1 (the divergence) does not
    assert long.mean_kl is not None and long.mean_kl > 0.0
    assert report.verdict == "fail"
    assert report.trade().endswith("quality pass to 512, fail at 1K")


def test_no_probabilities_skips_kl_with_a_note() -> None:
    plain = [Generation((1, 2, 3, 4), " 4821.", None, 100.0) for _ in range(4)]
    report = _report(plain)
    assert all(s.mean_kl is None and s.top1 is None for s in report.lengths)
    assert [s.verdict for s in report.lengths] == ["pass", "pass"]
    assert "skipped KL divergence" in report.notes[0]
    assert "n/a" in text_report(report)


def test_renderers_print_thresholds_verdicts_and_the_trade() -> None:
    good = _gen([1, 2, 3, 4], " 4821.")
    report = _report([good, good, _gen([1, 9], " 1"), good])
    text, md = text_report(report), markdown_report(report)
    for out in (text, md):
        assert "mean KL" in out and "pass <= 0.01" in out and report.trade() in out
    assert md.startswith("# verify quality") and "| 1024 |" in md
    data = json.loads(json.dumps(report.to_dict()))
    assert data["schema"] == "ttft.verify.quality/1"
    assert [row["verdict"] for row in data["lengths"]] == ["pass", "fail"]


def test_side_syntax() -> None:
    assert parse_side("http://127.0.0.1:8080/").url == "http://127.0.0.1:8080"
    plain = parse_side("embedded")
    assert plain.embedded and plain.overrides == {} and plain.label == "f16 KV"
    q = parse_side("embedded:-ctk=q4_0,-ctv=q4_0,-np=2")
    assert q.overrides == {"cache_type_k": "q4_0", "cache_type_v": "q4_0", "parallel": 2}
    assert q.label == "q4_0 KV -np=2"
    assert parse_side("embedded:-ctk q8_0").label == "K q8_0 / V f16 KV"
    for bad in ("vllm:foo", "embedded:-xyz=1", "embedded:-c=big", "embedded:-ctk="):
        with pytest.raises(TtftError):
            parse_side(bad)


def test_a_length_beyond_the_window_is_refused_naming_the_window() -> None:
    options = QualityOptions(lengths=(512, 2048), n_tokens=16)
    check_windows([parse_side("embedded")], options)  # sized to fit by default
    with pytest.raises(TtftError, match="per-slot window of 1024 tokens"):
        check_windows([parse_side("embedded"), parse_side("embedded:-c=4096,-np=4")], options)


def test_probes_fit_their_bucket_and_repeat_exactly() -> None:
    def count(text: str) -> int:  # a stand-in tokenizer: 1.5 tokens per word, plus BOS
        return 1 + round(len(text.split()) * 1.5)

    probes = build_probes(count, [256, 1024], 3)
    assert [p.length for p in probes] == [256] * 3 + [1024] * 3
    assert all(0.9 * p.length <= p.prompt_tokens <= p.length for p in probes)
    for p in probes:
        assert f"is {p.expected}" in p.prompt and p.prompt.endswith(" is")
        assert 0.1 <= p.depth <= 0.9
    assert build_probes(count, [256, 1024], 3) == probes
    assert len({p.prompt for p in probes}) == len(probes)


def test_a_ttft_difference_inside_the_spread_is_called_noise() -> None:
    times = [100.0, 300.0, 120.0, 280.0]
    base = [_gen([1, 2], " 4821.", ttft=t) for t in times]
    cand = [_gen([1, 2], " 4821.", ttft=t + 10.0) for t in reversed(times)]
    trade = _report(cand, base).trade()
    assert trade.startswith("q8_0 KV: no TTFT difference beyond noise at 1024 (")


def test_answers_without_token_ids_are_compared_by_text() -> None:
    same = [Generation((), " 4821.", None, 100.0) for _ in range(2)]
    other = [Generation((), " 4812.", None, 100.0) for _ in range(2)]
    report = _report([*same, *other], [*same, *same])
    assert [s.identical_share for s in report.lengths] == [1.0, 0.0]
    assert report.lengths[1].first_divergence_mean == 3.0
