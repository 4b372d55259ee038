"""SLO text parsing, cell verdicts and per-request goodness in ttft.core.slo."""

from __future__ import annotations

import pytest

from ttft.core.errors import TtftError
from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.slo import count_good, evaluate, is_good, parse_slo, parse_slos

MS = 1_000_000


def _record(
    ttft_ms: float, *, chunks_ms: list[float] | None = None, failed: bool = False
) -> RequestRecord:
    first = int(ttft_ms * MS)
    chunks = [first + int(c * MS) for c in (chunks_ms if chunks_ms is not None else [0.0])]
    return RequestRecord(
        index=0,
        sent_ns=0,
        first_content_ns=None if failed else first,
        chunk_ns=chunks,
        done_ns=chunks[-1] + MS,
        error=ErrorInfo("http_5xx", "boom", 500) if failed else None,
    )


@pytest.mark.parametrize(
    ("text", "metric", "q", "op", "threshold"),
    [
        ("ttft:p99<600ms", "ttft", 99.0, "<", 600 * MS),
        ("tpot:p95<50ms", "tpot", 95.0, "<", 50 * MS),
        ("e2e:p50<=2s", "e2e", 50.0, "<=", 2_000 * MS),
        (" ttft : p99.9 < 1.5 s ", "ttft", 99.9, "<", 1_500 * MS),
        ("itl:p90<300us", "itl", 90.0, "<", 0.3 * MS),
        ("client_wait:p99<500000ns", "client_wait", 99.0, "<", 0.5 * MS),
        ("cached_tokens:p50<1000", "cached_tokens", 50.0, "<", 1000),
        ("prompt_tokens:p99<=4096tokens", "prompt_tokens", 99.0, "<=", 4096),
    ],
)
def test_parse_good_slo_texts_into_thresholds_in_the_metric_unit(
    text: str, metric: str, q: float, op: str, threshold: float
) -> None:
    slo = parse_slo(text)
    assert (slo.metric, slo.percentile, slo.op) == (metric, q, op)
    assert slo.threshold == pytest.approx(threshold)
    assert slo.text == text.strip()


def test_parse_slos_takes_commas_and_repeated_options() -> None:
    slos = parse_slos(["ttft:p99<600ms, tpot:p95<50ms", "e2e:p50<=2s", ""])
    assert [slo.metric for slo in slos] == ["ttft", "tpot", "e2e"]
    assert [slo.metric for slo in parse_slos("ttft:p99<600ms,")] == ["ttft"]


@pytest.mark.parametrize(
    ("text", "bad_part", "fix_part"),
    [
        ("ttft:p99<600", "'600'", "ttft:p99<600ms"),
        ("ttft<600ms", "'ttft<600ms'", "ttft:p99<600ms"),
        ("latency:p99<600ms", "'latency'", "ttft, ttft_output"),
        ("ttft:99<600ms", "'99'", "ttft:p99<600ms"),
        ("ttft:p100<600ms", "'p100'", "ttft:p99<600ms"),
        ("ttft:p99>600ms", "'>'", "use '<' or '<='"),
        ("ttft:p99<600sec", "'sec'", "ns, us, ms or s"),
        ("ttft:p99<", "'<'", "ttft:p99<600ms"),
        ("ttft:p99 600ms", "'600ms'", "ttft:p99<600ms"),
        ("prompt_tokens:p50<100ms", "'ms'", "prompt_tokens:p50<100"),
        ("ttft:p99<6.0.0ms", "'<6.0.0ms'", "ttft:p99<600ms"),
    ],
)
def test_bad_slo_text_names_the_bad_part_and_shows_the_right_form(
    text: str, bad_part: str, fix_part: str
) -> None:
    with pytest.raises(TtftError) as caught:
        parse_slos(["e2e:p50<2s", text])
    assert text in caught.value.problem
    assert bad_part in caught.value.problem
    assert caught.value.fix is not None and fix_part in caught.value.fix


def test_cell_verdict_passes_and_fails_on_the_percentile() -> None:
    values = [float(v * MS) for v in range(1, 101)]  # 1..100 ms
    assert evaluate(parse_slo("ttft:p50<60ms"), values).passed
    failing = evaluate(parse_slo("ttft:p99<50ms"), values)
    assert not failing.passed
    assert failing.observed == pytest.approx(99.01 * MS)
    assert failing.n == 100
    assert evaluate(parse_slo("ttft:p50<=50.5ms"), values).passed  # p50 is exactly 50.5 ms
    assert not evaluate(parse_slo("ttft:p50<50.5ms"), values).passed


def test_cell_verdict_without_samples_fails() -> None:
    verdict = evaluate(parse_slo("ttft:p99<600ms"), [])
    assert verdict.observed is None and not verdict.passed


def test_a_failed_request_is_never_good_even_without_slos() -> None:
    assert not is_good(_record(10, failed=True), [])
    assert is_good(_record(10), [])


def test_a_request_is_good_only_when_it_meets_every_threshold() -> None:
    slos = parse_slos("ttft:p99<600ms,e2e:p50<2s")
    assert is_good(_record(500), slos)
    assert not is_good(_record(700), slos)  # ttft over
    assert not is_good(_record(500, chunks_ms=[0, 1600]), slos)  # e2e 2101 ms over


def test_a_value_the_request_lacks_does_not_make_it_bad() -> None:
    # one chunk, no usage: no tpot at all
    assert is_good(_record(100), parse_slos("tpot:p95<1ms"))


def test_itl_threshold_applies_to_every_gap_of_the_request() -> None:
    slos = parse_slos("itl:p99<50ms")
    assert is_good(_record(100, chunks_ms=[0, 20, 40, 60]), slos)
    assert not is_good(_record(100, chunks_ms=[0, 20, 140]), slos)


def test_count_good_counts_failures_as_not_good() -> None:
    records = [_record(100), _record(100), _record(900), _record(100, failed=True)]
    assert count_good(records, parse_slos("ttft:p99<600ms")) == 2
