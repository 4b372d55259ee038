"""``--validate``: send a predicted point's requests to the real engine (ttft's load runner, the
same arrivals as the simulation's replication 0) and put predicted beside measured.

The error is (predicted - measured) / measured per percentile; the measured side carries its own
bootstrap interval, so a reader can tell a model error from a measurement that is itself loose.
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ttft.client.stream import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.stats import Interval, bootstrap_interval, percentile
from ttft.core.target import Target
from ttft.load.runner import CellPlan, Runner
from ttft.load.sender import ClientSender
from ttft.simulate.model import CostModel
from ttft.simulate.whatif import QUANTILES, Prediction
from ttft.workload.arrival import Replay
from ttft.workload.exact_length import text_of_tokens
from ttft.workload.requests import WorkItem, completion_body
from ttft.workload.tokenizer import Tokenizer


@dataclass(frozen=True)
class Comparison:
    quantile: float
    predicted_s: float
    predicted_interval: Interval
    measured_s: float
    measured_interval: Interval
    same_arrivals_s: float | None = None  # replication 0: the very arrivals that were sent

    @property
    def same_arrivals_error(self) -> float | None:
        if self.same_arrivals_s is None:
            return None
        return (self.same_arrivals_s - self.measured_s) / self.measured_s

    @property
    def error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "quantile": self.quantile,
            "predicted_s": self.predicted_s,
            "predicted_interval": self.predicted_interval.to_dict(),
            "measured_s": self.measured_s,
            "measured_interval": self.measured_interval.to_dict(),
            "error": self.error,
            "same_arrivals_s": self.same_arrivals_s,
            "same_arrivals_error": self.same_arrivals_error,
        }


@dataclass
class Validation:
    label: str
    comparisons: list[Comparison]
    measured_ok: int
    measured_failed: int
    records: list[RequestRecord]

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "measured_ok": self.measured_ok,
            "measured_failed": self.measured_failed,
        }


async def _run(
    target: Target, items: Sequence[WorkItem], arrival: Replay, timeout_s: float
) -> list[RequestRecord]:
    anchor = RunAnchor.now()
    records: list[RequestRecord] = []
    async with StreamingClient(
        target.root,
        model=target.model,
        api_key=target.api_key,
        headers=target.headers,
        timeout_s=timeout_s,
    ) as client:
        runner = Runner(ClientSender(client, anchor), anchor, records.append)
        await runner.run_cell(CellPlan("simulate-validate", list(items), arrival))
    return records


def measure(
    target: Target, items: Sequence[WorkItem], arrival: Replay, *, timeout_s: float = 300.0
) -> list[RequestRecord]:
    """Send ``items`` at ``arrival``'s times; every record, failed ones included."""
    return asyncio.run(_run(target, items, arrival, timeout_s))


def measured_ttft_s(record: RequestRecord) -> float | None:
    """TTFT as the simulation predicts it: from the scheduled send to the first content token
    (client-side waiting included, as queueing is)."""
    start = record.scheduled_ns if record.scheduled_ns is not None else record.sent_ns
    if not record.ok or start is None or record.first_content_ns is None:
        return None
    return (record.first_content_ns - start) / 1e9


def compare(label: str, prediction: Prediction, records: Sequence[RequestRecord]) -> Validation:
    values = sorted(v for v in (measured_ttft_s(r) for r in records) if v is not None)
    comparisons = []
    if values:
        for q in QUANTILES:
            est = prediction.ttft_s[q]
            comparisons.append(
                Comparison(
                    q,
                    est.value,
                    est.interval,
                    percentile(values, q),
                    bootstrap_interval(values, q),
                    prediction.first_ttft_s.get(q),
                )
            )
    return Validation(label, comparisons, len(values), len(records) - len(values), list(records))


def speed_now(
    target: Target,
    tokenizer: Tokenizer,
    cost: CostModel,
    *,
    tokens: int = 256,
    count: int = 3,
    batch_tokens: int | None = None,
) -> float | None:
    """How much slower (>1) or faster (<1) the engine computes a prompt now than the calibration
    says: the median of measured over fitted prompt time for ``count`` unique prompts of
    ``tokens`` tokens sent one at a time, after one that is not counted (a freshly started
    engine's first requests run slower: vLLM's first ones after a start took 2-4x their
    time). A shared machine drifts; this tells a model error from a machine that changed
    since the calibration. ``batch_tokens``: the engine's step budget now (a prompt over it
    takes several steps)."""
    from ttft.probe.sampler import sample

    nonce = secrets.token_hex(3)
    items = []
    for i in range(count + 1):
        body = completion_body(text_of_tokens(tokenizer, tokens, f"speed-{nonce}-{i}"), 1)
        items.append(WorkItem(body, "completions", "speed"))
    got = sample(target, items, concurrency=1, label="speed")
    return speed_ratio(got.records[1:], cost, batch_tokens)


def speed_ratio(
    records: Sequence[RequestRecord], cost: CostModel, batch_tokens: int | None = None
) -> float | None:
    """The median of each prompt's measured time over the model's (None without one)."""
    from ttft.simulate.calibrate import prefill_sample

    ratios = []
    for record in records:
        s = prefill_sample(record, batch_tokens or 1 << 30)
        if s is not None:
            fitted = (
                cost.step_base_s * s.steps
                + cost.prefill_token_s * s.prefill
                + cost.attention_s * s.attention_k
                + cost.overhead_s * s.requests  # a client-timed TTFT holds the front end
            )
            if fitted > 0:
                ratios.append(s.seconds / fitted)
    return statistics.median(ratios) if ratios else None
