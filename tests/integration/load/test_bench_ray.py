"""``--ray``: client workers as Ray actors on a two-node cluster on loopback (a head and a second
node process, started here). The merged run has the single-process shape and counts; clock
offsets are measured, bounded and shown; a killed actor's requests come back as worker_lost;
a starved actor turns the verdict suspect. Against the scripted server (known delays)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_testkit import local_cluster
from workers_testkit import SCRIPT, TTFT_NS, prompt_file, run, shape_mismatches, starved

from ttft.core.records import RequestRecord
from ttft.load.fleet_setup import WorkerSetup
from ttft.load.runner import CellPlan
from ttft.load.session import SessionHooks
from ttft.load.sink import read_results
from ttft.testing.scripted_server import ScriptedServerProcess
from ttft.testing.sse_script import Script
from ttft.workload.arrival import ClosedLoop, OpenLoop


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    with local_cluster() as address:
        yield address


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServerProcess]:
    with ScriptedServerProcess(Script().merged(SCRIPT)) as process:
        yield process


def _actor_pids() -> list[int]:
    """Processes Ray titled as our actor (``ray::RayWorker`` or ``ray::RayWorker.method``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if title.startswith(b"ray::RayWorker"):
                pids.append(int(entry.name))
    return sorted(pids)


def test_ray_actors_give_the_single_process_summary_on_two_nodes(
    cluster: str, server: ScriptedServerProcess, tmp_path: Path
) -> None:
    arrivals = [ClosedLoop(4), OpenLoop(50.0)]
    single = run(server.base_url, tmp_path, arrivals, 20, None, name="single.jsonl")
    merged = run(server.base_url, tmp_path, arrivals, 20, WorkerSetup(2, cluster), name="ray.jsonl")
    a, b = single.summary.to_dict(), merged.summary.to_dict()
    fleet = b["meta"].pop("client_workers")
    assert any("ray: connected" in note for note in b["meta"].pop("notes"))
    a["meta"].pop("notes")
    assert shape_mismatches(a, b) == []
    for one, two in zip(single.summary.cells, merged.summary.cells, strict=True):
        assert (one.cell, one.n, one.ok) == (two.cell, two.n, two.ok) and two.ok == 20
        # The scripted 20 ms to first token, plus the client's overhead: the lower bound is
        # exact, the upper one generous (actors, driver and server share two cores).
        assert TTFT_NS <= two.metrics["ttft"].stats.p50 < TTFT_NS + 50_000_000
    assert len(read_results(tmp_path / "ray.jsonl").records) == 41
    assert fleet["backend"] == "ray" and fleet["count"] == 2
    assert len({w["node"] for w in fleet["workers"]}) == 2  # one actor per node (SPREAD)
    assert merged.summary.client_health is not None
    # Healthy on a quiet machine; suspect is the honest verdict when another tenant takes a core
    # (the starved-actor test pins that). Invalid would mean the merge lost the workers' checks.
    assert merged.summary.client_health.level != "invalid", merged.summary.client_health.reason


def test_ray_clock_offsets_are_bounded_and_shown_by_the_cli(
    cluster: str, server: ScriptedServerProcess, tmp_path: Path
) -> None:
    out = tmp_path / "cli"
    argv = [
        sys.executable, "-m", "ttft", "bench", "--url", server.base_url, "--model", "scripted",
        "--prompt-file", str(prompt_file(tmp_path)), "--requests", "6", "--concurrency", "2",
        "--ray", cluster, "--workers", "2", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "client workers (ray, 2):" in done.stderr
    assert done.stderr.count("offset ") >= 2 and "+-" in done.stderr
    summary = json.loads((out / "summary.json").read_text())
    for worker in summary["meta"]["client_workers"]["workers"]:
        # Both nodes run on this host: the offset must be zero within the round-trip bound,
        # and the bound that of a local call (well under 50 ms even on 2 busy cores).
        assert abs(worker["clock_offset_ns"]) <= worker["clock_bound_ns"] + 100_000
        assert 0 < worker["clock_bound_ns"] < 50_000_000
        assert worker["same_clock_as_driver"] and worker["applied_offset_ns"] == 0


def test_a_killed_actor_leaves_worker_lost_records_and_a_complete_summary(
    cluster: str, server: ScriptedServerProcess, tmp_path: Path
) -> None:
    state: dict[str, int] = {"warm": 0, "killed": 0}

    def on_record(record: RequestRecord) -> None:
        state["warm"] += record.phase == "warm"
        if state["warm"] == 8 and not state["killed"]:
            state["killed"] = _actor_pids()[-1]
            os.kill(state["killed"], signal.SIGKILL)

    hooks = SessionHooks(on_record=on_record)
    result = run(
        server.base_url, tmp_path, [OpenLoop(30.0)], 45, WorkerSetup(2, cluster), hooks=hooks
    )
    cell = result.summary.cells[0]
    assert cell.n == 45 and cell.errors.get("worker_lost", 0) > 0
    assert cell.ok + cell.errors["worker_lost"] == 45
    assert sorted(r.index for r in read_results(tmp_path / "records.jsonl").records) == list(
        range(46)
    )
    fleet = result.summary.meta["client_workers"]
    [lost] = fleet["lost"]
    assert next(w["pid"] for w in fleet["workers"] if w["name"] == lost) == state["killed"]
    assert cell.client_health is not None and cell.client_health.level != "healthy"


def test_a_starved_actor_makes_the_verdict_suspect(
    cluster: str, server: ScriptedServerProcess, tmp_path: Path
) -> None:
    holder: dict[str, object] = {}

    def on_cell_start(plan: CellPlan) -> None:
        if plan.phase == "warm":
            holder["ctx"] = starved(_actor_pids()[0])
            holder["ctx"].__enter__()  # type: ignore[attr-defined]

    try:
        result = run(
            server.base_url, tmp_path, [OpenLoop(40.0)], 50, WorkerSetup(2, cluster),
            hooks=SessionHooks(on_cell_start=on_cell_start),
        )  # fmt: skip
    finally:
        if "ctx" in holder:
            holder["ctx"].__exit__(None, None, None)  # type: ignore[attr-defined]
    verdict = result.summary.client_health
    assert verdict is not None and verdict.level in ("suspect", "invalid"), verdict
    # The starved worker is among the checks that are not healthy; on a machine that is busy
    # besides, another check (the driver's own lag) may be the worst and lead the reason, and a
    # worker starved of all CPU may miss its deadline altogether: then the cell says it was lost.
    unhealthy = [f"{c.name}: {c.detail}" for c in verdict.checks if c.level != "healthy"]
    named = [d for d in unhealthy if "worker r" in d or "worker_lost" in d]
    assert named or "worker_lost" in verdict.reason, verdict
