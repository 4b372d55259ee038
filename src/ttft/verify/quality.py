"""Compare what two sides generated for the same probes: summaries and a verdict per length.

Pure: the generations come in (from ``collect``), the report goes out; no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ttft.core.stats import Interval, bootstrap_interval, percentile
from ttft.verify.metrics import (
    K,
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

    tokens: tuple[int, ...]  # token ids; empty where the engine names none
    text: str
    topk: tuple[Mapping[int, float], ...] | None  # per position; None: no probabilities given
    ttft_ms: float  # client-side, request sent -> first token event
    pieces: tuple[str, ...] = ()  # token texts, where the engine streams them
    topk_pieces: tuple[Mapping[str, float], ...] | None = None  # the top k keyed by token text


@dataclass(frozen=True)
class LengthSummary:
    length: int
    samples: int
    recall_baseline: float | None  # None: no planted number to recall (the user's own prompts)
    recall_candidate: float | None
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
    label: str = ""  # the row's name where it is not a context length ("your prompts")

    @property
    def name(self) -> str:
        return self.label or str(self.length)

    @property
    def recall_drop(self) -> float:
        if self.recall_baseline is None or self.recall_candidate is None:
            return 0.0
        return max(0.0, self.recall_baseline - self.recall_candidate)

    def to_dict(self) -> dict[str, object]:
        return {
            "length": self.length,
            "label": self.name,
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
    prompts: LengthSummary | None = None  # the user's own prompts from a request log
    kv_mib_baseline: float | None = None  # KV cache size the engine reported; None: unknown
    kv_mib_candidate: float | None = None

    @property
    def rows(self) -> list[LengthSummary]:
        return [*self.lengths, *([self.prompts] if self.prompts else [])]

    @property
    def verdict(self) -> Verdict:
        """The worst verdict over all rows: what a CI gate or a tune trial acts on."""
        order: dict[Verdict, int] = {"pass": 0, "degraded": 1, "fail": 2}
        worst: Verdict = "pass"
        for s in self.rows:
            if order[s.verdict] > order[worst]:
                worst = s.verdict
        return worst

    def memory(self) -> str:
        """The memory side of the trade, from the KV sizes the engines reported."""
        b, c = self.kv_mib_baseline, self.kv_mib_candidate
        if b is None or c is None or b <= 0:
            return "KV memory unknown"
        change = (b - c) / b
        if abs(change) < 0.005:
            return f"same KV memory ({c:.1f} MiB)"
        more = "less" if change > 0 else "more"
        return f"{abs(change):.0%} {more} KV memory ({b:.1f} -> {c:.1f} MiB)"

    def trade(self) -> str:
        """One line: the speed and memory gained and how far the quality holds."""
        if not self.rows:
            return f"{self.candidate}: nothing measured"
        last = self.lengths[-1] if self.lengths else self.rows[-1]
        gain = last.ttft_p50_baseline_ms - last.ttft_p50_candidate_ms
        where = f"at {last.length}" if self.lengths else "on your prompts"
        speed = f"{abs(gain):.0f} ms {'faster' if gain >= 0 else 'slower'} TTFT p50 {where}"
        if last.samples > 1 and last.ttft_p50_baseline_ci.overlaps(last.ttft_p50_candidate_ci):
            # a difference inside both sides' spread is not a speed gain worth a quality risk
            speed = f"no TTFT difference beyond noise {where} ({-gain:+.0f} ms p50)"
        parts = [speed, self.memory()]
        if self.lengths:
            parts.append(_quality_reach(self.lengths))
        if self.prompts is not None:
            parts.append(f"your prompts {self.prompts.verdict} ({self.prompts.samples} checked)")
        return f"{self.candidate}: " + ", ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "n_tokens": self.n_tokens,
            "thresholds": self.thresholds.to_dict(),
            "verdict": self.verdict,
            "trade": self.trade(),
            "kv_mib": {"baseline": self.kv_mib_baseline, "candidate": self.kv_mib_candidate},
            "lengths": [s.to_dict() for s in self.lengths],
            "your_prompts": self.prompts.to_dict() if self.prompts else None,
            "notes": self.notes,
        }


def _quality_reach(lengths: Sequence[LengthSummary]) -> str:
    passed = 0
    for s in lengths:
        if s.verdict != "pass":
            break
        passed = s.length
    first_bad = next((s for s in lengths if s.verdict != "pass"), None)
    if first_bad is None:
        return f"quality pass to {_k(passed)}"
    if passed:
        return f"quality pass to {_k(passed)}, {first_bad.verdict} at {_k(first_bad.length)}"
    return f"quality {first_bad.verdict} at {_k(first_bad.length)}"


def _k(length: int) -> str:
    return f"{length // 1024}K" if length % 1024 == 0 else str(length)


Pair = tuple[Generation, Generation]  # (baseline, candidate) answers to one prompt


def compare_sides(
    probes: Sequence[Probe],
    baseline: Sequence[Generation],
    candidate: Sequence[Generation],
    *,
    baseline_label: str,
    candidate_label: str,
    n_tokens: int,
    thresholds: Thresholds | None = None,
    logged: Sequence[Pair] = (),
) -> QualityReport:
    """Summaries per context length of the candidate's answers against the baseline's, and
    one more over ``logged`` (the user's own prompts, which plant no number to recall)."""
    if not len(probes) == len(baseline) == len(candidate):
        raise ValueError("one generation per probe and side")
    t = thresholds or Thresholds()
    pairs = [*zip(baseline, candidate, strict=True), *logged]
    with_probs = all(_positions(b, c) is not None for b, c in pairs)
    notes: list[str] = []
    if not with_probs:
        notes.append(
            "a side returned no token probabilities: skipped KL divergence and top-1 agreement; "
            "the verdict rests on greedy agreement and recall"
        )
    summaries = []
    Row = tuple[str | None, Generation, Generation]
    for length in sorted({p.length for p in probes}):
        rows: list[Row] = [
            (p.expected, b, c)
            for p, b, c in zip(probes, baseline, candidate, strict=True)
            if p.length == length
        ]
        summaries.append(_summarize(length, rows, t, with_probs, n_tokens))
    mine = None
    if logged:
        mine = _summarize(
            0, [(None, b, c) for b, c in logged], t, with_probs, n_tokens, label="your prompts"
        )
    return QualityReport(
        baseline_label, candidate_label, n_tokens, t, summaries, notes, prompts=mine
    )


def _sequences(b: Generation, c: Generation) -> tuple[Sequence[object], Sequence[object]]:
    """Both answers in one kind of token: ids, else texts, else characters. An engine that
    gives neither ids nor probabilities is compared by characters, so two different answers
    can never pass as two empty token lists."""
    if b.tokens and c.tokens:
        return b.tokens, c.tokens
    if b.pieces and c.pieces:
        return b.pieces, c.pieces
    return tuple(b.text), tuple(c.text)


def _positions(b: Generation, c: Generation) -> list[tuple[float, bool]] | None:
    """Per compared position, (KL, top-1 agrees); None where the two share no top-k kind."""
    if b.tokens and c.tokens and b.topk is not None and c.topk is not None:
        return _per_position(b.tokens, c.tokens, b.topk, c.topk)
    if b.pieces and c.pieces and b.topk_pieces is not None and c.topk_pieces is not None:
        return _per_position(b.pieces, c.pieces, b.topk_pieces, c.topk_pieces)
    return None


def _per_position(
    a: Sequence[K], b: Sequence[K], pa: Sequence[Mapping[K, float]], pb: Sequence[Mapping[K, float]]
) -> list[tuple[float, bool]]:
    k = min(compared_positions(a, b), len(pa), len(pb))
    return [(topk_kl(pa[i], pb[i]), top1_agrees(pa[i], pb[i])) for i in range(k)]


def _summarize(
    length: int,
    rows: Sequence[tuple[str | None, Generation, Generation]],
    t: Thresholds,
    with_probs: bool,
    n_tokens: int,
    label: str = "",
) -> LengthSummary:
    n = len(rows)
    planted = [(e, b, c) for e, b, c in rows if e is not None]
    recall_b = sum(recall_hit(e, b.text) for e, b, _ in planted) / len(planted) if planted else None
    recall_c = sum(recall_hit(e, c.text) for e, _, c in planted) / len(planted) if planted else None
    cuts = [first_divergence(*_sequences(b, c)) for _, b, c in rows]
    identical = sum(cut is None for cut in cuts) / n
    divergence = mean([float(n_tokens if cut is None else cut) for cut in cuts])
    kls: list[float] = []
    top1s: list[float] = []
    max_kl: float | None = None
    if with_probs:
        for _, b, c in rows:
            per = _positions(b, c) or []
            if not per:
                continue
            kls.append(mean([kl for kl, _ in per]))
            top1s.append(sum(agree for _, agree in per) / len(per))
            max_kl = max([*(kl for kl, _ in per), max_kl or 0.0])
    mean_kl = mean(kls) if kls else None
    top1 = mean(top1s) if top1s else None
    drop = max(0.0, recall_b - recall_c) if recall_b is not None and recall_c is not None else 0.0
    verdict, reasons = verdict_for(
        t, identical_share=identical, recall_drop=drop, mean_kl=mean_kl, top1=top1
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
        label=label,
    )
