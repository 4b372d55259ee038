"""Prometheus text exposition: parse a scrape into samples, and take deltas between two scrapes.

The parser is ttft's own although ``prometheus_client`` (a dependency, for the gateway's
/metrics) ships the reference one: bench and doctor scrape every 250 ms during a cell on the
machine that sends the load, and the reference parser takes 3-4x the time on the engines' real
expositions (``python benchmarks/prometheus_parser.py``, which first checks that both read
every sample alike).
"""

from __future__ import annotations

import math
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

from ttft.core.errors import TtftError


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(slots=True)
class Scrape:
    """One read of a /metrics endpoint: samples plus each family's declared type."""

    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)

    def names(self) -> set[str]:
        return {s.name for s in self.samples}

    def total(self, name: str, **match: str) -> float | None:
        """Sum of every sample called ``name`` whose labels include ``match``; None if absent."""
        found = [
            s.value
            for s in self.samples
            if s.name == name and all(dict(s.labels).get(k) == v for k, v in match.items())
        ]
        return math.fsum(found) if found else None

    def buckets(self, name: str) -> list[tuple[float, float]]:
        """Cumulative ``(le, count)`` pairs of histogram ``name`` summed over other labels."""
        acc: dict[float, float] = {}
        for s in self.samples:
            if s.name != f"{name}_bucket":
                continue
            le = dict(s.labels).get("le")
            if le is None:
                continue
            bound = math.inf if le in ("+Inf", "Inf") else float(le)
            acc[bound] = acc.get(bound, 0.0) + s.value
        return sorted(acc.items())


def _parse_labels(text: str, line_no: int) -> tuple[tuple[str, str], ...]:
    labels: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        while i < len(text) and text[i] in " ,":
            i += 1
        if i >= len(text):
            break
        eq = text.index("=", i)
        key = text[i:eq].strip()
        if eq + 1 >= len(text) or text[eq + 1] != '"':
            raise ValueError(f"line {line_no}: label {key!r} value is not quoted")
        j = eq + 2
        value: list[str] = []
        while text[j] != '"':
            if text[j] == "\\":
                j += 1
                value.append({"n": "\n", "\\": "\\", '"': '"'}.get(text[j], text[j]))
            else:
                value.append(text[j])
            j += 1
        labels.append((key, "".join(value)))
        i = j + 1
    return tuple(labels)


def parse_exposition(text: str) -> Scrape:
    """Parse Prometheus text format 0.0.4. Malformed lines raise ValueError naming the line."""
    scrape = Scrape()
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                scrape.types[parts[2]] = parts[3]
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            label_text, _, tail = rest.rpartition("}")
            labels = _parse_labels(label_text, line_no)
        else:
            name, _, tail = line.partition(" ")
            labels = ()
        fields = tail.split()
        if not fields:
            raise ValueError(f"line {line_no}: no value in {raw!r}")
        scrape.samples.append(Sample(name.strip(), labels, float(fields[0])))
    return scrape


def scrape_url(
    url: str, timeout_s: float = 10.0, headers: Mapping[str, str] | None = None
) -> Scrape:
    """GET a metrics endpoint (with the target's auth headers: an engine started with an API key
    may guard /metrics too) and parse it; a clear TtftError when it cannot be read."""
    req = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 501):
            hint = "start llama-server with --metrics"
        elif exc.code in (401, 403):
            hint = "the metrics endpoint wants the API key: pass --api-key"
        else:
            hint = "check the metrics URL and the server's logs"
        raise TtftError(f"metrics endpoint {url} answered HTTP {exc.code}", hint) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise TtftError(f"could not read metrics from {url}: {exc}", "check --metrics-url") from exc
    try:
        return parse_exposition(body)
    except (ValueError, IndexError) as exc:
        raise TtftError(f"{url} is not Prometheus text format: {exc}") from exc
