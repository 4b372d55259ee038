"""The statistics and the report of ``ttft tune frontend``: pure functions of integer timings.

Per request and stage: the cold (first) call apart, then the median and p95 of the warm calls.
Per stage, across requests: the p50 and p95 of the per-request medians (the typical request and
the long ones) and their mean (the cost per request the savings are stated in). Warnings are
written like hyperfine's: in words, with what to do about them.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ttft.core.stats import percentile

SCHEMA = "ttft.tune.frontend/1"
MIN_REPEATS = 5  # fewer warm runs than this make the medians rough
P95_MIN_RUNS = 20  # below this a p95 is close to the maximum of the runs
SPREAD_RATIO = 2.0  # a request's p95 over its median beyond this is "high spread"
CLOCK_FLOOR = 20  # a median within this many clock readings is mostly the clock

# (alternative stage, anchor stage, what the change is): a saving is anchor minus alternative.
ALTERNATIVES = (
    (
        "render_prerendered",
        "render_full",
        "pre-rendered template (cache hit) instead of a full render",
    ),
    ("tokenize_rust", "tokenize_python", "Rust tokenizers instead of a Python tokenizer"),
    ("tokenize_rust", "tokenize_server", "local Rust tokenizer instead of the server's /tokenize"),
)


@dataclass
class RequestTimings:
    """One request's raw timings (ns): the cold call of each stage and its warm calls."""

    where: str
    cold: dict[str, int] = field(default_factory=dict)
    warm: dict[str, list[int]] = field(default_factory=dict)
    prerenderable: bool | None = None
    chars: int = 0
    tokens: int = 0

    def add(self, stage: str, ns: int, cold: bool) -> None:
        if cold:
            self.cold[stage] = ns
        else:
            self.warm.setdefault(stage, []).append(ns)

    def median(self, stage: str) -> float:
        return percentile(sorted(self.warm[stage]), 50.0)

    def p95(self, stage: str) -> float:
        return percentile(sorted(self.warm[stage]), 95.0)


@dataclass(frozen=True)
class Mismatch:
    """A tokenizer whose ids differ from the Rust backend's on one request."""

    where: str
    tokenizer: str  # "python" | "server"
    tokens: int
    rust_tokens: int
    first_difference: int  # index of the first differing id (or the shorter length)


@dataclass(frozen=True)
class StageSummary:
    stage: str
    p50_ms: float
    p95_ms: float
    mean_ms: float
    cold_ms: float  # median over requests of the first call


@dataclass(frozen=True)
class Saving:
    change: str
    anchor: str
    alternative: str
    ms_per_request: float  # mean over requests of (anchor median - alternative median)
    max_ms: float  # the largest per-request saving (usually the longest prompt)
    ratio: float  # sum of alternative medians / sum of anchor medians


@dataclass(frozen=True)
class CacheReuse:
    """How often a pre-render cache keyed by the static part would hit on this log, in order."""

    requests: int
    static_parts: int  # misses in one pass as the requests are
    static_parts_moved: int  # misses once dynamic content is moved to the end
    saving_ms_per_request: float  # one pass, as the requests are
    saving_ms_per_request_moved: float


@dataclass(frozen=True)
class FrontendReport:
    repeats: int
    clock_overhead_ns: int
    sources: Mapping[str, str]
    requests: tuple[RequestTimings, ...]
    stages: tuple[StageSummary, ...]
    savings: tuple[Saving, ...]
    cache: CacheReuse
    mismatches: tuple[Mismatch, ...]
    warnings: tuple[str, ...]

    def stage(self, name: str) -> StageSummary | None:
        return next((s for s in self.stages if s.stage == name), None)

    def saving(self, anchor: str, alternative: str) -> Saving | None:
        return next(
            (s for s in self.savings if s.anchor == anchor and s.alternative == alternative), None
        )


def _ms(ns: float) -> float:
    return ns / 1e6


def summarize_stage(rows: Sequence[RequestTimings], stage: str) -> StageSummary:
    medians = sorted(r.median(stage) for r in rows)
    colds = sorted(float(r.cold[stage]) for r in rows)
    return StageSummary(
        stage,
        p50_ms=_ms(percentile(medians, 50.0)),
        p95_ms=_ms(percentile(medians, 95.0)),
        mean_ms=_ms(statistics.fmean(medians)),
        cold_ms=_ms(percentile(colds, 50.0)),
    )


def saving_of(rows: Sequence[RequestTimings], anchor: str, alternative: str, change: str) -> Saving:
    diffs = [r.median(anchor) - r.median(alternative) for r in rows]
    total = sum(r.median(anchor) for r in rows)
    ratio = sum(r.median(alternative) for r in rows) / total if total > 0 else float("nan")
    return Saving(change, anchor, alternative, _ms(statistics.fmean(diffs)), _ms(max(diffs)), ratio)


def cache_reuse(rows: Sequence[RequestTimings], static_parts: int, moved: int) -> CacheReuse:
    """One pass over the log: every distinct static part is one miss (about one render with the
    sentinel, plus the hash and the join: no saving, a hit's cost more), every other request a
    hit. An estimate from the measured medians, stated per request of the log."""
    n = len(rows)
    full = statistics.fmean(r.median("render_full") for r in rows)
    hit = statistics.fmean(r.median("render_prerendered") for r in rows)

    def saving(misses: int) -> float:
        return _ms(((n - misses) * (full - hit) - misses * hit) / n)

    return CacheReuse(n, static_parts, moved, saving(static_parts), saving(moved))


def warnings_for(
    rows: Sequence[RequestTimings],
    stages: Sequence[str],
    repeats: int,
    clock_overhead_ns: int,
    mismatches: Sequence[Mismatch],
    cache: CacheReuse,
) -> list[str]:
    out: list[str] = []
    if repeats < MIN_REPEATS:
        out.append(
            f"Only {repeats} warm run(s) per request: medians are rough and p95 is the slowest "
            f"run. Use --repeats {P95_MIN_RUNS} or more for numbers to compare."
        )
    elif repeats < P95_MIN_RUNS:
        out.append(
            f"{repeats} warm runs per request: each request's p95 is close to its slowest run; "
            f"use --repeats {P95_MIN_RUNS} or more to read p95."
        )
    for stage in stages:
        spread = [(r.p95(stage) / r.median(stage), r.where) for r in rows if r.median(stage) > 0]
        high = [(x, w) for x, w in spread if x > SPREAD_RATIO]
        if repeats >= 2 and high:
            worst, where = max(high)
            out.append(
                f"High spread in {stage}: on {len(high)} of {len(rows)} requests the p95 is over "
                f"{SPREAD_RATIO:g}x the median (worst {worst:.1f}x, {where}). Other processes may "
                "be interfering: rerun on a quiet machine, or with more --repeats."
            )
        typical = percentile(sorted(r.median(stage) for r in rows), 50.0)
        if typical < CLOCK_FLOOR * max(clock_overhead_ns, 1):
            out.append(
                f"{stage} takes {typical / 1e3:.1f} us per request, within {CLOCK_FLOOR}x of the "
                f"clock's own cost ({clock_overhead_ns} ns): read it as an upper bound."
            )
    for tok in sorted({m.tokenizer for m in mismatches}):
        bad = [m for m in mismatches if m.tokenizer == tok]
        out.append(
            f"The {tok} tokenizer's ids differ from the Rust backend's on {len(bad)} of "
            f"{len(rows)} requests (first: {bad[0].where}, at token {bad[0].first_difference}): "
            "its timing is of a different tokenization; see 'mismatches'."
        )
    not_cacheable = [r.where for r in rows if r.prerenderable is False]
    if not_cacheable:
        out.append(
            f"{len(not_cacheable)} request(s) cannot be pre-rendered (first: {not_cacheable[0]}): "
            "the last user message is not plain text, or the template does more with it than "
            "place it once. Their cached path is timed as the full render a cache falls back to."
        )
    if cache.requests > 1 and cache.static_parts == cache.requests:
        out.append(
            f"Every request has its own static part ({cache.static_parts} of {cache.requests}): "
            "a cache keyed by its hash never hits on this log. With dynamic content (dates, ids) "
            f"moved to the end of the last user message there would be {cache.static_parts_moved}."
        )
    return out


def build_report(
    rows: Sequence[RequestTimings],
    *,
    repeats: int,
    mismatches: Sequence[Mismatch],
    static_parts: int,
    static_parts_moved: int,
    clock_overhead_ns: int,
    sources: Mapping[str, str],
) -> FrontendReport:
    """The report from raw timings: every row must hold the same stages, cold and warm."""
    stages = [s for s in rows[0].warm if all(s in r.warm and s in r.cold for r in rows)]
    savings = tuple(
        saving_of(rows, anchor, alt, change)
        for alt, anchor, change in ALTERNATIVES
        if alt in stages and anchor in stages
    )
    cache = cache_reuse(rows, static_parts, static_parts_moved)
    warnings = warnings_for(rows, stages, repeats, clock_overhead_ns, mismatches, cache)
    return FrontendReport(
        repeats=repeats,
        clock_overhead_ns=clock_overhead_ns,
        sources=dict(sources),
        requests=tuple(rows),
        stages=tuple(summarize_stage(rows, s) for s in stages),
        savings=savings,
        cache=cache,
        mismatches=tuple(mismatches),
        warnings=tuple(warnings),
    )


def _r(x: float) -> float:
    return round(x, 4)


def to_json(report: FrontendReport) -> dict[str, Any]:
    """The versioned document (``ttft.tune.frontend/1``); times in ms rounded to 0.1 us."""
    stage_names = [s.stage for s in report.stages]
    return {
        "schema": SCHEMA,
        "repeats": report.repeats,
        "clock_overhead_ns": report.clock_overhead_ns,
        "sources": dict(report.sources),
        "stages": {
            s.stage: {
                "p50_ms": _r(s.p50_ms),
                "p95_ms": _r(s.p95_ms),
                "mean_ms": _r(s.mean_ms),
                "cold_ms": _r(s.cold_ms),
            }
            for s in report.stages
        },
        "savings": [
            {
                "change": s.change,
                "anchor": s.anchor,
                "alternative": s.alternative,
                "ms_per_request": _r(s.ms_per_request),
                "max_ms": _r(s.max_ms),
                "ratio": _r(s.ratio),
            }
            for s in report.savings
        ],
        "cache": {
            "requests": report.cache.requests,
            "static_parts": report.cache.static_parts,
            "static_parts_moved": report.cache.static_parts_moved,
            "saving_ms_per_request": _r(report.cache.saving_ms_per_request),
            "saving_ms_per_request_moved": _r(report.cache.saving_ms_per_request_moved),
        },
        "requests": [
            {
                "where": r.where,
                "chars": r.chars,
                "tokens": r.tokens,
                "prerenderable": r.prerenderable,
                "stages": {
                    s: {
                        "cold_ms": _r(_ms(r.cold[s])),
                        "p50_ms": _r(_ms(r.median(s))),
                        "p95_ms": _r(_ms(r.p95(s))),
                        "runs": len(r.warm[s]),
                    }
                    for s in stage_names
                },
            }
            for r in report.requests
        ],
        "mismatches": [
            {
                "where": m.where,
                "tokenizer": m.tokenizer,
                "tokens": m.tokens,
                "rust_tokens": m.rust_tokens,
                "first_difference": m.first_difference,
            }
            for m in report.mismatches
        ],
        "warnings": list(report.warnings),
    }
