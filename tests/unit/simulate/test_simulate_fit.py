"""The cost-model fit: known coefficients come back from exact samples, a cost never goes
negative, and records with the server's timings become samples."""

from __future__ import annotations

import pytest

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.simulate.calibrate import decode_sample, fit_phases, overhead_s, prefill_sample
from ttft.simulate.fit import StepSample, fit_cost
from ttft.simulate.model import Calibration, CostModel, EngineSettings

TRUE = CostModel(step_base_s=0.012, prefill_token_s=0.0022, decode_seq_s=0.004, attention_s=3e-4)


def exact(kind: str, steps: float, prefill: float, decode: float, attention: float) -> StepSample:
    seconds = (
        TRUE.step_base_s * steps
        + TRUE.prefill_token_s * prefill
        + TRUE.decode_seq_s * decode
        + TRUE.attention_s * attention
    )
    return StepSample(kind, steps, prefill, decode, attention, 0.0, seconds)


def samples() -> list[StepSample]:
    out = [exact("prefill", 1, n, 0, n * n / 2000) for n in (64, 256, 512, 1024, 1536)]
    out += [exact("decode", 40, 0, 40 * k, k * 40 * 60 / 1000) for k in (1, 2, 4)]
    return out


def test_exact_samples_give_back_the_coefficients() -> None:
    cost, report = fit_cost(samples(), overhead_s=0.02)
    assert cost.prefill_token_s == pytest.approx(TRUE.prefill_token_s, rel=1e-4)
    assert cost.decode_seq_s == pytest.approx(TRUE.decode_seq_s, rel=1e-3)
    assert cost.step_base_s == pytest.approx(TRUE.step_base_s, rel=1e-3)
    assert report.r2 > 0.999 and report.rel_residual_p95 < 1e-6
    assert cost.overhead_s == 0.02


def test_a_coefficient_that_would_be_negative_is_dropped() -> None:
    # decode samples that get cheaper with more sequences cannot mean a negative cost
    bent = samples()[:5] + [
        StepSample("decode", 40, 0, 40 * k, 0, 0, 0.8 - 0.05 * k) for k in (1, 2, 4)
    ]
    cost, report = fit_cost(bent, overhead_s=0.0)
    assert min(cost.step_base_s, cost.prefill_token_s, cost.decode_seq_s, cost.attention_s) >= 0
    assert any("below zero" in note for note in report.notes)


def test_too_few_samples_is_a_clear_error() -> None:
    with pytest.raises(TtftError, match="at least 3"):
        fit_cost(samples()[:2], overhead_s=0.0)


def record(
    prompt_n: int,
    prompt_ms: float,
    *,
    predicted_n: int = 4,
    predicted_ms: float = 90.0,
    cache_n: int = 0,
    ttft_ms: float | None = None,
) -> RequestRecord:
    r = RequestRecord(index=0, sent_ns=0)
    r.first_content_ns = int((ttft_ms if ttft_ms is not None else prompt_ms + 20) * 1e6)
    r.server_timings = {
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "predicted_n": predicted_n,
        "predicted_ms": predicted_ms,
        "cache_n": cache_n,
    }
    return r


def test_records_become_samples_and_a_calibration_that_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = EngineSettings(slots=4, batch_tokens=2048, ctx_per_slot=2048)
    phases = {
        "prefill": [record(n, 10 + 2.2 * n) for n in (64, 256, 512, 1024, 1536)],
        "cached": [record(48, 120.0, cache_n=512)],
        "decode 1": [record(32, 80, predicted_n=48, predicted_ms=47 * 20.0)],
        "decode 4": [record(32, 80, predicted_n=48, predicted_ms=47 * 32.0) for _ in range(4)],
    }
    s = prefill_sample(phases["prefill"][4], 1024)
    assert s is not None and s.steps == 2 and s.prefill == 1536
    d = decode_sample(phases["decode 4"][0], 4)
    assert d is not None and d.decode == 4 * 47
    assert overhead_s(phases["prefill"]) == pytest.approx(0.02, abs=1e-6)
    cal = fit_phases(phases, settings)
    path = tmp_path / "cal.json"
    cal.save(path)
    again = Calibration.load(path)
    assert again.cost == cal.cost and again.engine == settings


def test_a_file_that_is_not_a_calibration_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "x.json"
    path.write_text('{"schema": "other"}')
    with pytest.raises(TtftError, match="not a ttft simulate calibration"):
        Calibration.load(path)
    with pytest.raises(TtftError, match="not found"):
        Calibration.load(tmp_path / "missing.json")


def test_an_engine_without_server_timings_is_calibrated_from_the_client_ladder() -> None:
    """vLLM, SGLang and TGI report no per-request timings: TTFT and chunk times stand in."""
    r = RequestRecord(index=0, sent_ns=0, first_content_ns=900 * 1_000_000)
    r.done_ns = 2_000 * 1_000_000
    r.chunk_ns = [900 * 1_000_000 + i * 20 * 1_000_000 for i in range(48)]
    r.prompt_tokens, r.cached_tokens, r.completion_tokens = 400, 0, 48
    s = prefill_sample(r, 2048)
    assert s is not None and s.prefill == 400 and s.seconds == pytest.approx(0.9)
    d = decode_sample(r, 2)
    assert d is not None and d.steps == 47 and d.seconds == pytest.approx(47 * 0.02)
    assert overhead_s([r]) == 0.0  # inside the prompt time: the fit separates it
    assert s.requests == 1.0  # the sample holds one request's front end


def test_a_client_timed_ttft_gives_the_front_end_overhead_apart_from_the_step_base() -> None:
    """With TTFTs measured at the client (vLLM), a prompt's time holds a per-request overhead
    that decode steps do not: the fit returns it as overhead_s, not as a bigger step base (which
    would charge it to every decode step and batch)."""
    front_end = 0.018
    out = [
        StepSample(
            "prefill",
            1,
            n,
            0,
            n * n / 2000,
            0.0,
            front_end
            + TRUE.step_base_s
            + TRUE.prefill_token_s * n
            + TRUE.attention_s * n * n / 2000,
            1.0,
        )
        for n in (64, 256, 512, 1024)
    ]
    out += [exact("decode", 40, 0, 40 * k, k * 40 * 60 / 1000) for k in (1, 2, 4)]
    cost, _ = fit_cost(out, overhead_s=0.0)
    assert cost.overhead_s == pytest.approx(front_end, rel=1e-3)
    assert cost.step_base_s == pytest.approx(TRUE.step_base_s, rel=1e-3)


def client_record(prompt: int, ttft_ms: float, cached: int | None) -> RequestRecord:
    """A record as vLLM gives it: no server timings, usage counts only."""
    r = RequestRecord(index=0, sent_ns=0, first_content_ns=int(ttft_ms * 1e6))
    r.done_ns = r.first_content_ns + 60_000_000
    r.chunk_ns = [r.first_content_ns + i * 20_000_000 for i in range(4)]
    r.prompt_tokens, r.cached_tokens, r.completion_tokens = prompt, cached, 4
    return r


def client_phases(second_cached: int | None) -> dict[str, list[RequestRecord]]:
    """A ladder at 1 ms per prompt token plus 40 ms, and cached pairs whose second request
    computed only its 49-token ending (90 ms), as a vLLM with a prefix cache does."""
    pairs = []
    for n in (305, 561, 1073):
        pairs += [client_record(n, 40 + n, 0), client_record(n, 90.0, second_cached)]
    return {
        "prefill": [client_record(n, 40 + n, 0) for n in (65, 257, 513, 1025, 1537)],
        "cached": pairs,
        "decode 1": [client_record(33, 60, 0)],
    }


def test_a_hit_the_engine_did_not_count_is_left_out_instead_of_read_as_a_cheap_prefill() -> None:
    """vLLM reports no cached tokens unless started with --enable-prompt-tokens-details: read
    as 0 cached, a 1,073-token hit at 90 ms made prefill look free (the fit went to 0 ms per
    token). Unknown hits are no samples, the prefix cache stays on, and the report says why."""
    settings = EngineSettings(slots=4, batch_tokens=2048, ctx_per_slot=4096, kind="vllm")
    cal = fit_phases(client_phases(second_cached=None), settings)
    assert cal.cost.prefill_token_s == pytest.approx(0.001, rel=0.05)
    assert cal.engine.prefix_cache
    assert any("reported no cached prompt tokens" in n for n in cal.fit.notes)


def test_a_hit_counted_by_the_engine_prices_the_cached_tokens() -> None:
    settings = EngineSettings(slots=4, batch_tokens=2048, ctx_per_slot=4096, kind="vllm")
    cal = fit_phases(client_phases(second_cached=None), settings)
    counted = fit_phases(client_phases(second_cached=1024), settings)
    assert counted.cost.prefill_token_s == pytest.approx(0.001, rel=0.05)
    assert not any("reported no cached prompt tokens" in n for n in counted.fit.notes)
    assert counted.source["prefix_reuse"] > 0.9
    assert "prefix_reuse" not in cal.source  # unknown is not "no reuse"


def test_todays_speed_counts_the_steps_a_prompt_takes_under_the_engines_budget() -> None:
    """A 257-token prompt on an engine with a 256-token step budget takes two steps: the
    speed probe must price the second step's base, or it reads a smaller budget as a slower
    machine and scales every cost of the prediction by it."""
    from ttft.simulate.validate import speed_ratio

    cost = CostModel(step_base_s=0.02, prefill_token_s=0.001, decode_seq_s=0.0, overhead_s=0.005)
    # as measured: 5 ms front end + two steps + 257 tokens
    record = client_record(257, 5 + 2 * 20 + 257, 0)
    assert speed_ratio([record], cost, batch_tokens=256) == pytest.approx(1.0)
    assert speed_ratio([record], cost) == pytest.approx(302 / 282)
    assert speed_ratio([], cost) is None
