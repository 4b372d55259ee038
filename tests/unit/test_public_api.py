"""The public API is a promise: this list changes only on purpose, and every name resolves."""

from __future__ import annotations

import subprocess
import sys

import ttft

EXPECTED = {
    "__version__",
    "BenchSummary",
    "ChatRequest",
    "ClosedLoop",
    "CommonMetric",
    "CompletionRequest",
    "DoctorContext",
    "ErrorInfo",
    "LlamaServerConfig",
    "OpenLoop",
    "RequestRecord",
    "RunAnchor",
    "StreamingClient",
    "Target",
    "TtftError",
    "WorkItem",
    "WorkloadSpec",
    "adapter_for",
    "launch_embedded",
    "launch_llama_server",
    "parse_slo",
    "run_doctor",
    "run_session",
    "summarize",
    "summarize_run",
}


def test_public_names_are_exactly_the_pinned_list() -> None:
    assert set(ttft.__all__) == EXPECTED


def test_every_public_name_resolves() -> None:
    for name in ttft.__all__:
        assert getattr(ttft, name) is not None, name


def test_importing_ttft_loads_no_layer_eagerly() -> None:
    code = "import sys, ttft; print(sorted(m for m in sys.modules if m.startswith('ttft.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_library_module_imports_the_cli() -> None:
    """Layers point down: nothing under ttft imports ttft.cli except ttft.cli itself."""
    import pathlib
    import re

    cli_import = re.compile(r"^\s*(from ttft\.cli(\.| )|import ttft\.cli\b)", re.MULTILINE)
    root = pathlib.Path(ttft.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.parts[len(root.parts)] != "cli" and cli_import.search(path.read_text())
    ]
    assert offenders == []
