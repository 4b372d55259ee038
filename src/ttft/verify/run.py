"""``verify quality`` end to end: check windows, build the set, run each side, compare.

Sides run one after the other, never at once: on a small machine two engines would share the
cores and each side's TTFT would measure the other's load.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ttft.core.errors import TtftError
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


def parse_lengths(value: str) -> tuple[int, ...]:
    """``--lengths``: context lengths in tokens, comma-separated, ``k`` for 1024."""
    try:
        out = tuple(
            int(v.strip().lower().replace("k", "")) * (1024 if "k" in v.lower() else 1)
            for v in value.split(",")
            if v.strip()
        )
    except ValueError:
        raise TtftError(
            f"cannot read --lengths {value!r}", "give e.g. 1024,4096 or 1k,4k"
        ) from None
    if not out:
        raise TtftError("--lengths is empty", "give e.g. 1024,4096")
    return out


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
        return ControlClient(side.target()).context_limit()
    return side.window(embedded_ctx_size(options), options.parallel)


def _estimate(text: str) -> int:
    return max(1, round(len(text.split()) * 1.3))


@dataclass
class SideRun:
    """One side's answers to the regression set; a baseline's are kept to compare with more
    than one candidate (a tune sweep's gate measures its baseline once)."""

    side: SideSpec
    probes: list[Probe]
    answers: list[Generation]
    logged: list[Generation | None]
    fitted: Fitted | None
    kv_mib: float | None
    notes: list[str]


class QualityCheck:
    """A baseline, measured on first use, against any number of candidates."""

    def __init__(
        self, baseline: SideSpec, options: QualityOptions, progress: Progress | None = None
    ) -> None:
        if not options.lengths or min(options.lengths) < 64:
            raise TtftError("--lengths wants context lengths of at least 64 tokens")
        self.options = replace(options, lengths=tuple(sorted(set(options.lengths))))
        self.baseline = baseline
        self.progress = progress
        path = self.options.requests_log
        self.logged = load_logged(path, self.options.max_prompts) if path else []
        self.base: SideRun | None = None

    def against(self, candidate: SideSpec) -> QualityReport:
        """Refuse a length beyond either window before any engine starts, then measure."""
        options = self.options
        sides = [self.baseline, candidate]
        check_windows(sides, options)
        known = [w for w in (side_window(s, options) for s in sides) if w]
        window = min(known) if known else None
        if self.base is None:
            self.base = self._measure(self.baseline, None, window)
        cand = self._measure(candidate, self.base, window)
        return self._compare(self.base, cand, window)

    def _measure(self, side: SideSpec, ref: SideRun | None, window: int | None) -> SideRun:
        options = self.options
        notes: list[str] = []
        probes = ref.probes if ref is not None else []
        fitted = ref.fitted if ref is not None else None
        with open_side(
            side,
            ctx_size=embedded_ctx_size(options),
            parallel=options.parallel,
            threads=options.threads,
        ) as end:
            if ref is None:
                counter = count_tokens(end)
                if counter is None:
                    notes.append(
                        f"{side.label} offers no tokenizer endpoint: probe lengths are "
                        "estimated (1.3 tokens per word), not counted"
                    )
                probes = build_probes(counter or _estimate, options.lengths, options.samples)
                if self.logged:
                    fitted = fit_window(self.logged, count_chat(end), window, options.n_tokens)

            def tick(done: int, total: int, label: str = side.label) -> None:
                if self.progress is not None:
                    self.progress(label, done, total)

            def tick_mine(done: int, total: int, label: str = side.label) -> None:
                if self.progress is not None:
                    self.progress(f"{label}, your prompts", done, total)

            n, k = options.n_tokens, options.n_probs
            answers = collect(end, probes, n_predict=n, n_probs=k, progress=tick)
            mine: list[Generation | None] = []
            if fitted is not None and fitted.kept:
                mine = collect_logged(end, fitted.kept, n_predict=n, n_probs=k, progress=tick_mine)
            if end.kv_mib is None:
                notes.append(
                    f"KV memory of {side.label} unknown: the engine does not report it (ttft "
                    "reads it from the start-up log of an engine it starts)"
                )
        return SideRun(side, probes, answers, mine, fitted, end.kv_mib, notes)

    def _compare(self, base: SideRun, cand: SideRun, window: int | None) -> QualityReport:
        options = self.options
        pairs = [
            (b, c)
            for b, c in zip(base.logged, cand.logged, strict=True)
            if b is not None and c is not None
        ]
        notes = [*base.notes, *cand.notes]
        if base.fitted is not None:
            total = len(self.logged)
            notes.extend(_logged_notes(base.fitted, total, len(pairs), window, options.n_tokens))
        report = compare_sides(
            base.probes,
            base.answers,
            cand.answers,
            baseline_label=base.side.label,
            candidate_label=cand.side.label,
            n_tokens=options.n_tokens,
            thresholds=options.thresholds,
            logged=pairs,
        )
        return replace(
            report,
            notes=report.notes + notes,
            kv_mib_baseline=base.kv_mib,
            kv_mib_candidate=cand.kv_mib,
        )


def run_quality(
    baseline: SideSpec,
    candidate: SideSpec,
    options: QualityOptions,
    progress: Progress | None = None,
) -> tuple[QualityReport, list[Probe]]:
    """Measure both sides on one regression set built with the baseline's tokenizer, and on
    the user's own prompts when a request log is given."""
    check = QualityCheck(baseline, options, progress)
    report = check.against(candidate)
    assert check.base is not None
    return report, check.base.probes


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
