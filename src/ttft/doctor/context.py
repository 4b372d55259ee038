"""What every doctor step can use: the target, prompts of a given size, the budget, and what
earlier steps measured (:class:`~ttft.doctor.handoff.Handoff`)."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.core.slo import Slo
from ttft.core.target import Target
from ttft.doctor.handoff import Handoff
from ttft.engines.adapter import GENERIC_ADVICE, EngineAdapter, EngineAdvice
from ttft.engines.control import ServerTokenizer
from ttft.engines.metrics import CommonMetric
from ttft.engines.registry import adapter_for
from ttft.load.gpu_sampler import GpuSource
from ttft.probe.sampler import Sample, sample
from ttft.workload.exact_length import text_of_tokens
from ttft.workload.requests import WorkItem, chat_body
from ttft.workload.run_mark import marked_items
from ttft.workload.text_source import sentence_text
from ttft.workload.tokenizer import Tokenizer

# Engines known to accept ``ignore_eos``: it keeps a base model from stopping after one token,
# so streams are long enough to judge how their chunks arrive.


@dataclass
class DoctorContext:
    target: Target
    deadline: float  # time.monotonic() by which the whole run must end
    direct: Target | None = None
    managed: bool = False  # doctor started the engine itself
    cold_record: RequestRecord | None = None
    levels: Sequence[int] = (1, 8, 32)
    real_items: list[WorkItem] = field(default_factory=list)  # the log's, with max_tokens 1
    # The answer lengths the log's requests ask for (max_tokens / max_completion_tokens).
    asked_answer_tokens: tuple[int, ...] = ()
    slos: tuple[Slo, ...] = ()
    tokenizer: Tokenizer | None = None
    props: dict[str, Any] = field(default_factory=dict)
    gpu: GpuSource | None = None  # DCGM exporter or nvidia-smi, sampled beside each load level
    gpu_missing: str = ""  # why there is no GPU source, for the report's blind spots
    # --hol: the head-of-line step runs with its own prompts when the log has no long/short mix.
    force_hol: bool = False
    handoff: Handoff = field(default_factory=Handoff)  # measurements one step leaves another
    # This run's mark at the start of every prompt it sends (``marked``). An engine's prefix
    # cache keeps what an earlier doctor run sent: a second run that sent the same prompts timed
    # cache hits where it meant to time prefills, and a head-of-line block, a capacity limit or
    # a dynamic prefix found by the first run was not found by the second.
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def engine_kind(self) -> str | None:
        return self.target.engine_kind

    @property
    def adapter(self) -> EngineAdapter | None:
        """The engine's adapter when its kind is known (given, or detected from its metrics)."""
        return adapter_for(self.engine_kind) if self.engine_kind else None

    @property
    def advice(self) -> EngineAdvice:
        """The engine's own wording of each fix; generic wording when the engine is unknown."""
        adapter = self.adapter
        return adapter.advice if adapter is not None else GENERIC_ADVICE

    def extra_body(self) -> dict[str, Any]:
        adapter = self.adapter
        return {"ignore_eos": True} if adapter is not None and adapter.ignores_eos else {}

    def text(self, tokens: int, seed: str) -> str:
        """A prose text of ``tokens`` tokens (exact with a tokenizer, else ~1.3 tokens a word)."""
        if self.tokenizer is not None:
            return text_of_tokens(self.tokenizer, tokens, seed)
        return sentence_text(seed, max(1, int(tokens / 1.3)))

    def chat(self, user: str, *, system: str | None = None, max_tokens: int = 1) -> WorkItem:
        messages = [{"role": "system", "content": system}] if system is not None else []
        messages.append({"role": "user", "content": user})
        body = chat_body(messages, max_tokens)
        body["temperature"] = 0
        return WorkItem(body, "chat", "doctor")

    def answer_tokens(self, cap: int = 256) -> int:
        """The median answer length the user's own requests ask for (``max_tokens`` or
        ``max_completion_tokens``), at most ``cap``; 1 without a request log. A running decode
        holds its sequence (vLLM) or slot (llama-server), so capacity is only seen with it."""
        asked = self.asked_answer_tokens
        return max(1, min(cap, int(statistics.median(asked)))) if asked else 1

    def marked(self, items: Sequence[WorkItem]) -> list[WorkItem]:
        """``items`` as this run sends them: each prompt starts with the run's mark, the same
        for every request of the run (so prompts the run means to share still share it)."""
        mark = f"[{self.run}] "
        return marked_items(items, mark)

    def sample(self, items: Sequence[WorkItem], **options: Any) -> Sample:
        items = self.marked(items)
        extra = {**self.extra_body(), **options.pop("extra_body", {})}
        # No single request may outlive the run's budget (a stuck server must not stall it).
        options.setdefault("timeout_s", max(5.0, min(300.0, self.seconds_left())))
        adapter = self.adapter
        one_by_one = (
            adapter is not None
            and not adapter.reports_cached_tokens
            and CommonMetric.PREFIX_CACHE_HIT_TOKENS in adapter.sources
            and options.get("concurrency", 1) == 1
            and len(items) > 1
        )
        if not one_by_one:
            return self._window(items, extra, options)
        # One metrics window per request, so the engine's prefix-cache counter tells each
        # request's cached tokens (vLLM's answers do not say).
        parts = [self._window([item], extra, options) for item in items]
        peaks: dict[str, float] = {}
        for part in parts:
            for name, value in part.peaks.items():
                peaks[name] = max(value, peaks.get(name, value))
        return Sample(
            records=[r for p in parts for r in p.records],
            server=parts[-1].server,
            duration_ns=sum(p.duration_ns for p in parts),
            peaks=peaks,
            gpu=[g for p in parts for g in p.gpu],
            gpu_errors=[e for p in parts for e in p.gpu_errors],
        )

    def _window(
        self, items: Sequence[WorkItem], extra: dict[str, Any], options: dict[str, Any]
    ) -> Sample:
        result = sample(self.target, items, extra_body=extra, **options)
        hits = (result.server or {}).get("metrics", {}).get(CommonMetric.PREFIX_CACHE_HIT_TOKENS)
        if len(result.records) == 1 and isinstance(hits, dict) and hits.get("value") is not None:
            record = result.records[0]
            if record.ok and record.cached_tokens is None:
                record.cached_tokens = int(hits["value"])
        return result

    def slots(self) -> int | None:
        value = self.props.get("total_slots")
        return int(value) if isinstance(value, int) else None


def asked_answer_tokens(items: Sequence[WorkItem]) -> tuple[int, ...]:
    """The answer lengths requests ask for, as written in their bodies."""
    asked = []
    for item in items:
        value = item.body.get("max_completion_tokens", item.body.get("max_tokens"))
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            asked.append(value)
    return tuple(asked)


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def ttft_ms(record: RequestRecord) -> float | None:
    """Time to the first token, from the first chunk that carried text.

    Doctor's probes ask for one token. When that one token carries no text (a JSON grammar's
    leading blank, which the server's parser trims; a special token), the stream's end is the
    first token's time: the server ends the stream right after its one token. Without that,
    a prompt whose answer starts with a blank had no TTFT at all (a response_format enum did,
    on about one request in ten).
    """
    if record.sent_ns is None or record.error is not None:
        return None
    first = record.first_content_ns
    if first is None and record.completion_tokens == 1 and record.output_text_chars == 0:
        first = record.done_ns
    if first is None:
        return None
    return (first - record.sent_ns) / 1e6


def ttfts_ms(records: Sequence[RequestRecord]) -> list[float]:
    return [v for v in (ttft_ms(r) for r in records) if v is not None]


def server_ms(record: RequestRecord, key: str) -> float | None:
    timings = record.server_timings or {}
    value = timings.get(key)
    return float(value) if value is not None else None


def server_tokenizer(target: Target) -> Tokenizer | None:
    tok = ServerTokenizer(target, timeout_s=10)
    try:
        tok.encode("probe")
    except TtftError:
        return None
    return tok


def describe_levels(values: Mapping[int, float]) -> str:
    return ", ".join(f"c={c}: {v:.0f} ms" for c, v in sorted(values.items()))
