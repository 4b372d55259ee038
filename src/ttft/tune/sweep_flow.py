"""``tune sweep`` decided: the preconditions, the pieces a sweep runs with, and its reports.

The CLI asks ``plan_sweep`` (every refusal happens there, before an engine starts or a
directory is made), runs ``run_sweep`` with its progress display, then ``sweep_reports`` and,
with ``--buckets``, ``run_bucket_axis``. The pieces shared with ``tune ab`` (the workload, the
trial runner, the experiment directory, the summary files) are here too.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.slo import Slo, parse_slos
from ttft.core.target import Target
from ttft.tune.experiment import ExperimentDir
from ttft.tune.options import SweepOptions, TuneOptions
from ttft.tune.predict import Selection, load_calibration, select
from ttft.tune.runner import ClientOnlyRunner, LlamaCppRunner, TrialRunner
from ttft.tune.space import (
    Config,
    Space,
    configurations,
    default_space,
    launch_command,
    parse_space,
)
from ttft.tune.sweep import SearchSettings, chosen, run_sweep, trial_key
from ttft.tune.tables import (
    SWEEP_COLUMNS,
    bucket_rows,
    sweep_cost,
    sweep_json,
    sweep_rows,
    to_csv,
    to_markdown,
)
from ttft.tune.trial import TrialResult
from ttft.tune.workload import TuneWorkload


def tune_workload(options: TuneOptions) -> TuneWorkload:
    if options.shape == "log" and options.request_log is None:
        raise TtftError("--workload log needs --request-log FILE")
    return TuneWorkload(
        shape=options.shape,
        prefix_words=options.prefix_words,
        suffix_words=options.suffix_words,
        max_tokens=options.max_tokens,
        requests=options.requests,
        log_path=options.request_log,
    )


def trial_runner(options: TuneOptions) -> TrialRunner:
    """Trials on the user's service (it restarts itself), or on llama-server or vLLM ttft starts."""
    if isinstance(options, SweepOptions) and options.engine_kind == "vllm" and not options.url:
        from ttft.tune.vllm_runner import VllmRunner

        return VllmRunner(launch=tuple(shlex.split(options.launch or "")))
    if options.url:
        launch = tuple(shlex.split(options.launch or ""))
        return ClientOnlyRunner(Target(options.url), restart=options.restart, launch=launch)
    if options.restart:
        raise TtftError("--restart is for a service ttft does not start: give its --url too")
    return LlamaCppRunner(
        per_slot_ctx=options.per_slot_ctx, threads=options.threads, model_path=options.model_path
    )


def open_experiment(options: TuneOptions, kind: str, spec: dict[str, Any]) -> ExperimentDir:
    out = options.out_dir or Path("results") / time.strftime(f"tune-{kind}-%Y%m%d-%H%M%S")
    if options.resume and options.out_dir is None:
        raise TtftError("--resume needs --out DIR (the experiment to continue)")
    return ExperimentDir.open(out, spec, resume=options.resume)


def write_summary(exp: ExperimentDir, data: dict[str, Any], md: str, csv_text: str) -> None:
    """The experiment's summary in its three forms (the HTML page is rendered from these)."""
    exp.write_report("summary.json", json.dumps(data, indent=2))
    exp.write_report("summary.md", md)
    exp.write_report("summary.csv", csv_text)


def search_settings(options: SweepOptions) -> SearchSettings:
    """The load search the sweep options ask for (closed loop unless --load rate)."""
    if options.load_mode != "rate":
        return SearchSettings(start=options.start_load, max_load=options.max_load)
    start, top = options.start_rate, options.max_rate
    if not 0 < start <= top:
        raise TtftError(
            f"--start-rate {start:g} and --max-rate {top:g} need 0 < start <= max",
            "e.g. --start-rate 0.5 --max-rate 16 (requests/s)",
        )
    if not 0 < options.rate_tolerance < 1:
        raise TtftError(f"--rate-tolerance must be between 0 and 1, not {options.rate_tolerance}")
    positive = (options.level_seconds, options.burstiness, options.max_client_lag_ms)
    if min(positive) <= 0:
        raise TtftError("--level-seconds, --burstiness and --max-client-lag-ms must be above 0")
    return SearchSettings(
        load="rate",
        start_rate=start,
        max_rate=top,
        tolerance=options.rate_tolerance,
        level_s=options.level_seconds,
        burstiness=options.burstiness,
        max_lag_ms=options.max_client_lag_ms,
    )


@dataclass(frozen=True)
class SweepPlan:
    """A sweep that may run: what it runs over and with, and how the experiment is described."""

    kind: str
    space: Space
    configs: list[dict[str, str]]
    slos: tuple[Slo, ...]
    workload: TuneWorkload
    search: SearchSettings
    spec: dict[str, Any]


def sweep_space(options: SweepOptions) -> tuple[Space, list[dict[str, str]]]:
    space = parse_space(options.params) if options.params else default_space(options.engine_kind)
    return space, configurations(space)


def dry_run_commands(options: SweepOptions) -> list[list[str]]:
    """Each configuration's launch command, for ``--dry-run`` (nothing is checked or run)."""
    kind = options.engine_kind
    base = shlex.split(options.launch or ("llama-server" if kind == "llamacpp" else kind))
    return [launch_command(kind, base, config) for config in sweep_space(options)[1]]


def plan_sweep(options: SweepOptions) -> SweepPlan:
    """Refuse a sweep that cannot run (too many configurations, a service it cannot restart,
    an engine ttft cannot start, a gate with nothing to start) before anything starts."""
    kind = options.engine_kind
    space, configs = sweep_space(options)
    limit = options.max_configs or 64
    if len(configs) > limit:
        axes = ", ".join(f"{flag} ({len(values)})" for flag, values in space.items())
        raise TtftError(
            f"{len(configs)} configurations to run ({axes}): each is a trial with a restart, a "
            "warm-up and a load search",
            "choose the axes with --param (e.g. --param -np=1,2,4 --param -ub=128,512), or "
            f"raise --max-configs above {limit}",
        )
    if options.url and not options.restart:
        raise TtftError(
            "a sweep of a service ttft does not start needs --restart 'COMMAND'",
            "e.g. --restart 'ssh gpu1 systemctl restart vllm' or --restart 'docker restart ... "
            "{args}' ({args}: the trial's flags; {launch}: --launch with them set)",
        )
    if kind not in ("llamacpp", "vllm") and not options.url:
        raise TtftError(
            f"ttft starts only llama-server and vLLM itself; {kind} trials need --dry-run here",
            "print the launch commands with --dry-run --launch '...', or measure a running "
            "service with --url (request-side changes only)",
        )
    if options.quality_gate and options.url:
        raise TtftError(
            "--quality-gate starts each configuration itself: it needs a sweep ttft starts",
            "drop --url, or check a running service with ttft verify quality --candidate URL",
        )
    if options.measure_top is not None and options.predict_path is None:
        raise TtftError(
            "--measure-top needs --predict CAL.json (the calibration that ranks the grid)",
            "make one with `ttft simulate calibrate --out cal.json`, or drop --measure-top",
        )
    slos = parse_slos(options.slo_texts) if options.slo_texts else ()
    workload = tune_workload(options)
    search = search_settings(options)
    spec = {"kind": "sweep", "engine": kind, "space": {k: list(v) for k, v in space.items()},
            "slos": [s.text for s in slos], "workload": workload.describe(),
            "search": search.describe()}  # fmt: skip
    if search.load != "concurrency":
        spec["load"] = search.load  # absent: closed loop, as experiments before --load
    return SweepPlan(kind, space, configs, slos, workload, search, spec)


def predict_selection(options: SweepOptions, plan: SweepPlan) -> Selection | None:
    """With ``--predict``: the grid ranked by the simulator and the configurations to measure
    (``ttft.tune.predict``); None without it. Refusals come before any engine starts."""
    if options.predict_path is None:
        return None
    calibration = load_calibration(options.predict_path, plan.kind)
    return select(
        plan.configs,
        calibration,
        plan.kind,
        plan.workload,
        plan.slos,
        plan.search,
        trial_key(plan.workload, plan.slos, plan.search),
        measure_top=options.measure_top,
        ctx_per_slot=None if options.url else options.per_slot_ctx,
    )


def sweep_reports(
    exp: ExperimentDir,
    plan: SweepPlan,
    results: list[TrialResult],
    predict: dict[str, Any] | None = None,
) -> tuple[list[dict[str, str]], TrialResult | None]:
    """Write the summary files; the table's rows and the chosen configuration (None: none
    held the SLOs at any load). ``predict``: what ``--predict`` decided, for summary.json."""
    rows = sweep_rows(results)
    choice = chosen(results)
    write_summary(
        exp,
        sweep_json(results, [s.text for s in plan.slos], choice, plan.search.load, predict),
        to_markdown("tune sweep", SWEEP_COLUMNS, rows) + "\n" + sweep_cost(results).text() + "\n",
        to_csv(SWEEP_COLUMNS, rows),
    )
    return rows, choice


def run_bucket_axis(
    options: SweepOptions,
    plan: SweepPlan,
    exp: ExperimentDir,
    words: list[int],
    on_trial: Callable[[int, Config, TrialResult | None], None],
) -> tuple[list[str], list[dict[str, str]]]:
    """The prompt-length axis: the same configurations on unique prompts of each length in
    ``words``; its table is written as buckets.md and buckets.csv and returned.
    ``on_trial(words, config, result)`` is told of each trial (result None: it starts)."""
    by_bucket: dict[int, list[TrialResult]] = {}
    for n in words:
        bucket = dataclasses.replace(plan.workload, shape="unique", prefix_words=n)

        def told(
            i: int, t: int, c: Config, r: TrialResult | None, resumed: bool, n: int = n
        ) -> None:
            on_trial(n, c, r)

        runner = trial_runner(options)
        by_bucket[n] = run_sweep(plan.configs, runner, exp, bucket, plan.slos, plan.search, told)
    columns, rows = bucket_rows(by_bucket)
    exp.write_report("buckets.md", to_markdown("prompt-length axis", columns, rows))
    exp.write_report("buckets.csv", to_csv(columns, rows))
    return columns, rows
