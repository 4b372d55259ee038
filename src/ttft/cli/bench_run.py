"""The ``ttft bench`` flow: resolve the target, run the session with a progress bar, report."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ttft.cli.bench_setup import (
    PROFILES,
    embedded_ctx_size,
    make_tokenizer,
    parse_header,
    parse_int_list,
    parse_shared_prefix,
)
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.core.slo import parse_slos
from ttft.core.target import Target
from ttft.engines.control import ControlClient
from ttft.load.plan import WorkloadSpec
from ttft.load.runner import CellPlan
from ttft.load.session import SessionHooks, SessionResult, run_session
from ttft.workload.arrival import Arrival, ClosedLoop, OpenLoop, parse_rate

EMBEDDED_SLOTS = 4


def _spec(opts: dict[str, Any], profile_name: str) -> WorkloadSpec:
    profile = PROFILES[profile_name]
    buckets = parse_int_list(opts["buckets"], "--buckets") if opts["buckets"] else profile.buckets
    arrivals: list[Arrival] = [
        OpenLoop(
            parse_rate(r),
            burstiness=opts["burstiness"],
            distribution="poisson" if opts["burstiness"] == 1.0 else "gamma",
        )
        for r in opts["rates"]
    ]
    if opts["concurrency"] or not arrivals:
        levels = (
            parse_int_list(opts["concurrency"], "--concurrency")
            if opts["concurrency"]
            else profile.concurrency
        )
        closed: list[Arrival] = [ClosedLoop(c) for c in levels]
        arrivals = closed + arrivals
    for path_opt in ("prompt_file", "sharegpt"):
        if opts[path_opt] is not None and not Path(opts[path_opt]).is_file():
            raise TtftError(f"file not found: {opts[path_opt]}", "check the path")
    if (
        sum(x is not None for x in (opts["prompt_file"], opts["sharegpt"], opts["shared_prefix"]))
        > 1
    ):
        raise TtftError("choose one of --prompt-file, --sharegpt and --shared-prefix")
    if opts["max_tokens"] < 1:
        raise TtftError("--max-tokens must be at least 1")
    return WorkloadSpec(
        buckets=buckets,
        requests=opts["n_requests"] if opts["n_requests"] is not None else profile.requests,
        max_tokens=opts["max_tokens"],
        api=opts["api"],
        shared_prefix=parse_shared_prefix(opts["shared_prefix"]) if opts["shared_prefix"] else None,
        prompt_file=opts["prompt_file"],
        sharegpt_file=opts["sharegpt"],
        warmup=max(0, opts["warmup"]),
        seed=opts["seed"],
        arrivals=arrivals,
        max_in_flight=opts["max_in_flight"],
    )


@contextlib.contextmanager
def _target(
    opts: dict[str, Any], spec: WorkloadSpec, console: Console
) -> Iterator[tuple[Target, bool]]:
    """The user's server, or the embedded engine sized for the workload (stopped afterwards)."""
    headers = dict(parse_header(h) for h in opts["headers"])
    if opts["url"]:
        target = Target(
            opts["url"],
            opts["model"],
            opts["metrics_url"],
            opts["engine_kind"],
            opts["api_key"],
            headers,
        )
        if target.metrics_url is None:
            target = Target(
                target.base_url,
                target.model,
                target.root + "/metrics",
                target.engine_kind,
                target.api_key,
                headers,
            )
        if target.model is None:
            target = Target(
                target.base_url,
                ControlClient(target).model_id(),
                target.metrics_url,
                target.engine_kind,
                target.api_key,
                headers,
            )
        yield target, False
        return
    from ttft.engines.llamacpp.embedded import launch_embedded

    longest = max(spec.buckets) if spec.shared_prefix is None else sum(spec.shared_prefix)
    ctx = embedded_ctx_size(longest, spec.max_tokens, EMBEDDED_SLOTS)
    console.print(
        f"[dim]starting the embedded engine (llama-server, Gemma 3 270M, "
        f"{EMBEDDED_SLOTS} slots, context {ctx}) ...[/dim]"
    )
    with launch_embedded(ctx_size=ctx, parallel=EMBEDDED_SLOTS) as engine:
        console.print(f"[dim]ready in {engine.startup_s:.2f} s at {engine.base_url}[/dim]")
        yield (
            Target(
                engine.base_url, engine.model_name, engine.metrics_url, "llamacpp", None, headers
            ),
            True,
        )


def _cold_mode(opts: dict[str, Any], spec: WorkloadSpec, console: Console, out_dir: Path) -> None:
    """Restart the engine before each sample; report only first requests and start-up times."""
    from ttft.core.summary import summarize_run
    from ttft.engines.llamacpp.embedded import launch_embedded
    from ttft.load.cold import ColdSample, measure_cold_starts
    from ttft.load.sink import RESULTS_SCHEMA, JsonlSink

    if opts["url"]:
        raise TtftError(
            "--cold restarts the engine between samples, so it needs an engine ttft manages",
            "drop --url to use the embedded engine (or restart your server yourself and run "
            "bench with --requests 1)",
        )
    samples, tokens = opts["cold_samples"], min(spec.buckets)
    if samples < 1:
        raise TtftError("--cold needs at least 1 sample")
    ctx = embedded_ctx_size(tokens, 1, EMBEDDED_SLOTS)

    def launch() -> Any:
        return launch_embedded(ctx_size=ctx, parallel=EMBEDDED_SLOTS)

    with Progress(
        TextColumn("cold starts"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("cold", total=samples)

        def on_sample(sample: ColdSample) -> None:
            progress.advance(task)

        with JsonlSink(out_dir / "records.jsonl") as sink:
            sink.write(
                {"type": "run", "schema": RESULTS_SCHEMA, "mode": "cold", "prompt_tokens": tokens}
            )
            done = measure_cold_starts(launch, samples, tokens, sink, on_sample=on_sample)
            sink.write({"type": "end"})
    startups = sorted(s.startup_s for s in done)
    slos = parse_slos(opts["slo_texts"]) if opts["slo_texts"] else ()
    records = [s.record for s in done]
    # Throughput over restarts means nothing: the window is the requests' own time.
    busy = sum((r.done_ns or 0) - (r.sent_ns or 0) for r in records if r.sent_ns is not None)
    summary = summarize_run(
        records,
        duration_ns=busy or None,
        slos=slos,
        meta={"mode": "cold", "startup_s": startups, "prompt_tokens": tokens},
    )
    console.print(
        f"engine start-up to healthy: median {startups[len(startups) // 2]:.2f} s "
        f"(min {startups[0]:.2f}, max {startups[-1]:.2f})"
    )
    _write_report(summary, [], out_dir, console)
    if slos and not summary.slos_passed:
        raise click.exceptions.Exit(1)


def _check_context(target: Target, spec: WorkloadSpec) -> None:
    """Refuse up front a bucket the server cannot take, instead of hundreds of HTTP 400s."""

    if spec.prompt_file is not None or spec.sharegpt_file is not None:
        return
    longest = sum(spec.shared_prefix) if spec.shared_prefix else max(spec.buckets)
    limit = ControlClient(target).context_limit()
    if limit is not None and longest + spec.max_tokens > limit:
        raise TtftError(
            f"prompts of {longest} tokens plus {spec.max_tokens} output tokens exceed the "
            f"server's context of {limit} tokens per request",
            "choose smaller --buckets, or give the server more context (llama-server: -c is "
            "shared by the -np slots; vLLM: --max-model-len)",
        )


def execute(opts: dict[str, Any]) -> None:
    console = Console(stderr=True)
    if opts["cold_samples"] is not None:
        profile = opts["profile"] or "quick"
        out = opts["out_dir"] or Path("results") / time.strftime("bench-cold-%Y%m%d-%H%M%S")
        out.mkdir(parents=True, exist_ok=True)
        _cold_mode(opts, _spec(opts, profile), console, out)
        return
    profile = opts["profile"] or ("article" if opts["url"] else "quick")
    spec = _spec(opts, profile)
    slos = parse_slos(opts["slo_texts"]) if opts["slo_texts"] else ()
    out_dir: Path = opts["out_dir"] or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    records_path = out_dir / "records.jsonl"
    levels = ", ".join(a.label() for a in spec.arrivals)
    shape = (
        f"prefix {spec.shared_prefix[0]}+{spec.shared_prefix[1]} tokens"
        if spec.shared_prefix
        else "prompts from file"
        if spec.prompt_file or spec.sharegpt_file
        else "/".join(str(b) for b in spec.buckets) + " tokens"
    )
    console.print(
        f"[bold]ttft bench[/bold] ({profile} defaults): {shape} x {levels}, "
        f"{spec.requests} requests per cell; records -> {records_path}"
    )
    with _target(opts, spec, console) as (target, fresh):
        _check_context(target, spec)
        uses_files = opts["prompt_file"] is not None or opts["sharegpt"] is not None
        tokenizer = None if uses_files else make_tokenizer(opts["tokenizer_path"], target)
        result = _run_with_progress(
            target, spec, tokenizer, records_path, fresh, slos, opts, console
        )
    _report(result, out_dir, console)
    if slos and not all(cell.slos_passed for cell in result.summary.cells):
        raise click.exceptions.Exit(1)


def _run_with_progress(
    target: Target,
    spec: WorkloadSpec,
    tokenizer: Any,
    path: Path,
    fresh: bool,
    slos: Any,
    opts: dict[str, Any],
    console: Console,
) -> SessionResult:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        build = progress.add_task("building prompts", total=None, status="")
        cell_task: dict[str, Any] = {"id": None, "ok": 0, "failed": 0}

        def on_build(done: int, total: int) -> None:
            progress.update(build, completed=done, total=total)

        def on_cell_start(plan: CellPlan) -> None:
            if cell_task["id"] is not None:
                progress.update(cell_task["id"], visible=plan.phase == "warm")
            name = plan.cell if plan.phase == "warm" else f"{plan.cell} ({plan.phase})"
            cell_task.update(ok=0, failed=0)
            cell_task["id"] = progress.add_task(name, total=len(plan.items), status="")

        def on_record(record: RequestRecord) -> None:
            key = "ok" if record.error is None else "failed"
            cell_task[key] += 1
            status = f"{cell_task['ok']} ok" + (
                f", [red]{cell_task['failed']} failed[/red]" if cell_task["failed"] else ""
            )
            progress.update(cell_task["id"], advance=1, status=status)

        hooks = SessionHooks(on_build=on_build, on_cell_start=on_cell_start, on_record=on_record)
        return run_session(
            target,
            spec,
            tokenizer,
            path,
            fresh_server=fresh,
            slos=slos,
            hooks=hooks,
            timeout_s=opts["timeout_s"],
            run_meta={"profile": opts["profile"] or ("article" if opts["url"] else "quick")},
        )


def _report(result: SessionResult, out_dir: Path, console: Console) -> None:
    _write_report(result.summary, result.notes, out_dir, console)


def _write_report(summary: Any, notes: list[str], out_dir: Path, console: Console) -> None:
    from ttft.report.csv import summary_to_csv
    from ttft.report.markdown import summary_to_markdown
    from ttft.report.terminal import print_summary

    print_summary(summary, Console())
    (out_dir / "summary.json").write_text(json.dumps(summary.to_dict(), indent=2))
    (out_dir / "summary.csv").write_text(summary_to_csv(summary))
    (out_dir / "summary.md").write_text(summary_to_markdown(summary))
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"results: {out_dir}/ (records.jsonl, summary.json, summary.csv, summary.md)")
