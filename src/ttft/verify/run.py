"""``verify quality`` end to end: check windows, build the set, run each side, compare.

Sides run one after the other, never at once: on a small machine two engines would share the
cores and each side's TTFT would measure the other's load.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import ControlClient
from ttft.verify.collect import collect, count_tokens, open_side
from ttft.verify.metrics import Thresholds
from ttft.verify.probes import Probe, build_probes
from ttft.verify.quality import Generation, QualityReport, compare_sides
from ttft.verify.sides import SideSpec

Progress = Callable[[str, int, int], None]  # (side label, done, total)


@dataclass(frozen=True)
class QualityOptions:
    lengths: tuple[int, ...] = (1024, 4096)
    samples: int = 4  # probes per length
    n_tokens: int = 16  # greedy tokens compared per probe
    n_probs: int = 10  # top-k reported per position
    parallel: int = 1  # slots on an embedded side: the same on both sides
    threads: int | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)


def embedded_ctx_size(options: QualityOptions) -> int:
    """Enough context per slot for the longest probe and its continuation, in 256s."""
    need = max(options.lengths) + options.n_tokens + 16
    return -(-need // 256) * 256 * options.parallel


def check_windows(sides: Sequence[SideSpec], options: QualityOptions) -> None:
    """Refuse, before any engine starts, a length that does not fit a side's per-slot window."""
    ctx = embedded_ctx_size(options)
    need = max(options.lengths) + options.n_tokens
    for side in sides:
        if side.url is not None:
            window = ControlClient(Target(side.url)).context_limit()
        else:
            window = side.window(ctx, options.parallel)
        if window is not None and need > window:
            fits = max(0, window - options.n_tokens)
            raise TtftError(
                f"context length {max(options.lengths)} (+{options.n_tokens} generated tokens) "
                f"is beyond the per-slot window of {window} tokens of {side.label}",
                f"use --lengths up to {fits}, or give that side more context per slot",
            )


def run_quality(
    baseline: SideSpec,
    candidate: SideSpec,
    options: QualityOptions,
    progress: Progress | None = None,
) -> tuple[QualityReport, list[Probe]]:
    """Measure both sides on one regression set built with the baseline's tokenizer."""
    if not options.lengths or min(options.lengths) < 64:
        raise TtftError("--lengths wants context lengths of at least 64 tokens")
    lengths = tuple(sorted(set(options.lengths)))
    options = QualityOptions(**{**options.__dict__, "lengths": lengths})
    check_windows([baseline, candidate], options)
    ctx = embedded_ctx_size(options)
    probes: list[Probe] = []
    answers: list[list[Generation]] = []
    for side in (baseline, candidate):
        with open_side(
            side, ctx_size=ctx, parallel=options.parallel, threads=options.threads
        ) as end:
            if not probes:
                probes = build_probes(count_tokens(end.base_url), lengths, options.samples)

            def tick(done: int, total: int, label: str = side.label) -> None:
                if progress is not None:
                    progress(label, done, total)

            answers.append(
                collect(
                    end, probes, n_predict=options.n_tokens, n_probs=options.n_probs, progress=tick
                )
            )
    report = compare_sides(
        probes,
        answers[0],
        answers[1],
        baseline_label=baseline.label,
        candidate_label=candidate.label,
        n_tokens=options.n_tokens,
        thresholds=options.thresholds,
    )
    return report, probes
