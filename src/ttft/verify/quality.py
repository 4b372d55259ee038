"""Compare what two sides generated for the same probes: summaries and a verdict per length.

Pure: the generations come in (from ``collect``), the report goes out; no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ttft.core.stats import Interval, bootstrap_interval, percentile
from ttft.verify.metrics import (
    Thresholds,
    Verdict,
    compared_positions,
    first_divergence,
    mean,
    mean_interval,
    recall_hit,
    top1_agrees,
    topk_kl,
    verdict_for,
)
from ttft.verify.probes import Probe

SCHEMA = "ttft.verify.quality/1"


@dataclass(frozen=True)
class Generation:
    """One side's greedy answer to one probe."""

    tokens: tuple[int, ...]
    text: str
    topk: tuple[Mapping[int, float], ...] | None  # per position; None: no probabilities given
    ttft_ms: float  # client-side, request sent -> first token event


@dataclass(frozen=True)
class LengthSummary:
    length: int
    samples: int
    recall_baseline: float
    recall_candidate: float
    identical_share: float
    first_divergence_mean: float  # positions; an identical continuation counts as N
    mean_kl: float | None
    mean_kl_ci: Interval | None
    max_kl: float | None
    top1: float | None
    top1_ci: Interval | None
    ttft_p50_baseline_ms: float
    ttft_p50_candidate_ms: float
    ttft_p50_baseline_ci: Interval
    ttft_p50_candidate_ci: Interval
    verdict: Verdict
    reasons: list[str]

    @property
    def recall_drop(self) -> float:
        return max(0.0, self.recall_baseline - self.recall_candidate)

    def to_dict(self) -> dict[str, object]:
        return {
            "length": self.length,
            "samples": self.samples,
            "recall_baseline": self.recall_baseline,
            "recall_candidate": self.recall_candidate,
            "identical_share": self.identical_share,
            "first_divergence_mean": self.first_divergence_mean,
            "mean_kl": self.mean_kl,
            "mean_kl_ci": self.mean_kl_ci.to_dict() if self.mean_kl_ci else None,
            "max_kl": self.max_kl,
            "top1_agreement": self.top1,
            "top1_agreement_ci": self.top1_ci.to_dict() if self.top1_ci else None,
            "ttft_p50_baseline_ms": self.ttft_p50_baseline_ms,
            "ttft_p50_candidate_ms": self.ttft_p50_candidate_ms,
            "ttft_p50_baseline_ci": self.ttft_p50_baseline_ci.to_dict(),
            "ttft_p50_candidate_ci": self.ttft_p50_candidate_ci.to_dict(),
            "verdict": self.verdict,
            "reasons": self.reasons,
        }


@dataclass(frozen=True)
class QualityReport:
    baseline: str
    candidate: str
    n_tokens: int
    thresholds: Thresholds
    lengths: list[LengthSummary]
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        """The worst verdict over all lengths: what a CI gate or a tune trial acts on."""
        order: dict[Verdict, int] = {"pass": 0, "degraded": 1, "fail": 2}
        worst: Verdict = "pass"
        for s in self.lengths:
            if order[s.verdict] > order[worst]:
                worst = s.verdict
        return worst

    def trade(self) -> str:
        """One line: the speed gained and how far the quality holds."""
        if not self.lengths:
            return f"{self.candidate}: nothing measured"
        last = self.lengths[-1]
        gain = last.ttft_p50_baseline_ms - last.ttft_p50_candidate_ms
        speed = (
            f"{abs(gain):.0f} ms {'faster' if gain >= 0 else 'slower'} TTFT p50 at {last.length}"
        )
        if last.samples > 1 and last.ttft_p50_baseline_ci.overlaps(last.ttft_p50_candidate_ci):
            # a difference inside both sides' spread is not a speed gain worth a quality risk
            speed = f"no TTFT difference beyond noise at {last.length} ({-gain:+.0f} ms p50)"
        passed = 0
        for s in self.lengths:
            if s.verdict != "pass":
                break
            passed = s.length
        first_bad = next((s for s in self.lengths if s.verdict != "pass"), None)
        if first_bad is None:
            quality = f"quality pass to {_k(passed)}"
        elif passed:
            quality = f"quality pass to {_k(passed)}, {first_bad.verdict} at {_k(first_bad.length)}"
        else:
            quality = f"quality {first_bad.verdict} at {_k(first_bad.length)}"
        return f"{self.candidate}: {speed}, {quality}"

    def to_dict(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "n_tokens": self.n_tokens,
            "thresholds": self.thresholds.to_dict(),
            "verdict": self.verdict,
            "trade": self.trade(),
            "lengths": [s.to_dict() for s in self.lengths],
            "notes": self.notes,
        }


def _k(length: int) -> str:
    return f"{length // 1024}K" if length % 1024 == 0 else str(length)


def compare_sides(
    probes: Sequence[Probe],
    baseline: Sequence[Generation],
    candidate: Sequence[Generation],
    *,
    baseline_label: str,
    candidate_label: str,
    n_tokens: int,
    thresholds: Thresholds | None = None,
) -> QualityReport:
    """Summaries per context length of the candidate's answers against the baseline's."""
    if not len(probes) == len(baseline) == len(candidate):
        raise ValueError("one generation per probe and side")
    t = thresholds or Thresholds()
    lengths = sorted({p.length for p in probes})
    with_probs = all(g.topk is not None for g in (*baseline, *candidate))
    notes: list[str] = []
    if not with_probs:
        notes.append(
            "a side returned no token probabilities: skipped KL divergence and top-1 agreement; "
            "the verdict rests on greedy agreement and recall"
        )
    summaries = []
    for length in lengths:
        rows = [
            (p, b, c)
            for p, b, c in zip(probes, baseline, candidate, strict=True)
            if p.length == length
        ]
        summaries.append(_summarize(length, rows, t, with_probs, n_tokens))
    return QualityReport(baseline_label, candidate_label, n_tokens, t, summaries, notes)


def _ids(g: Generation) -> tuple[int, ...]:
    # An engine that gives neither probabilities nor token ids is compared by characters, so
    # two different answers can never pass as two empty token lists.
    return g.tokens if g.tokens or not g.text else tuple(ord(ch) for ch in g.text)


def _summarize(
    length: int,
    rows: Sequence[tuple[Probe, Generation, Generation]],
    t: Thresholds,
    with_probs: bool,
    n_tokens: int,
) -> LengthSummary:
    n = len(rows)
    recall_b = sum(recall_hit(p.expected, b.text) for p, b, _ in rows) / n
    recall_c = sum(recall_hit(p.expected, c.text) for p, _, c in rows) / n
    cuts = [first_divergence(_ids(b), _ids(c)) for _, b, c in rows]
    identical = sum(cut is None for cut in cuts) / n
    divergence = mean([float(n_tokens if cut is None else cut) for cut in cuts])
    kls: list[float] = []
    top1s: list[float] = []
    max_kl: float | None = None
    if with_probs:
        for _, b, c in rows:
            assert b.topk is not None and c.topk is not None
            k = min(compared_positions(b.tokens, c.tokens), len(b.topk), len(c.topk))
            if k == 0:
                continue
            per = [topk_kl(b.topk[i], c.topk[i]) for i in range(k)]
            kls.append(mean(per))
            top1s.append(sum(top1_agrees(b.topk[i], c.topk[i]) for i in range(k)) / k)
            max_kl = max([*per, max_kl or 0.0])
    mean_kl = mean(kls) if kls else None
    top1 = mean(top1s) if top1s else None
    verdict, reasons = verdict_for(
        t,
        identical_share=identical,
        recall_drop=max(0.0, recall_b - recall_c),
        mean_kl=mean_kl,
        top1=top1,
    )
    base_ttft = sorted(b.ttft_ms for _, b, _ in rows)
    cand_ttft = sorted(c.ttft_ms for _, _, c in rows)
    return LengthSummary(
        length=length,
        samples=n,
        recall_baseline=recall_b,
        recall_candidate=recall_c,
        identical_share=identical,
        first_divergence_mean=divergence,
        mean_kl=mean_kl,
        mean_kl_ci=mean_interval(kls) if kls else None,
        max_kl=max_kl,
        top1=top1,
        top1_ci=mean_interval(top1s) if top1s else None,
        ttft_p50_baseline_ms=percentile(base_ttft, 50),
        ttft_p50_candidate_ms=percentile(cand_ttft, 50),
        ttft_p50_baseline_ci=bootstrap_interval(base_ttft, 50),
        ttft_p50_candidate_ci=bootstrap_interval(cand_ttft, 50),
        verdict=verdict,
        reasons=reasons,
    )
