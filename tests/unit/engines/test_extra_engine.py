"""Adding an engine is one adapter plus one registry entry: a minimal extra kind, registered at run
time, shows up in every place that offers or uses engine kinds, with no other file touched."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from click.testing import CliRunner

from ttft.cli.main import cli
from ttft.core.errors import TtftError
from ttft.core.findings import Finding, Severity
from ttft.core.records import RequestRecord
from ttft.core.target import Target
from ttft.doctor import step_server
from ttft.doctor.context import DoctorContext
from ttft.engines.adapter import EngineAdapter, EngineAdvice, FlagRoles
from ttft.engines.command import EngineCommand
from ttft.engines.flags import parse_flag_table
from ttft.engines.metrics import CommonMetric, MetricSource
from ttft.engines.prometheus import parse_exposition
from ttft.engines.registry import detect_kind, engine_kinds, registered
from ttft.engines.rulekit import EngineLintOptions, finding_at, parse_count
from ttft.gateway.config import from_mapping
from ttft.probe.sampler import Sample
from ttft.workload.requests import WorkItem

MS = 1_000_000


def _rule_batch(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg = cmd.get("max-batch")
    value = parse_count(arg.value) if arg else None
    if value is None or value <= 100:
        return []
    return [
        finding_at(
            cmd, "toyserve/max-batch", Severity.WARNING, "Batch too big", "slow", arg, "lower it"
        )
    ]


TOY = EngineAdapter(
    kind="toyserve",
    display_name="ToyServe",
    metric_prefix="toyserve_",
    sources={CommonMetric.RUNNING: MetricSource("gauge", ("toyserve_running",))},
    flags=parse_flag_table("--max-batch v\n--slots v\n--model -m v"),
    help_command="toyserve --help",
    launchers=(lambda texts, i: 1 if texts[i] == "toyserve" else None,),
    roles=FlagRoles(concurrency_cap="slots", concurrency_cap_default=1),
    rules=(_rule_batch,),
    advice=EngineAdvice(more_slots="ToyServe: `--slots {level}`"),
)


@pytest.fixture
def toy() -> Iterator[EngineAdapter]:
    with registered(TOY) as adapter:
        yield adapter


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.mark.usefixtures("toy")
@pytest.mark.parametrize("command", [["bench"], ["doctor"], ["lint", "engine"], ["lint", "nginx"]])
def test_a_registered_kind_is_an_engine_choice_of_every_command(command: list[str]) -> None:
    code, out = _invoke(*command, "--help")
    assert code == 0
    assert "toyserve" in out


def test_an_unregistered_kind_is_refused_and_the_builtin_kinds_stay() -> None:
    with registered(TOY):
        assert "toyserve" in engine_kinds()
    assert "toyserve" not in engine_kinds()
    assert {"llamacpp", "vllm", "sglang", "tgi"} <= set(engine_kinds())
    code, out = _invoke("bench", "--engine", "toyserve")
    assert code == 2 and "'toyserve' is not one of" in out


@pytest.mark.usefixtures("toy")
def test_lint_engine_recognises_the_launcher_and_runs_own_and_shared_rules() -> None:
    code, out = _invoke(
        "lint", "engine", "--expected-concurrency", "8", "--format", "json", "--",
        "toyserve", "-m", "model.bin", "--max-batch", "500", "--flag-from-the-future", "1",
    )  # fmt: skip
    assert code == 1, out  # warnings fail by default (--fail-on warning)
    rules = {f["rule"] for f in json.loads(out)["findings"]}
    # its own rule, the shared concurrency-cap rule through its roles, the shared flag table rule
    assert rules == {"toyserve/max-batch", "toyserve/concurrency-cap", "engine/unknown-flag"}


@pytest.mark.usefixtures("toy")
def test_metrics_of_the_kind_are_detected() -> None:
    assert detect_kind(parse_exposition("toyserve_running 3\n")) == "toyserve"


class _ScriptedToy(DoctorContext):
    def __init__(self) -> None:
        super().__init__(
            Target("http://toy:9", "m", "http://toy:9/metrics", "toyserve"),
            time.monotonic() + 600,
            levels=[1, 8],
        )

    def text(self, tokens: int, seed: str) -> str:
        return "x " * tokens

    def sample(self, items: Sequence[WorkItem], **options: Any) -> Sample:
        level = int(options.get("concurrency", 1))
        ttft, wait, waiting = (100.0, 0.001, 0.0) if level == 1 else (2000.0, 1.8, 6.0)
        records = [
            RequestRecord(index=0, sent_ns=0, first_content_ns=int(ttft * MS), done_ns=int(ttft))
            for _ in items
        ]
        metrics = {"queue_time_s": {"mean": wait}}
        return Sample(
            records, {"metrics": metrics, "unavailable": {}}, 0, {"requests_waiting": waiting}
        )


def test_doctor_gives_the_kinds_own_advice(toy: EngineAdapter) -> None:
    step = step_server.capacity(_ScriptedToy())
    queueing = [f for f in step.findings if f.rule == "capacity/queueing"]
    assert queueing, step.to_dict()
    assert queueing[0].action == "ToyServe: `--slots 8`"


def test_the_gateway_accepts_a_registered_kind_for_its_upstreams(toy: EngineAdapter) -> None:
    raw = {"model": [{"name": "m", "engine": "toyserve", "upstreams": ["http://127.0.0.1:9"]}]}
    assert from_mapping(raw).models[0].engine == "toyserve"
    code, out = _invoke("gateway", "--help")
    assert code == 0 and "toyserve" in out


def test_the_gateway_refuses_an_unknown_kind_and_reads_the_old_llamacpp_spelling() -> None:
    old = {"model": [{"name": "m", "engine": "llama.cpp", "upstreams": ["http://127.0.0.1:9"]}]}
    assert from_mapping(old).models[0].engine == "llamacpp"
    with pytest.raises(TtftError, match="unknown engine 'toyserve'"):
        from_mapping({"model": [{"name": "m", "engine": "toyserve", "upstreams": ["http://h:9"]}]})
