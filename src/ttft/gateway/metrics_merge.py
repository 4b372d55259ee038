"""Merging the metric samples of several gateway workers into one view (pure: no I/O).

A snapshot is one worker's registry at one moment as plain data: families of samples, each
sample keyed by its name and label pairs. With ``--workers N`` every worker writes its
snapshot to a file (``metrics_files.py``) and a scrape on any worker merges them all, with
the ``retired`` totals of workers that have died, so the counters never go backwards.

How samples combine, per family type:
- counters and histograms (buckets, ``_sum``, ``_count``): summed; they are cumulative, and
  the only kinds kept for a worker once it has died (``cumulative_only``);
- gauges: summed by default, since the gateway's gauges are counts of something each worker
  holds (``in_flight``, ``queue_depth``, ``prerender_cache_entries``/``_bytes``), except those
  in ``GAUGE_RULES``: ``upstream_healthy`` is the minimum (1 only while every worker's own
  health checks pass the upstream), and ``worker`` the maximum (one series per worker, its
  value the number of workers; a dead worker's last snapshot and its replacement's overlap for
  a moment, and must not read 2N).

Anything malformed in a snapshot raises ``ValueError`` in ``families_from_json``; the reader
then ignores that file (a worker killed mid-write leaves at most a partial temporary file,
which is never read, but a damaged disk must not break every scrape).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Labels = tuple[tuple[str, str], ...]
SampleKey = tuple[str, Labels]  # (sample name, label pairs in the registry's order)

TYPES = frozenset({"counter", "histogram", "gauge"})
CUMULATIVE = frozenset({"counter", "histogram"})

GAUGE_RULES: dict[str, Callable[[float, float], float]] = {
    "ttft_gateway_upstream_healthy": min,
    "ttft_gateway_worker": max,
}


def _add(a: float, b: float) -> float:
    return a + b


@dataclass
class Family:
    """One metric family: its name as the registry gives it (a counter's without ``_total``),
    type, help text, and samples."""

    name: str
    type: str
    help: str
    samples: dict[SampleKey, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "help": self.help,
            "samples": [[n, dict(labels), v] for (n, labels), v in self.samples.items()],
        }


def families_from_json(data: object) -> list[Family]:
    """The families of a decoded snapshot; ``ValueError`` on anything not of that shape."""
    if not isinstance(data, list):
        raise ValueError("families: expected a list")
    return [_family(item) for item in data]


def _family(item: object) -> Family:
    if not isinstance(item, dict):
        raise ValueError("family: expected an object")
    name, kind, text, samples = (item.get(k) for k in ("name", "type", "help", "samples"))
    if not isinstance(name, str) or not isinstance(text, str) or kind not in TYPES:
        raise ValueError(f"family {name!r}: bad name, type or help")
    if not isinstance(samples, list):
        raise ValueError(f"family {name}: samples must be a list")
    family = Family(name, str(kind), text)
    for sample in samples:
        if not isinstance(sample, list) or len(sample) != 3:
            raise ValueError(f"family {name}: a sample must be [name, labels, value]")
        sample_name, labels, value = sample
        if not isinstance(sample_name, str) or not sample_name.startswith(name):
            raise ValueError(f"family {name}: bad sample name {sample_name!r}")
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise ValueError(f"family {name}: labels must map names to strings")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"family {name}: a value must be a number")
        family.samples[(sample_name, tuple(labels.items()))] = float(value)
    return family


def merge(sources: Iterable[Sequence[Family]], *, cumulative_only: bool = False) -> list[Family]:
    """One family per name over all ``sources`` (each a snapshot), combined as the module says;
    with ``cumulative_only``, gauges are left out (what is kept of a dead worker)."""
    merged: dict[str, Family] = {}
    for families in sources:
        for family in families:
            if cumulative_only and family.type not in CUMULATIVE:
                continue
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = Family(family.name, family.type, family.help)
            elif into.type != family.type:
                continue  # the same name as another type: not comparable, the first one wins
            combine = _add if family.type in CUMULATIVE else GAUGE_RULES.get(family.name, _add)
            samples = into.samples
            for key, value in family.samples.items():
                old = samples.get(key)
                samples[key] = value if old is None else combine(old, value)
    for family in merged.values():
        family.samples = dict(sorted(family.samples.items(), key=_order(family.name)))
    return list(merged.values())


_SUFFIX_RANK = {"_bucket": 0, "_total": 0, "": 0, "_count": 1, "_sum": 2}


def _order(family: str) -> Callable[[tuple[SampleKey, float]], tuple[Any, ...]]:
    """Samples grouped by their labels (``le`` aside), a histogram's buckets in ``le`` order
    and then its count and sum, as the exposition formats expect them."""

    def key(item: tuple[SampleKey, float]) -> tuple[Any, ...]:
        (name, labels), _ = item
        rest = tuple(pair for pair in labels if pair[0] != "le")
        le = next((v for k, v in labels if k == "le"), None)
        return (rest, _SUFFIX_RANK.get(name[len(family) :], 3), name, _le(le))

    return key


def _le(text: str | None) -> float:
    if text is None:
        return -math.inf
    try:
        return float(text)  # "+Inf" included
    except ValueError:
        return math.inf
