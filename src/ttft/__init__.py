"""ttft: find where time-to-first-token goes, and remove the part outside the weights.

The public API below is loaded lazily, so ``import ttft`` stays cheap; a test pins this list.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC: dict[str, str] = {
    # core: records, statistics, SLOs
    "RequestRecord": "ttft.core.records",
    "RunAnchor": "ttft.core.records",
    "ErrorInfo": "ttft.core.records",
    "TtftError": "ttft.core.errors",
    "summarize": "ttft.core.summary",
    "summarize_run": "ttft.core.summary",
    "BenchSummary": "ttft.core.summary",
    "parse_slo": "ttft.core.slo",
    # client: how to send
    "StreamingClient": "ttft.client.stream",
    "ChatRequest": "ttft.workload.request_log",
    "CompletionRequest": "ttft.workload.request_log",
    # workload and load: what and when to send
    "WorkItem": "ttft.workload.requests",
    "ClosedLoop": "ttft.workload.arrival",
    "OpenLoop": "ttft.workload.arrival",
    "Target": "ttft.core.target",
    "WorkloadSpec": "ttft.workload.spec",
    "run_session": "ttft.load.session",
    # engines
    "LlamaServerConfig": "ttft.engines.llamacpp.launch",
    "launch_embedded": "ttft.engines.llamacpp.embedded",
    "launch_llama_server": "ttft.engines.llamacpp.embedded",
    "CommonMetric": "ttft.engines.metrics",
    "adapter_for": "ttft.engines.registry",
    # procedures
    "DoctorContext": "ttft.doctor.context",
    "run_doctor": "ttft.doctor.run",
}

__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ttft' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
