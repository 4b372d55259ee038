"""Service-level objectives: parsing ``ttft:p99<600ms``, verdicts over a cell, and goodput.

An SLO is an upper bound on a percentile of one metric. Over a cell it passes or fails on that
percentile of the cell's samples. For goodput the same threshold is applied to each request: a
request is good only if it did not fail and its value meets every SLO's threshold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.metrics import get_metric, metric_names
from ttft.core.records import RequestRecord
from ttft.core.stats import percentile
from ttft.core.units import DURATION_UNIT, NS_PER_MS, NS_PER_S, NS_PER_US, TOKENS_UNIT

EXAMPLE = "ttft:p99<600ms"
_FORM = "metric:pNN<value+unit, e.g. ttft:p99<600ms, tpot:p95<50ms, e2e:p50<=2s"

_DURATION_UNITS = {"ns": 1, "us": NS_PER_US, "µs": NS_PER_US, "ms": NS_PER_MS, "s": NS_PER_S}
_TOKEN_UNITS = {"": 1, "tok": 1, "tokens": 1}

_PERCENTILE = re.compile(r"p(\d+(?:\.\d+)?)")
_BOUND = re.compile(r"(<=|<|>=|>|==|=)?\s*(\d+(?:\.\d+)?)?\s*([^\s\d.<>=].*)?")


@dataclass(frozen=True, slots=True)
class Slo:
    """An upper bound on a percentile of a metric; ``threshold`` is in the metric's unit."""

    metric: str
    percentile: float
    op: str  # "<" or "<="
    threshold: float
    text: str

    def meets(self, value: float) -> bool:
        return value < self.threshold if self.op == "<" else value <= self.threshold

    @property
    def label(self) -> str:
        return self.text


def _bad(text: str, part: str, why: str, fix: str | None = None) -> TtftError:
    return TtftError(
        f"SLO '{text}': {why} ('{part}')",
        fix or f"write each SLO as {_FORM}",
    )


def parse_slo(text: str) -> Slo:
    """One SLO from text such as ``ttft:p99<600ms``; raises ``TtftError`` naming the bad part."""
    source = text.strip()
    if ":" not in source:
        raise _bad(source, source, "no ':' between the metric and the percentile")
    name, _, rest = source.partition(":")
    name, rest = name.strip(), rest.strip()
    metric = get_metric(name)
    if metric is None:
        raise _bad(
            source,
            name,
            "unknown metric",
            f"use one of {', '.join(metric_names())}, e.g. {EXAMPLE}",
        )

    match = _PERCENTILE.match(rest)
    if match is None:
        part = re.split(r"[<>=]", rest, maxsplit=1)[0].strip() or rest
        raise _bad(source, part, "the percentile must be written pNN (p50, p95, p99, p99.9)")
    q = float(match.group(1))
    if not 0.0 < q < 100.0:
        raise _bad(source, match.group(0), "the percentile must be above p0 and below p100")
    bound_text = rest[match.end() :].strip()

    bound = _BOUND.fullmatch(bound_text)
    if bound is None:
        raise _bad(
            source, bound_text, "cannot read the bound: expected '<' or '<=', a number, a unit"
        )
    op, number, unit = bound.groups()
    if op is None:
        raise _bad(source, bound_text or rest, f"no '<' or '<=' after {match.group(0)}")
    if op not in ("<", "<="):
        raise _bad(
            source,
            op,
            "an SLO is an upper bound",
            f"use '<' or '<=', e.g. {EXAMPLE}",
        )
    if number is None:
        raise _bad(source, bound_text, "no number after the comparison")
    unit = (unit or "").strip()

    if metric.unit == DURATION_UNIT:
        if not unit:
            raise _bad(
                source,
                number,
                "the threshold has no unit",
                f"add one of ns, us, ms, s: {name}:{match.group(0)}{op}{number}ms",
            )
        if unit not in _DURATION_UNITS:
            raise _bad(source, unit, "unknown time unit", "use ns, us, ms or s, e.g. 600ms or 2s")
        threshold = float(number) * _DURATION_UNITS[unit]
    else:
        allowed = _TOKEN_UNITS if metric.unit == TOKENS_UNIT else {"": 1}
        if unit not in allowed:
            raise _bad(
                source,
                unit,
                f"{name} is counted in {metric.unit}, not a time",
                f"write a plain number, e.g. {name}:{match.group(0)}{op}{number.split('.')[0]}",
            )
        threshold = float(number)
    return Slo(metric=name, percentile=q, op=op, threshold=threshold, text=source)


def parse_slos(texts: str | Iterable[str]) -> tuple[Slo, ...]:
    """SLOs from comma-separated text, or from repeated options (each may hold commas)."""
    items = [texts] if isinstance(texts, str) else list(texts)
    slos: list[Slo] = []
    for item in items:
        for piece in item.split(","):
            if piece.strip():
                slos.append(parse_slo(piece))
    return tuple(slos)


@dataclass(frozen=True, slots=True)
class SloVerdict:
    """An SLO checked over one cell: the observed percentile and whether it meets the bound.

    With no samples ``observed`` is ``None`` and the SLO fails: nothing was shown to meet it.
    """

    slo: str
    metric: str
    percentile: float
    op: str
    threshold: float
    observed: float | None
    n: int
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SloVerdict:
        return cls(**data)


def evaluate(slo: Slo, sorted_values: Sequence[float]) -> SloVerdict:
    """Check an SLO against a cell's sorted samples of its metric."""
    observed = percentile(sorted_values, slo.percentile) if sorted_values else None
    return SloVerdict(
        slo=slo.text,
        metric=slo.metric,
        percentile=slo.percentile,
        op=slo.op,
        threshold=slo.threshold,
        observed=observed,
        n=len(sorted_values),
        passed=observed is not None and slo.meets(observed),
    )


def is_good(record: RequestRecord, slos: Iterable[Slo]) -> bool:
    """Whether one request counts toward goodput.

    A failed request is never good. A value the request does not have (tpot of a one-token
    answer) cannot break a threshold; for a list metric (itl) every value must meet it.
    """
    if not record.ok:
        return False
    for slo in slos:
        metric = get_metric(slo.metric)
        if metric is None:  # parse_slo only builds SLOs on known metrics
            raise ValueError(f"unknown metric {slo.metric!r}")
        if not all(slo.meets(value) for value in metric.values(record)):
            return False
    return True


def count_good(records: Iterable[RequestRecord], slos: Sequence[Slo]) -> int:
    return sum(1 for record in records if is_good(record, slos))
