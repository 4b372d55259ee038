"""``tune sweep --predict``: rank a sweep's grid by the simulator, and measure only its top.

Every configuration is first run through the calibrated scheduler model (``ttft.simulate``)
with the same load search a real trial makes (``SearchSettings.run``), on a simulated copy of
the trial's workload: the prompts' lengths in tokens (~1.3 a word, plus the chat template),
the shared system prompt as a shared prefix, the answer's length, the same request counts and
closed-loop warm-up. The grid is ranked on these predicted trials with the sweep's own
``rank``; the ``measure_top`` best are then measured on the real engine and the rest keep
their prediction (``source: predicted``). A prediction is never chosen.

A configuration with a flag the model does not cover (llama.cpp ``-ub``, ``-fa``, ...) or a
value it cannot read cannot be predicted: it is measured, with a note saying why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.core.stats import percentile
from ttft.simulate.engine import SimOutcome
from ttft.simulate.fleet import simulate
from ttft.simulate.model import SGLANG_POLICIES, Calibration, EngineSettings
from ttft.simulate.requests import SimRequest, synthetic
from ttft.simulate.whatif import check_slos
from ttft.tune.runner import rate_requests
from ttft.tune.space import Config, config_id, config_label
from ttft.tune.sweep import SearchSettings, rank
from ttft.tune.trial import OK, PREDICTED, LevelResult, TrialResult
from ttft.tune.workload import TuneWorkload
from ttft.workload.arrival import OpenLoop

TOKENS_PER_WORD = 1.3  # the filler text's rate with common tokenizers (tune/workload.py)
TEMPLATE_TOKENS = 15  # a ChatML-style template around a system and a user message
SYSTEM_HEAD = 5  # the template's tokens before the system text (shared by every request)

# flag -> the EngineSettings field it sets, per engine kind; any other flag is not modelled
MODELLED: dict[str, dict[str, str]] = {
    "llamacpp": {
        "-np": "slots",
        "--parallel": "slots",
        "-b": "batch_tokens",
        "--batch-size": "batch_tokens",
    },
    "vllm": {
        "--max-num-seqs": "slots",
        "--max-num-batched-tokens": "batch_tokens",
        "--num-gpu-blocks-override": "kv_blocks",
        "--enable-chunked-prefill": "chunked_prefill",
        "--enable-prefix-caching": "prefix_cache",
    },
    "sglang": {  # simulate/sglang.py
        "--max-running-requests": "slots",
        "--chunked-prefill-size": "batch_tokens",  # -1: chunked prefill off
        "--max-prefill-tokens": "max_prefill_tokens",
        "--schedule-policy": "schedule_policy",
    },
}
_SWITCHES = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


def load_calibration(path: Path, engine_kind: str) -> Calibration:
    """The calibration ``--predict`` names, refused when missing, unreadable or of another
    engine kind than the sweep's."""
    if not path.exists():
        raise TtftError(
            f"--predict: calibration file not found: {path}",
            "make one with `ttft simulate calibrate --out FILE` (on the engine you sweep)",
        )
    try:
        calibration = Calibration.load(path)
    except TtftError as exc:
        raise TtftError(
            f"--predict: {exc.problem}",
            exc.fix or "give a file written by `ttft simulate calibrate --out FILE`",
        ) from None
    kind = calibration.engine.kind
    if engine_kind not in MODELLED:
        raise TtftError(
            f"--predict: the simulator models llama.cpp, vLLM and SGLang, not {engine_kind}",
            "drop --predict for this engine",
        )
    if kind != engine_kind:
        raise TtftError(
            f"--predict: {path} calibrates a {kind} engine, but this sweep is of {engine_kind}",
            f"calibrate the {engine_kind} engine with `ttft simulate calibrate --out FILE`, "
            f"or sweep --engine {kind}",
        )
    return calibration


def engine_settings(
    calibration: Calibration, kind: str, config: Config, ctx_per_slot: int | None
) -> EngineSettings | str:
    """The simulator's settings for ``config``, or why it cannot be predicted."""
    modelled = MODELLED.get(kind, {})
    changes: dict[str, Any] = {}
    unknown = [flag for flag in config if flag not in modelled]
    if unknown:
        return f"not predicted: the model does not cover {', '.join(unknown)}"
    for flag, value in config.items():
        name = modelled[flag]
        if name in ("chunked_prefill", "prefix_cache"):
            if value.lower() not in _SWITCHES:
                return f"not predicted: {flag} {value!r} is not on or off"
            changes[name] = _SWITCHES[value.lower()]
            continue
        if name == "schedule_policy":
            if value not in SGLANG_POLICIES:
                known = ", ".join(SGLANG_POLICIES)
                return f"not predicted: {flag} {value} (the model knows {known})"
            changes[name] = value
            continue
        if flag == "--chunked-prefill-size" and value.strip() == "-1":
            changes["chunked_prefill"] = False
            continue
        try:
            number = int(value)
        except ValueError:
            return f"not predicted: {flag} {value!r} is not a whole number"
        if number < 1:
            return f"not predicted: {flag} {value} is below 1"
        changes[name] = number
    settings = replace(calibration.engine, **changes)
    if kind == "llamacpp" and ctx_per_slot is not None:
        settings = replace(settings, ctx_per_slot=ctx_per_slot)
    return settings


def workload_note(workload: TuneWorkload) -> str | None:
    """Why a workload cannot be simulated (None: it can)."""
    if workload.shape == "log" or workload.transforms:
        return "a request log or a request transform is not modelled by --predict"
    return None


def sim_requests(
    workload: TuneWorkload, count: int, block_tokens: int, *, warm: int = 0
) -> list[SimRequest]:
    """The trial's requests as the simulator sees them: the system prompt as a prefix shared
    by all (``shared-prefix``; other shapes share nothing) and a unique rest. The first
    ``warm`` are the warm-up round's one-token answers."""
    prefix = round(workload.prefix_words * TOKENS_PER_WORD)
    prompt = prefix + round(workload.suffix_words * TOKENS_PER_WORD) + TEMPLATE_TOKENS
    shared = SYSTEM_HEAD + prefix if workload.shape == "shared-prefix" else 0
    requests = synthetic(
        warm + count,
        prompt_tokens=prompt,
        output_tokens=max(1, workload.max_tokens),
        shared_prefix_tokens=shared,
        block_tokens=block_tokens,
    )
    return [replace(r, output_tokens=1) for r in requests[:warm]] + requests[warm:]


@dataclass
class SimSession:
    """A trial session whose levels are simulated instead of sent (``TrialSession``)."""

    calibration: Calibration
    settings: EngineSettings
    workload: TuneWorkload
    slos: Sequence[Slo]
    launch_command: list[str] = field(default_factory=list)
    startup_s: float | None = None

    def measure(self, concurrency: int) -> LevelResult:
        # as HttpTrialSession.measure: a warm-up round of one-token answers, then the measured
        count = max(self.workload.requests, 2 * concurrency)
        block = self.settings.block_tokens
        requests = sim_requests(self.workload, count, block, warm=concurrency)
        result = simulate(requests, self.calibration.cost, self.settings, concurrency=concurrency)
        outcomes = [o for o in result.outcomes if o.request.index >= concurrency]
        return self._level(concurrency, outcomes, None)

    def measure_rate(
        self, rate: float, *, seconds: float = 10.0, burstiness: float = 1.0
    ) -> LevelResult:
        count = rate_requests(rate, requests=self.workload.requests, seconds=seconds)
        block = self.settings.block_tokens
        # the very schedule the measured level sends (HttpTrialSession.measure_rate): Poisson,
        # or gamma gaps of shape ``burstiness``, drawn from the same seed
        arrival = OpenLoop(
            rate,
            burstiness=burstiness,
            distribution="poisson" if burstiness == 1.0 else "gamma",
        )
        offsets = arrival.schedule_ns(count)
        requests = [
            replace(r, arrival_s=t / 1e9)
            for r, t in zip(sim_requests(self.workload, count, block), offsets, strict=True)
        ]
        result = simulate(requests, self.calibration.cost, self.settings)
        return self._level(0, result.outcomes, rate)

    def _level(
        self, concurrency: int, outcomes: list[SimOutcome], rate: float | None
    ) -> LevelResult:
        ok = [o for o in outcomes if o.ok]
        ttft = sorted((o.ttft_s or 0.0) * 1000 for o in ok)
        e2e = sorted(
            (o.done_s - o.request.arrival_s + o.overhead_s) * 1000
            for o in ok
            if o.done_s is not None
        )
        start = min(o.request.arrival_s for o in outcomes)
        end = max(o.done_s if o.done_s is not None else o.request.arrival_s for o in outcomes)
        span = max(end - start, 1e-9)
        good = [o for o in ok if self._good(o)]
        passed = bool(ok) and all(
            slo.meets(percentile(e2e if slo.metric == "e2e" else ttft, slo.percentile) * 1e6)
            for slo in self.slos
        )
        if rate is not None:
            concurrency = _most_in_flight(outcomes)
        return LevelResult(
            concurrency=concurrency,
            n=len(outcomes),
            ok=len(ok),
            ttft_p50_ms=percentile(ttft, 50) if ttft else None,
            ttft_p95_ms=percentile(ttft, 95) if ttft else None,
            ttft_p99_ms=percentile(ttft, 99) if ttft else None,
            ttft_p50_ci_ms=None,
            ttft_p95_ci_ms=None,
            goodput_per_s=len(good) / span,
            good_fraction=len(good) / len(outcomes) if outcomes else 0.0,
            slo_passed=passed,
            ttft_ms=tuple(ttft),
            rate=rate,
            client_lag_p50_ms=None if rate is None else 0.0,
            client_lag_p99_ms=None if rate is None else 0.0,
        )

    def _good(self, o: SimOutcome) -> bool:
        for slo in self.slos:
            if slo.metric == "e2e":
                value = None if o.done_s is None else o.done_s - o.request.arrival_s
                value = None if value is None else value + o.overhead_s
            else:
                value = o.ttft_s
            if value is None or not slo.meets(value * 1e9):
                return False
        return True


def _most_in_flight(outcomes: Sequence[SimOutcome]) -> int:
    events = sorted(
        [(o.request.arrival_s, 1) for o in outcomes]
        + [(o.done_s, -1) for o in outcomes if o.done_s is not None]
    )
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@dataclass
class Selection:
    """The predicted grid and what to measure: the ``measure_top`` best predictions plus every
    configuration the model cannot predict."""

    ranked: list[TrialResult]  # every predictable configuration's predicted trial, best first
    unpredictable: dict[str, str]  # trial id -> why (these are measured)
    measure: list[dict[str, str]]  # the configurations to run, in the grid's order
    measure_top: int

    def merge(self, measured: Sequence[TrialResult]) -> list[TrialResult]:
        """The measured trials (with the notes of the unpredictable ones) and the predictions
        of every configuration not measured."""
        ran = {r.trial_id for r in measured}
        out: list[TrialResult] = []
        for r in measured:
            note = self.unpredictable.get(r.trial_id)
            out.append(replace(r, note=note) if note and not r.note else r)
        return out + [p for p in self.ranked if p.trial_id not in ran]

    def headline(self, source: str) -> str:
        top = min(self.measure_top, len(self.ranked))
        text = f"predicted: {len(self.ranked)} configurations ranked by {source}; measuring "
        text += f"the best {top}"
        if self.unpredictable:
            text += f" and {len(self.unpredictable)} the model cannot predict"
        return text

    def summary(self) -> dict[str, Any]:
        return {
            "measure_top": self.measure_top,
            "measured": len(self.measure),
            "predicted_only": len([p for p in self.ranked if p.config not in self.measure]),
            "unpredictable": len(self.unpredictable),
            "predicted_order": [config_label(p.config) for p in self.ranked],
        }


def default_measure_top(grid: int) -> int:
    """Half the grid, rounded up."""
    return max(1, -(-grid // 2))


def select(
    configs: Sequence[dict[str, str]],
    calibration: Calibration,
    kind: str,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    search: SearchSettings,
    key: dict[str, object],
    *,
    measure_top: int | None = None,
    ctx_per_slot: int | None = None,
) -> Selection:
    """Predict every configuration of ``configs`` and choose which to measure."""
    if measure_top is not None and measure_top < 1:
        raise TtftError(f"--measure-top must be at least 1, not {measure_top}")
    check_slos(slos)
    top = measure_top if measure_top is not None else default_measure_top(len(configs))
    blocked = workload_note(workload)
    predicted: list[TrialResult] = []
    unpredictable: dict[str, str] = {}
    for config in configs:
        trial_id = config_id(config, key)
        settings = engine_settings(calibration, kind, config, ctx_per_slot)
        if blocked is not None or isinstance(settings, str):
            unpredictable[trial_id] = f"not predicted: {blocked}" if blocked else str(settings)
            continue
        session = SimSession(calibration, settings, workload, slos)
        outcome = search.run(session)
        result = TrialResult(trial_id, dict(config), OK, source=PREDICTED)
        result.levels, result.best, result.saturated = (
            outcome.levels,
            outcome.best,
            outcome.saturated,
        )
        predicted.append(result)
    ranked = rank(predicted)
    chosen = {r.trial_id for r in ranked[:top]} | set(unpredictable)
    measure = [dict(c) for c in configs if config_id(c, key) in chosen]
    return Selection(ranked, unpredictable, measure, top)
