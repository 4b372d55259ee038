"""The public API is a promise: this list changes only on purpose, and every name resolves."""

from __future__ import annotations

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


def test_no_library_module_imports_the_cli() -> None:
    """Layers point down: nothing under ttft imports ttft.cli except ttft.cli itself."""
    import pathlib
    import re

    cli_import = re.compile(r"^\s*(from ttft\.cli(\.| )|import ttft\.cli\b)", re.MULTILINE)
    root = pathlib.Path(ttft.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.parts[len(root.parts)] not in ("cli", "__main__.py")  # python -m ttft is the CLI
        and cli_import.search(path.read_text())
    ]
    assert offenders == []


# What each package may import (besides itself): the layers of docs/DESIGN.md, pointing down.
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "weights": {"core"},
    "engines": {"core"},
    "workload": {"core", "weights"},
    "prompts": {"core", "workload", "weights"},
    "client": {"core", "workload"},
    "proxy": {"core", "engines"},
    # Instruments: scripted servers, a second client, the gateway soak (drives load with the
    # streaming client; the gateway itself it only runs as a process, by its CLI).
    "testing": {"core", "client", "engines", "proxy", "workload"},
    "load": {"core", "client", "workload", "engines"},
    "probe": {"core", "client", "workload", "engines", "load"},
    "lint": {"core", "engines", "prompts", "workload", "weights"},
    "gateway": {"core", "client", "workload", "engines", "prompts"},
    "doctor": {"core", "engines", "lint", "probe", "load", "prompts", "workload", "client"},
    "tune": {
        "core",
        "engines",
        "load",
        "probe",
        "prompts",
        "workload",
        "client",
        "doctor",
        "proxy",
    },
    "verify": {"core", "engines", "workload"},
    # The gateway only for its pure routing policy (gateway/routing.py): the simulated
    # prefix-affinity is the deployed one.
    "simulate": {"core", "client", "engines", "load", "probe", "workload", "gateway"},
    "report": {"core", "doctor", "lint", "weights", "workload", "engines", "tune", "verify"},
}


def _imports_by_package() -> dict[str, set[str]]:
    import ast
    import pathlib

    root = pathlib.Path(ttft.__file__).parent
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if len(rel.parts) < 2:
            continue
        package = rel.parts[0]
        for node in ast.walk(ast.parse(path.read_text())):  # lazy imports in functions too
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "ttft" and len(parts) > 1 and parts[1] != package:
                    found.setdefault(package, set()).add(parts[1])
    return found


def test_every_package_imports_only_the_layers_below_it() -> None:
    imports = _imports_by_package()
    assert set(imports) - {"cli"} <= set(LAYERS), "a new package needs its place in LAYERS"
    wrong = {pkg: sorted(used - LAYERS[pkg]) for pkg, used in imports.items() if pkg != "cli"}
    assert {pkg: names for pkg, names in wrong.items() if names} == {}


def test_the_gateway_a_runtime_path_imports_no_static_checker() -> None:
    assert "lint" not in _imports_by_package()["gateway"]
