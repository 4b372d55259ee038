"""A short calibration run against a live engine, and the step samples its records give.

Four small measurements, each through ttft's own probe (``probe.sampler``), with prompts of exact
token lengths built with the server's tokenizer and unique per run (so nothing is cached unless
meant to be):

1. **prefill**: one request at a time, prompts of several lengths, a few output tokens: the
   server's ``prompt_ms`` against ``prompt_n``; the client's TTFT minus ``prompt_ms`` is the
   per-request overhead (HTTP, template, tokenizer, first chunk);
2. **decode**: 1, half the slots and all the slots streaming at once (short prompts, fixed
   output with ``ignore_eos``): ``predicted_ms`` per token against the batch size;
3. **cached**: a prompt, then the same prompt with a new ending: the second's ``cache_n`` and
   ``prompt_ms`` give the cost of a prefix-cache hit. An engine that reports no cached tokens
   per request (vLLM without ``--enable-prompt-tokens-details``) is asked by its metrics: the
   prefix-cache hit counter's rise over the second request, run alone. Where neither says, the
   second of each pair is left out of the fit: a hit read as a full prefill would price every
   prompt token at a hit's cost;
4. **burst**: every slot gets a prompt at the same moment (one output token): not fitted, kept
   as a check of the scheduler model (the fit's report shows predicted against measured).
"""

from __future__ import annotations

import math
import secrets
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.core.target import Target
from ttft.engines.metrics import CommonMetric
from ttft.engines.prometheus import scrape_url
from ttft.engines.registry import adapter_for
from ttft.probe.sampler import sample
from ttft.simulate.fit import StepSample, fit_cost
from ttft.simulate.model import Calibration, EngineSettings
from ttft.workload.exact_length import text_of_tokens
from ttft.workload.requests import WorkItem, completion_body
from ttft.workload.tokenizer import Tokenizer

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CalibrationPlan:
    lengths: tuple[int, ...] = (64, 256, 512, 1024, 1536)
    repeats: int = 2
    decode_tokens: int = 48
    decode_prompt: int = 32
    # a hit's cost is a short suffix over a long cached context: three context lengths, so the
    # fit sees how it grows (two left a 640-token hit 23% under its measured TTFT)
    cached_prefixes: tuple[int, ...] = (256, 512, 1024)
    cached_suffix: int = 48
    burst_prompt: int = 256


def _timing(record: RequestRecord, key: str) -> float | None:
    """A server-reported timing (llama-server's ``timings``), or the same quantity from the
    client's ladder and the usage counts for engines that report none (vLLM, SGLang, TGI): the
    prompt time is then the whole TTFT (its sample counts one request's front-end overhead,
    fitted apart), and the generation time runs from the first to the last chunk."""
    timings = record.server_timings
    if timings:
        value = timings.get(key)
        return float(value) if value is not None else None
    if key == "cache_n":  # None: the engine did not say (not the same as nothing cached)
        return None if record.cached_tokens is None else float(record.cached_tokens)
    cached = float(record.cached_tokens or 0)
    if key == "prompt_n":
        return None if record.prompt_tokens is None else record.prompt_tokens - cached
    if key == "predicted_n":
        return None if record.completion_tokens is None else float(record.completion_tokens)
    first, start = record.first_content_ns, record.sent_ns
    if key == "prompt_ms" and first is not None and start is not None:
        return (first - start) / 1e6
    if key == "predicted_ms" and first is not None and record.done_ns is not None:
        last = record.chunk_ns[-1] if record.chunk_ns else record.done_ns
        return (last - first) / 1e6
    return None


def prefill_sample(record: RequestRecord, batch_tokens: int) -> StepSample | None:
    """A request's prompt processing as a sample: ``prompt_n`` tokens after ``cache_n`` cached."""
    n, ms = _timing(record, "prompt_n"), _timing(record, "prompt_ms")
    if not record.ok or n is None or ms is None or n < 1 or ms <= 0:
        return None
    cached = _timing(record, "cache_n") or 0.0
    steps = math.ceil(n / batch_tokens)
    attention = n * (cached + n / 2) / 1000.0
    kind = "cached" if cached > 0 else "prefill"
    requests = 0.0 if record.server_timings else 1.0  # a client TTFT holds the front end
    return StepSample(kind, steps, n, 0.0, attention, cached, ms / 1000.0, requests)


def decode_sample(record: RequestRecord, batch: int) -> StepSample | None:
    """A request's generation while ``batch`` sequences decoded together."""
    n, ms = _timing(record, "predicted_n"), _timing(record, "predicted_ms")
    prompt = (_timing(record, "prompt_n") or 0.0) + (_timing(record, "cache_n") or 0.0)
    if not record.ok or n is None or ms is None or n < 2 or ms <= 0:
        return None
    steps = n - 1
    attention = batch * steps * (prompt + n / 2) / 1000.0
    return StepSample("decode", steps, 0.0, batch * steps, attention, 0.0, ms / 1000.0)


def overhead_s(records: Sequence[RequestRecord]) -> float:
    """Median client TTFT minus the server's prompt time, over requests that did not queue."""
    gaps = []
    for r in records:
        if not r.server_timings:
            continue  # client-side timings: the overhead is inside the prompt time
        ms = _timing(r, "prompt_ms")
        if r.ok and ms is not None and r.sent_ns is not None and r.first_content_ns is not None:
            gaps.append((r.first_content_ns - r.sent_ns) / 1e9 - ms / 1000.0)
    return max(0.0, statistics.median(gaps)) if gaps else 0.0


REUSE_FLOOR = 0.3
NO_REUSE = (
    "the engine reused under 30% of a repeated prefix: the model runs without a prefix cache "
    "(llama.cpp with a sliding-window model needs --swa-full to reuse a prefix)"
)


def prefix_reuse(records: Sequence[RequestRecord]) -> float | None:
    """Median share of the prompt the engine restored on the second of each cached pair."""
    shares = []
    for second in records[1::2]:
        if cache_unknown(second):
            continue
        cached, computed = _timing(second, "cache_n"), _timing(second, "prompt_n")
        if second.ok and cached is not None and computed is not None and cached + computed > 0:
            shares.append(cached / (cached + computed))
    return statistics.median(shares) if shares else None


def cache_unknown(record: RequestRecord) -> bool:
    """Neither the engine's timings nor its usage said how much of the prompt was cached."""
    return not record.server_timings and record.cached_tokens is None


UNKNOWN_HITS = (
    "the engine reported no cached prompt tokens (vLLM: start it with "
    "--enable-prompt-tokens-details, or give ttft its metrics URL): the cost of a prefix hit "
    "was not measured and the prefix-cache samples were left out"
)


def hit_counter(target: Target) -> Callable[[], float | None] | None:
    """A reader of the engine's prefix-cache hit-token counter (at its metrics URL, else the
    server's ``/metrics``), or None where the engine's kind is unknown or it exports no such
    counter. A read that fails gives None."""
    if not target.engine_kind:
        return None
    try:
        source = (
            adapter_for(target.engine_kind)
            .metric_sources()
            .get(CommonMetric.PREFIX_CACHE_HIT_TOKENS)
        )
    except TtftError:
        return None
    if source is None:
        return None
    url, headers = target.metrics_url or target.root + "/metrics", target.auth_headers()

    def read() -> float | None:
        try:
            scrape = scrape_url(url, timeout_s=5.0, headers=headers)
        except TtftError:
            return None
        totals = (scrape.total(name) for name in source.names)
        return next((t for t in totals if t is not None), None)

    return read


def client_ttft_s(record: RequestRecord) -> float | None:
    if not record.ok or record.sent_ns is None or record.first_content_ns is None:
        return None
    return (record.first_content_ns - record.sent_ns) / 1e9


class _Prompts:
    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.nonce = secrets.token_hex(3)
        self.count = 0

    def text(self, tokens: int, tag: str) -> str:
        self.count += 1
        return text_of_tokens(self.tokenizer, tokens, f"sim-{self.nonce}-{tag}-{self.count}")

    def item(self, text: str, max_tokens: int, bucket: str) -> WorkItem:
        body = completion_body(text, max_tokens)
        body["temperature"] = 0
        return WorkItem(body, "completions", bucket)


def run_calibration(
    target: Target,
    tokenizer: Tokenizer,
    settings: EngineSettings,
    *,
    plan: CalibrationPlan | None = None,
    progress: Progress | None = None,
) -> tuple[Calibration, dict[str, list[RequestRecord]]]:
    """Measure, fit, and return the calibration with the raw records of each phase."""
    plan = plan or CalibrationPlan()
    say = progress or (lambda _msg: None)
    prompts = _Prompts(tokenizer)
    limit = (settings.ctx_per_slot or 4096) - plan.decode_tokens - 64
    lengths = sorted({min(n, limit) for n in plan.lengths if n >= 8})
    if len(lengths) < 2:
        raise TtftError(
            f"a slot's context ({settings.ctx_per_slot} tokens) is too small to calibrate",
            "give the engine at least 512 tokens of context per slot",
        )
    extra: dict[str, Any] = {"ignore_eos": True}
    phases: dict[str, list[RequestRecord]] = {}

    def run(name: str, items: list[WorkItem], concurrency: int) -> list[RequestRecord]:
        got = sample(target, items, concurrency=concurrency, extra_body=extra, label=name)
        failed = [r for r in got.records if not r.ok]
        if len(failed) > len(got.records) // 2:
            first = failed[0].error
            raise TtftError(
                f"calibration step '{name}': {len(failed)} of {len(got.records)} requests failed"
                + (f" ({first.kind}: {first.message})" if first is not None else ""),
                "check that the target serves /v1/completions and is not overloaded",
            )
        phases.setdefault(name, []).extend(got.records)
        return got.records

    say("warm-up")
    run("warmup", [prompts.item(prompts.text(16, "w"), 2, "warmup")], 1)
    say(f"prefill: {len(lengths)} lengths x {plan.repeats}, one at a time")
    items = [
        prompts.item(prompts.text(n, "p"), 4, f"prefill {n}")
        for _ in range(plan.repeats)
        for n in lengths
    ]
    run("prefill", items, 1)
    batches = sorted({1, max(1, settings.slots // 2), settings.slots})
    for k in batches:
        say(f"decode: {k} at once x {plan.decode_tokens} tokens")
        run(
            f"decode {k}",
            [
                prompts.item(prompts.text(plan.decode_prompt, "d"), plan.decode_tokens, f"d{k}")
                for _ in range(k)
            ],
            k,
        )
    if settings.prefix_cache:
        say("cached: the same prefix twice")
        hits = hit_counter(target)
        for prefix in plan.cached_prefixes:
            if prefix + plan.cached_suffix > limit:
                continue
            head = prompts.text(prefix, "c")
            first, second = (
                prompts.item(head + " " + prompts.text(plan.cached_suffix, "s"), 4, "cached")
                for _ in range(2)
            )
            run("cached", [first], 1)
            before = hits() if hits else None
            (record,) = run("cached", [second], 1)
            after = hits() if hits else None
            if cache_unknown(record) and before is not None and after is not None:
                # run alone, the counter's rise is this request's hit
                phases["cached"][-1] = replace(record, cached_tokens=round(after - before))
    say(f"burst: {settings.slots} prompts of {plan.burst_prompt} tokens at once")
    burst = [
        prompts.item(prompts.text(min(plan.burst_prompt, limit), "b"), 1, "burst")
        for _ in range(settings.slots)
    ]
    run("burst", burst, settings.slots)
    return fit_phases(phases, settings), phases


def fit_phases(phases: dict[str, list[RequestRecord]], settings: EngineSettings) -> Calibration:
    """The cost model from the phases' records (pure: also used on records read back)."""
    samples: list[StepSample] = []
    cached = phases.get("cached", [])
    # the second of each pair hit a prefix: unknown how much, it is no sample
    unknown = [r for r in cached[1::2] if cache_unknown(r)]
    usable_cached = [r for i, r in enumerate(cached) if i % 2 == 0 or not cache_unknown(r)]
    for record in phases.get("prefill", []) + usable_cached:
        s = prefill_sample(record, settings.batch_tokens)
        if s is not None:
            samples.append(s)
    for name, records in phases.items():
        if name.startswith("decode "):
            batch = int(name.split()[1])
            samples += [s for s in (decode_sample(r, batch) for r in records) if s is not None]
    cost, report = fit_cost(samples, overhead_s(phases.get("prefill", [])))
    if unknown:
        report = replace(report, notes=(*report.notes, UNKNOWN_HITS))
    source: dict[str, Any] = {"phases": {k: len(v) for k, v in phases.items()}}
    reuse = prefix_reuse(phases.get("cached", []))
    if reuse is not None:
        source["prefix_reuse"] = reuse
        if reuse < REUSE_FLOOR and settings.prefix_cache:
            # e.g. a sliding-window model without --swa-full: the engine restores no prefix
            settings = replace(settings, prefix_cache=False)
            report = replace(report, notes=(*report.notes, NO_REUSE))
    burst = [t for t in (client_ttft_s(r) for r in phases.get("burst", [])) if t is not None]
    if burst:
        source["burst_ttft_s"] = sorted(burst)
    return Calibration(cost, settings, report, source)
