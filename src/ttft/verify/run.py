"""``verify quality`` end to end: check windows, build the set, run each side, compare.

Sides run one after the other, never at once: on a small machine two engines would share the
cores and each side's TTFT would measure the other's load.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import ControlClient
from ttft.verify.collect import collect, collect_logged, count_chat, count_tokens, open_side
from ttft.verify.logged import Fitted, fit_window, load_logged
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
    requests_log: Path | None = None  # the user's own prompts (JSONL of chat bodies)
    max_prompts: int = 50  # the first N of the log


def embedded_ctx_size(options: QualityOptions) -> int:
    """Enough context per slot for the longest probe and its continuation, in 256s."""
    need = max(options.lengths) + options.n_tokens + 16
    return -(-need // 256) * 256 * options.parallel


def check_windows(sides: Sequence[SideSpec], options: QualityOptions) -> None:
    """Refuse, before any engine starts, a length that does not fit a side's per-slot window."""
    need = max(options.lengths) + options.n_tokens
    for side in sides:
        window = side_window(side, options)
        if window is not None and need > window:
            fits = max(0, window - options.n_tokens)
            raise TtftError(
                f"context length {max(options.lengths)} (+{options.n_tokens} generated tokens) "
                f"is beyond the per-slot window of {window} tokens of {side.label}",
                f"use --lengths up to {fits}, or give that side more context per slot",
            )


def side_window(side: SideSpec, options: QualityOptions) -> int | None:
    """Tokens per slot a side will have: an embedded side's c/np, a URL side's own report."""
    if side.url is not None:
        return ControlClient(Target(side.url)).context_limit()
    return side.window(embedded_ctx_size(options), options.parallel)


def _estimate(text: str) -> int:
    return max(1, round(len(text.split()) * 1.3))


def run_quality(
    baseline: SideSpec,
    candidate: SideSpec,
    options: QualityOptions,
    progress: Progress | None = None,
) -> tuple[QualityReport, list[Probe]]:
    """Measure both sides on one regression set built with the baseline's tokenizer, and on
    the user's own prompts when a request log is given."""
    if not options.lengths or min(options.lengths) < 64:
        raise TtftError("--lengths wants context lengths of at least 64 tokens")
    lengths = tuple(sorted(set(options.lengths)))
    options = replace(options, lengths=lengths)
    logged = load_logged(options.requests_log, options.max_prompts) if options.requests_log else []
    check_windows([baseline, candidate], options)
    known = [w for w in (side_window(s, options) for s in (baseline, candidate)) if w]
    window = min(known) if known else None
    ctx = embedded_ctx_size(options)
    notes: list[str] = []
    probes: list[Probe] = []
    fitted: Fitted | None = None
    answers: list[list[Generation]] = []
    mine: list[list[Generation | None]] = []
    kv: list[float | None] = []
    for side in (baseline, candidate):
        with open_side(
            side, ctx_size=ctx, parallel=options.parallel, threads=options.threads
        ) as end:
            if not probes:
                counter = count_tokens(end)
                if counter is None:
                    notes.append(
                        f"{side.label} offers no tokenizer endpoint: probe lengths are "
                        "estimated (1.3 tokens per word), not counted"
                    )
                probes = build_probes(counter or _estimate, lengths, options.samples)
            if logged and fitted is None:
                fitted = fit_window(logged, count_chat(end), window, options.n_tokens)

            def tick(done: int, total: int, label: str = side.label) -> None:
                if progress is not None:
                    progress(label, done, total)

            def tick_mine(done: int, total: int, label: str = side.label) -> None:
                if progress is not None:
                    progress(f"{label}, your prompts", done, total)

            answers.append(
                collect(
                    end, probes, n_predict=options.n_tokens, n_probs=options.n_probs, progress=tick
                )
            )
            if fitted is not None and fitted.kept:
                mine.append(
                    collect_logged(
                        end,
                        fitted.kept,
                        n_predict=options.n_tokens,
                        n_probs=options.n_probs,
                        progress=tick_mine,
                    )
                )
            kv.append(end.kv_mib)
            if end.kv_mib is None:
                notes.append(
                    f"KV memory of {side.label} unknown: the engine does not report it (ttft "
                    "reads it from the start-up log of an engine it starts)"
                )
    pairs = [(b, c) for b, c in zip(*mine, strict=True) if b is not None and c is not None]
    if fitted is not None:
        notes.extend(_logged_notes(fitted, len(logged), len(pairs), window, options.n_tokens))
    report = compare_sides(
        probes,
        answers[0],
        answers[1],
        baseline_label=baseline.label,
        candidate_label=candidate.label,
        n_tokens=options.n_tokens,
        thresholds=options.thresholds,
        logged=pairs,
    )
    report = replace(
        report, notes=report.notes + notes, kv_mib_baseline=kv[0], kv_mib_candidate=kv[1]
    )
    return report, probes


def _logged_notes(
    fitted: Fitted, total: int, compared: int, window: int | None, n_tokens: int
) -> list[str]:
    notes = []
    if fitted.too_long:
        notes.append(
            f"{len(fitted.too_long)} of {total} logged prompts are longer than the window "
            f"({window} tokens less {n_tokens} generated): skipped"
        )
    refused = len(fitted.kept) - compared
    if refused:
        notes.append(f"{refused} of {total} logged prompts were refused by a side (HTTP 4xx)")
    if not compared:
        notes.append("no logged prompt could be compared: no 'your prompts' row")
    return notes
