"""Helpers for the HTML renderer tests: synthetic runs with records, and a reader of the page's
charts and numeric table cells (the standard library's HTML parser, no browser)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.slo import parse_slos
from ttft.core.summary import summarize_run

MS = 1_000_000


def make_records(per_cell: int = 30, seed: int = 1) -> list[RequestRecord]:
    """Two buckets x three concurrency levels, with cold, warm-up and failed requests."""
    rng = random.Random(seed)
    records: list[RequestRecord] = []
    clock = 0
    for bucket in (64, 512):
        for concurrency in (1, 2, 4):
            cell = f"{bucket} tok c={concurrency}"
            for i in range(per_cell):
                phase = "warmup" if i == 0 else "cold" if i == 1 else "warm"
                clock += 50 * MS
                sent = clock + rng.randrange(0, MS)
                ttft = int(rng.lognormvariate(0, 0.2) * (bucket / 4 + 40) * concurrency * MS)
                chunks = [sent + ttft + k * 15 * MS for k in range(6)]
                failed = i % 17 == 9
                records.append(
                    RequestRecord(
                        index=len(records),
                        cell=cell,
                        phase=phase,
                        scheduled_ns=clock,
                        sent_ns=sent,
                        headers_ns=sent + 2 * MS,
                        first_byte_ns=sent + ttft - MS,
                        first_event_ns=sent + ttft - MS // 2,
                        first_content_ns=None if failed else sent + ttft,
                        first_output_ns=None if failed else sent + ttft,
                        chunk_ns=[] if failed else chunks,
                        done_ns=chunks[-1] + MS,
                        prompt_tokens=bucket,
                        completion_tokens=None if failed else 6,
                        server_timings=None if failed else {"prompt_ms": ttft / MS * 0.8},
                        error=ErrorInfo("timeout", "read timeout") if failed else None,
                    )
                )
    return records


def summary_doc(records: list[RequestRecord], slos: str = "ttft:p99<400ms") -> dict[str, Any]:
    """The summary as bench writes it to summary.json, read back."""
    summary = summarize_run(records, slos=parse_slos(slos), resamples=100, meta={"target": "t"})
    parsed: dict[str, Any] = json.loads(json.dumps(summary.to_dict()))
    return parsed


@dataclass
class PageReader(HTMLParser):
    charts: dict[str, int] = field(default_factory=dict)  # chart name -> marks drawn in it
    cells: list[tuple[str, str, str]] = field(default_factory=list)  # (table, key, value)
    sources: list[str] = field(default_factory=list)  # every src/href attribute
    scripts: int = 0
    _chart: str | None = None
    _table: str = ""

    def __post_init__(self) -> None:
        super().__init__()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.sources += [a[k] for k in ("src", "href") if k in a]
        if tag == "script":
            self.scripts += 1
        if tag == "svg" and "chart" in a.get("class", ""):
            self._chart = a["data-chart"]
            self.charts[self._chart] = 0
        elif self._chart is not None and "mark" in a.get("class", "").split():
            self.charts[self._chart] += 1
        if tag == "table":
            self._table = a.get("data-table", "")
        if tag == "td" and "data-value" in a:
            self.cells.append((self._table, a.get("data-key", ""), a["data-value"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._chart = None


def read_page(text: str) -> PageReader:
    reader = PageReader()
    reader.feed(text)
    return reader


_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def resolve(document: Mapping[str, Any] | list[Any], key: str) -> Any:
    """The value at a JSON path such as ``cells[0].metrics.ttft.p50``."""
    value: Any = document
    for name, index in _STEP.findall(key):
        value = value[int(index)] if index else value[name]
    return value


def mask_generated(text: str) -> str:
    return re.sub(r'<p class="meta" id="generated">[^<]*</p>', "", text)


def _level(concurrency: int, samples: list[float], goodput: float, passed: bool = True) -> Any:
    from ttft.core.stats import describe
    from ttft.tune.trial import LevelResult

    stats = describe(sorted(samples), resamples=100)
    assert stats is not None
    return LevelResult(
        concurrency=concurrency,
        n=len(samples),
        ok=len(samples),
        ttft_p50_ms=stats.p50,
        ttft_p95_ms=stats.p95,
        ttft_p99_ms=stats.p99,
        ttft_p50_ci_ms=(stats.p50_ci.low, stats.p50_ci.high),
        ttft_p95_ci_ms=(stats.p95_ci.low, stats.p95_ci.high),
        goodput_per_s=goodput,
        good_fraction=1.0 if passed else 0.5,
        slo_passed=passed,
        ttft_ms=tuple(samples),
    )


def _samples(median: float, seed: int, n: int = 40) -> list[float]:
    rng = random.Random(seed)
    return [rng.lognormvariate(0, 0.1) * median for _ in range(n)]


def ab_document() -> dict[str, Any]:
    """A three-step chain as ``tune ab`` writes it: a big gain, no effect, a regression."""
    from ttft.core.changes import Change
    from ttft.tune.ab import arms
    from ttft.tune.attribution import attribution, overlap_note, total_cut
    from ttft.tune.tables import ab_json
    from ttft.tune.trial import TrialResult

    baseline = Change("baseline", {"-np": "1"})
    changes = [
        Change("move-dynamic", transforms=("move-dynamic",)),
        Change("-ub 256", {"-ub": "256"}),
        Change("-np 4", {"-np": "4"}),
    ]
    medians = {
        "step 0": 1800.0,
        "step 1": 600.0,
        "step 2": 605.0,
        "step 3": 900.0,
        "alone 2": 1790.0,
        "alone 3": 1500.0,
    }
    plan = arms(baseline, changes)
    by_arm = {
        arm.name: [
            TrialResult(
                f"t-{arm.name}",
                arm.flags,
                "ok",
                levels=[_level(4, _samples(medians[arm.name], i), 1.0)],
            )
        ]
        for i, arm in enumerate(plan)
    }
    rows = attribution(plan, by_arm)
    data = ab_json(rows, overlap_note(rows), by_arm, total_cut(rows), [3])
    parsed: dict[str, Any] = json.loads(json.dumps(data))
    return parsed


def sweep_document() -> dict[str, Any]:
    """Four configurations as ``tune sweep`` writes them; one failed to start."""
    from ttft.tune.sweep import chosen
    from ttft.tune.tables import sweep_json
    from ttft.tune.trial import TrialResult

    results = []
    for i, (slots, base) in enumerate(((1, 400.0), (2, 300.0), (4, 350.0))):
        levels = [
            _level(c, _samples(base * (1 + c / slots / 4), i * 10 + c), c * 0.9 / (1 + c / 8))
            for c in (1, 2, 4, 8)
        ]
        results.append(
            TrialResult(
                f"np{slots}",
                {"-np": str(slots)},
                "ok",
                levels=levels,
                best=levels[2],
                launch_command=["llama-server", "-np", str(slots)],
            )
        )
    results.append(TrialResult("np8", {"-np": "8"}, "failed", reason="engine did not start"))
    data = sweep_json(results, ["ttft:p99<900ms"], chosen(results))
    parsed: dict[str, Any] = json.loads(json.dumps(data))
    return parsed


def doctor_document() -> dict[str, Any]:
    """A doctor report (schema ttft.doctor/1) with one transport finding and its evidence."""
    evidence = [
        {"name": "median chunk gap (via proxy)", "value": 0.2, "unit": "ms", "source": "client"},
        {"name": "server decode time", "value": 830.0, "unit": "ms", "source": "server timings"},
        {"name": "response Content-Encoding", "value": "gzip", "unit": "", "source": "client"},
    ]
    finding = {
        "rule": "transport/bunched-stream",
        "symptom": "the stream arrives in one piece",
        "cause": "the proxy buffers and gzips text/event-stream",
        "action": "gzip off for SSE",
        "cost_tier": "config",
        "confidence": "high",
        "step": "transport",
        "evidence": evidence,
        "expected_gain_ms": 800.0,
        "expected_gain": None,
        "change": None,
    }
    steps = [
        {
            "name": "transport",
            "title": "transport",
            "status": "ok",
            "summary": "bunched",
            "evidence": evidence,
            "findings": [finding],
            "notes": [],
            "seconds": 2.5,
        },
        {
            "name": "cache",
            "title": "cache",
            "status": "skipped",
            "summary": "",
            "evidence": [],
            "findings": [],
            "notes": ["no request log given"],
            "seconds": 0.0,
        },
    ]
    return {
        "schema": "ttft.doctor/1",
        "ttft_version": "0",
        "target": "http://proxy:8080",
        "healthy": False,
        "failed_steps": [],
        "unfinished_steps": [],
        "findings": [finding],
        "steps": steps,
        "meta": {"engine": "llamacpp", "model": "m"},
    }
