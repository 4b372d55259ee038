"""Doctor's context is decided in doctor/prepare, and its steps hand each other typed data."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ttft.core.records import RequestRecord
from ttft.core.target import Target
from ttft.core.target_options import TargetOptions
from ttft.doctor import prepare, step_server
from ttft.doctor.context import DoctorContext
from ttft.doctor.handoff import Handoff
from ttft.doctor.prepare import DoctorAsk, DoctorTarget, open_context


def _service(metrics_url: str | None = None) -> TargetOptions:
    return TargetOptions("http://proxy:8000", "m", "key", metrics_url, "llamacpp")


@pytest.fixture
def control(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """/props answers by server root (a missing root answers {}, as an unreachable one does);
    no server has a /tokenize."""
    answers: dict[str, dict[str, Any]] = {}

    class FakeClient:
        def __init__(self, target: Target) -> None:
            self.root = target.root

        def props(self) -> dict[str, Any]:
            return answers.get(self.root, {})

    monkeypatch.setattr(prepare, "ControlClient", FakeClient)
    monkeypatch.setattr(prepare, "server_tokenizer", lambda target: None)
    return answers


def _ask(service: TargetOptions, **fields: Any) -> DoctorAsk:
    return DoctorAsk(service, time.monotonic() + 60, **fields)


def test_behind_a_proxy_metrics_and_props_come_from_the_engine(
    control: dict[str, dict[str, Any]],
) -> None:
    control["http://engine:8080"] = {"total_slots": 2}
    given = _service().target()
    assert given is not None
    ctx = open_context(_ask(_service(), direct_url="http://engine:8080"), DoctorTarget(given))
    assert ctx.target.metrics_url == "http://engine:8080/metrics"
    assert ctx.direct is not None and ctx.direct.api_key == "key"
    assert ctx.props == {"total_slots": 2} and ctx.slots() == 2
    assert not ctx.managed and tuple(ctx.levels) == prepare.DEFAULT_LEVELS


def test_the_users_metrics_url_and_the_proxys_props_win(
    control: dict[str, dict[str, Any]],
) -> None:
    control["http://proxy:8000"] = {"total_slots": 3}
    control["http://engine:8080"] = {"total_slots": 2}
    service = _service("http://proxy:9100/metrics")
    given = service.target()
    assert given is not None
    ctx = open_context(_ask(service, direct_url="http://engine:8080"), DoctorTarget(given))
    assert ctx.target.metrics_url == "http://proxy:9100/metrics"
    assert ctx.slots() == 3


def test_an_engine_doctor_started_gets_the_small_levels_and_the_asked_options(
    control: dict[str, dict[str, Any]],
) -> None:
    served = DoctorTarget(Target("http://127.0.0.1:8081", engine_kind="llamacpp"), None, "x")
    ctx = open_context(_ask(_service(), force_hol=True), served)
    assert ctx.managed and tuple(ctx.levels) == prepare.EMBEDDED_LEVELS and ctx.force_hol
    ctx = open_context(_ask(_service(), levels=(2, 6)), served)
    assert tuple(ctx.levels) == (2, 6) and not ctx.force_hol and ctx.direct is None


def test_the_timeline_reads_the_transport_probes_from_the_handoff() -> None:
    ctx = DoctorContext(Target("http://127.0.0.1:9"), time.monotonic() + 60)
    assert ctx.handoff == Handoff()
    assert step_server.timeline(ctx).status.value == "skipped"
    ctx.handoff.transport_records = [RequestRecord(index=0, sent_ns=0, first_content_ns=10**8)]
    assert step_server.timeline(ctx).status.value != "skipped"


def test_the_engine_kind_read_from_metrics_keeps_the_users_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A target whose kind doctor learns from /metrics still sends the user's --header values
    (they were dropped when the target was rebuilt field by field)."""
    import ttft.load.server_metrics as server_metrics

    class Watcher:
        engine_kind = "vllm"

        def __init__(self, url: str | None, headers: dict[str, str]) -> None:
            pass

        def snapshot(self) -> None:
            pass

    monkeypatch.setattr(server_metrics, "MetricsWatcher", Watcher)
    given = Target("http://svc:8000", "m", "http://svc:8000/metrics", None, "k", {"X-T": "a"})
    found = prepare._with_detected_kind(given)
    assert found.engine_kind == "vllm" and found.headers == {"X-T": "a"} and found.api_key == "k"
