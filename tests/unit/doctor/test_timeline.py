"""The timeline step's split into queue, prefill, first decode and serialization/transport."""

from __future__ import annotations

from ttft.core.records import RequestRecord
from ttft.doctor.timeline import Part, split
from ttft.engines.prometheus import parse_exposition
from ttft.load.server_metrics import MetricsWatcher

MS = 1_000_000


def _record(ttft_ms: float, timings: dict[str, float] | None = None) -> RequestRecord:
    first = int(ttft_ms * MS)
    return RequestRecord(
        index=0,
        sent_ns=0,
        headers_ns=2 * MS,
        first_event_ns=first,
        first_content_ns=first,
        chunk_ns=[first],
        done_ns=first,
        server_timings=timings,
    )


def _parts(parts: list[Part]) -> dict[str, tuple[float | None, str]]:
    return {p.name: (p.ms, p.source) for p in parts}


def test_llama_server_timings_give_prefill_and_fold_the_queue_into_the_rest() -> None:
    records = [_record(512.0, {"prompt_ms": 500.0, "predicted_per_token_ms": 21.0})] * 3
    client, parts, notes = split(records, None, "llamacpp")
    shown = _parts(parts)
    assert client == 512.0
    assert shown["prefill"] == (500.0, "server timings (timings.prompt_ms)")
    assert shown["queue"][0] is None
    assert shown["first decode"][0] is None and "21.0 ms" in shown["first decode"][1]
    assert shown["queue + serialization + transport"][0] == 12.0
    assert "serialization + transport" not in shown  # never one lump under the wrong name
    assert any("queue cannot be separated" in n for n in notes)
    assert shown["response headers after send"][0] == 2.0


VLLM_BEFORE = """
vllm:request_queue_time_seconds_sum{model_name="m"} 1.0
vllm:request_queue_time_seconds_count{model_name="m"} 10.0
vllm:request_prefill_time_seconds_sum{model_name="m"} 2.0
vllm:request_prefill_time_seconds_count{model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 3.0
vllm:time_to_first_token_seconds_count{model_name="m"} 10.0
"""
VLLM_AFTER = """
vllm:request_queue_time_seconds_sum{model_name="m"} 1.03
vllm:request_queue_time_seconds_count{model_name="m"} 13.0
vllm:request_prefill_time_seconds_sum{model_name="m"} 2.36
vllm:request_prefill_time_seconds_count{model_name="m"} 13.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 3.42
vllm:time_to_first_token_seconds_count{model_name="m"} 13.0
"""


def test_vllm_histograms_give_queue_prefill_and_transport_apart() -> None:
    server = MetricsWatcher(None, "vllm").deltas(
        parse_exposition(VLLM_BEFORE), parse_exposition(VLLM_AFTER)
    )
    _, parts, notes = split([_record(440.0)] * 3, server, "vllm")
    shown = _parts(parts)
    assert shown["queue"][0] is not None and round(shown["queue"][0]) == 10
    assert "vllm:request_queue_time_seconds" in shown["queue"][1]
    assert shown["prefill"][0] is not None and round(shown["prefill"][0]) == 120
    transport = shown["serialization + transport"]
    assert transport[0] is not None and round(transport[0]) == 300  # 440 client - 140 engine
    assert "vllm:time_to_first_token_seconds" in transport[1]
    assert notes == []


def test_an_engine_with_nothing_server_side_says_what_it_cannot_see() -> None:
    _, parts, notes = split([_record(300.0)], None, None)
    shown = _parts(parts)
    assert shown["serialization + transport"][0] is None
    assert shown["prefill"][0] is None
    assert any("cannot be seen" in n for n in notes)
