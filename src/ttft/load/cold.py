"""Cold starts: restart a managed engine before every sample, so each request is its first.

The warm statistics of a normal run hide the first request after a start (page faults, kernel
set-up, cache allocation); this measures only that request, several times, with a fresh process
each time, and the engine's own start-up time beside it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ttft.client.stream import StreamingClient
from ttft.core.client_health import assess, overall
from ttft.core.client_verdict import HealthSample
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.slo import Slo
from ttft.core.summary import BenchSummary, summarize_run
from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.load.calibrate import prompt_frame
from ttft.load.health_probe import client_probe
from ttft.load.sink import RESULTS_SCHEMA, JsonlSink
from ttft.workload.exact_length import BARE

COLD_CELL = "cold start"


class ManagedEngine(Protocol):
    """What cold-start sampling needs from an engine it started (stopping is the launcher's)."""

    @property
    def base_url(self) -> str: ...

    @property
    def metrics_url(self) -> str: ...

    model_name: str
    startup_s: float


@dataclass
class ColdSample:
    record: RequestRecord
    startup_s: float


def measure_cold_starts(
    launch: Callable[[], AbstractContextManager[ManagedEngine]],
    samples: int,
    prompt_tokens: int,
    sink: JsonlSink,
    *,
    on_sample: Callable[[ColdSample], None] | None = None,
    health: list[HealthSample] | None = None,
) -> list[ColdSample]:
    """Start the engine, send one request of ``prompt_tokens`` tokens, stop; ``samples`` times."""
    anchor = RunAnchor.now()
    out: list[ColdSample] = []
    health = health if health is not None else []
    for index in range(samples):
        with launch() as engine:
            target = Target(engine.base_url, engine.model_name, engine.metrics_url, "llamacpp")
            tokenizer = ServerTokenizer(target)
            frame = prompt_frame(target, tokenizer, "chat") or BARE
            seed = f"ttft/cold/{index}"
            text = frame.content(tokenizer, max(prompt_tokens, frame.overhead + 1), seed)
            body = {
                "messages": [{"role": "user", "content": text}],
                "max_tokens": 1,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            record = RequestRecord(index=index, cell=COLD_CELL, phase="cold")

            async def send(
                target: Target = target,
                body: dict[str, object] = body,
                record: RequestRecord = record,
            ) -> None:
                async with StreamingClient(target.root, model=target.model) as client:
                    probe = client_probe("main", client)
                    probe.start()
                    await client.send(body, record, anchor)
                    health.append(await probe.stop())

            asyncio.run(send())
            sink.write_record(record)
            sink.write({"type": "cold_start", "index": index, "startup_s": engine.startup_s})
            sample = ColdSample(record, engine.startup_s)
            out.append(sample)
            if on_sample is not None:
                on_sample(sample)
    return out


@dataclass
class ColdRun:
    """A cold-start run: the summary of the first requests, and each start-up time, sorted."""

    summary: BenchSummary
    startups_s: list[float]


def run_cold_bench(
    launch: Callable[[], AbstractContextManager[ManagedEngine]],
    samples: int,
    prompt_tokens: int,
    records_path: Path,
    slos: Sequence[Slo] = (),
    *,
    on_sample: Callable[[ColdSample], None] | None = None,
) -> ColdRun:
    """``samples`` cold starts appended to ``records_path`` as they finish, then summarized.

    Throughput over restarts means nothing, so the summary's window is the requests' own time.
    """
    with JsonlSink(records_path) as sink:
        sink.write(
            {
                "type": "run",
                "schema": RESULTS_SCHEMA,
                "mode": "cold",
                "prompt_tokens": prompt_tokens,
            }
        )
        health: list[HealthSample] = []
        done = measure_cold_starts(
            launch, samples, prompt_tokens, sink, on_sample=on_sample, health=health
        )
        sink.write({"type": "end"})
    startups = sorted(s.startup_s for s in done)
    records = [s.record for s in done]
    busy = sum((r.done_ns or 0) - (r.sent_ns or 0) for r in records if r.sent_ns is not None)
    summary = summarize_run(
        records,
        duration_ns=busy or None,
        slos=slos,
        meta={"mode": "cold", "startup_s": startups, "prompt_tokens": prompt_tokens},
    )
    # One request per start: the client's health is judged over those requests alone.
    verdict = assess(health, records)
    for cell in summary.cells:
        cell.client_health = verdict
    summary.client_health = overall({cell.cell: verdict for cell in summary.cells})
    return ColdRun(summary, startups)
