"""Pure quality metrics: top-k KL, top-1 agreement, greedy divergence, recall, verdicts.

Token-level comparisons are only meaningful while both sides condition on the same prefix: once
the greedy continuations differ, position i on one side follows other tokens than on the other.
So per-position metrics cover the positions up to and including the first divergence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal, TypeVar

from ttft.core.stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    bootstrap_statistic,
)

Verdict = Literal["pass", "degraded", "fail"]
# A token is named by its id where the engine gives ids (llama-server), else by its text (the
# OpenAI logprobs of vLLM and SGLang carry only the text); one comparison uses one kind.
K = TypeVar("K", int, str)

# A probability for "the rest of the vocabulary" never reaches zero in a real softmax; flooring
# keeps KL finite when one side's top-k holds all the mass it reports.
_FLOOR = 1e-9


def topk_kl(p: Mapping[K, float], q: Mapping[K, float]) -> float:
    """KL(P || Q) in nats between two top-k distributions given as token -> log-probability.

    Each side knows only its top k. A token missing from one side gets that side's unreported
    mass, capped at its smallest reported probability (it ranked below all of them); what is
    left is one "rest" bucket, so both distributions sum to one over the same support.
    """
    support = set(p) | set(q)
    pp, qq = _complete(p, support), _complete(q, support)
    return max(0.0, sum(pv * math.log(pv / qq[t]) for t, pv in pp.items() if pv > 0.0))


def _complete(side: Mapping[K, float], support: set[K]) -> dict[K | None, float]:
    known = {t: math.exp(lp) for t, lp in side.items()}
    reported = sum(known.values())
    left = max(0.0, 1.0 - reported)
    missing = [t for t in support if t not in known]
    smallest = min(known.values()) if known else 1.0
    share = min(smallest, left / len(missing)) if missing else 0.0
    out: dict[K | None, float] = {t: max(v, _FLOOR) for t, v in known.items()}
    for t in missing:
        out[t] = max(share, _FLOOR)
    out[None] = max(left - share * len(missing), _FLOOR)  # the unreported rest of the vocabulary
    total = sum(out.values())
    return {t: v / total for t, v in out.items()}


def top1_agrees(p: Mapping[K, float], q: Mapping[K, float]) -> bool:
    """Both sides rank the same token first (ties broken by the lower id, as argmax would)."""
    if not p or not q:
        return False
    return _top1(p) == _top1(q)


def _top1(side: Mapping[K, float]) -> K:
    return min(side, key=lambda t: (-side[t], t))


def first_divergence(a: Sequence[object], b: Sequence[object]) -> int | None:
    """Index of the first token where two greedy continuations differ; None if identical.

    One continuation stopping early (end of text) while the other goes on is a divergence at
    the shorter length.
    """
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compared_positions(a: Sequence[object], b: Sequence[object]) -> int:
    """How many positions share their prefix on both sides (the divergent one included)."""
    cut = first_divergence(a, b)
    return min(len(a), len(b)) if cut is None else min(cut + 1, len(a), len(b))


def recall_hit(expected: str, continuation: str) -> bool:
    """The continuation starts with the planted number, and not with a longer number."""
    text = continuation.lstrip()
    return text.startswith(expected) and not text[len(expected) : len(expected) + 1].isdigit()


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def mean_interval(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Percentile-bootstrap interval of the mean over samples (``core.stats``'s bootstrap)."""
    return bootstrap_statistic(values, mean, resamples=resamples, level=level, seed=seed)


@dataclass(frozen=True)
class Thresholds:
    """Where pass ends and fail begins; printed with every report so a verdict can be argued.

    Defaults are set from measurements on the embedded engine (Gemma 3 270M, 1K-2K tokens):
    f16 against f16 is bitwise equal (KL 0); q8_0 KV moves the mean KL to ~0.003 nats and flips
    a near-tie now and then; q4_0 KV moves it to 0.1-0.3 nats and loses recalled numbers. Top-1
    agreement counts the divergent position itself, so one flip in 16 tokens already reads 94%;
    the identical share is coarse with few probes: both thresholds leave room for that.
    """

    pass_kl: float = 0.01  # mean per-position KL (nats) up to here: pass
    fail_kl: float = 0.05  # above: fail
    pass_top1: float = 0.90  # top-1 agreement over compared positions, at least: pass
    fail_top1: float = 0.75  # below: fail
    pass_identical: float = 0.5  # share of continuations identical over N tokens, at least
    fail_identical: float = 0.2
    pass_recall_drop: float = 0.0  # recall lost against the baseline (share of probes), at most
    fail_recall_drop: float = 0.25

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def describe(self) -> list[str]:
        return [
            f"mean KL (nats): pass <= {self.pass_kl:g}, fail > {self.fail_kl:g}",
            f"top-1 agreement: pass >= {self.pass_top1:.0%}, fail < {self.fail_top1:.0%}",
            f"identical continuations: pass >= {self.pass_identical:.0%}, "
            f"fail < {self.fail_identical:.0%}",
            f"recall lost vs baseline: pass <= {self.pass_recall_drop:.0%}, "
            f"fail > {self.fail_recall_drop:.0%}",
        ]


def verdict_for(
    thresholds: Thresholds,
    *,
    identical_share: float,
    recall_drop: float,
    mean_kl: float | None = None,
    top1: float | None = None,
) -> tuple[Verdict, list[str]]:
    """The verdict of one context length and the reasons for anything short of pass.

    ``mean_kl`` and ``top1`` are None where the engine returned no probabilities; the verdict
    then rests on the checks that need none.
    """
    t = thresholds
    fails: list[str] = []
    degrades: list[str] = []

    def judge(bad: bool, worse: bool, what: str) -> None:
        if worse:
            fails.append(what)
        elif bad:
            degrades.append(what)

    if mean_kl is not None:
        judge(mean_kl > t.pass_kl, mean_kl > t.fail_kl, f"mean KL {mean_kl:.4f}")
    if top1 is not None:
        judge(top1 < t.pass_top1, top1 < t.fail_top1, f"top-1 agreement {top1:.0%}")
    judge(
        identical_share < t.pass_identical,
        identical_share < t.fail_identical,
        f"identical continuations {identical_share:.0%}",
    )
    judge(
        recall_drop > t.pass_recall_drop,
        recall_drop > t.fail_recall_drop,
        f"recall lost {recall_drop:.0%}",
    )
    if fails:
        return "fail", fails + degrades
    if degrades:
        return "degraded", degrades
    return "pass", []
