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
        "verify",  # the sweep's quality gate is a short verify run
        "simulate",  # tune sweep --predict ranks the grid with the calibrated model
    },
    "verify": {"core", "client", "engines", "workload"},
    # The what-if model: calibrates with load/probe, routes with the gateway's own policies.
    "simulate": {"core", "client", "engines", "gateway", "load", "probe", "workload"},
    "report": {
        "core",
        "doctor",
        "lint",
        "weights",
        "workload",
        "engines",
        "load",
        "tune",
        "verify",
    },
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


def _module_imports() -> dict[str, set[str]]:
    """Every ttft module and the ttft modules it imports (lazy imports in functions included;
    ``from package import name`` counts as importing ``package.name`` when that is a module)."""
    import ast
    import pathlib

    root = pathlib.Path(ttft.__file__).parent
    files: dict[str, pathlib.Path] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            wanted: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                # a name that is a submodule is that module; else the name lives in ``base``
                # (a package's own __init__ importing its modules is no circle of concepts)
                wanted = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                          for a in node.names]  # fmt: skip
            elif isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            for target in wanted:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                out.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out



def test_no_import_circle_among_modules() -> None:
    """A circle means two modules are one concept split wrongly (or a base and what builds on
    it kept in one file): the layers test cannot see it inside a package."""
    assert _circles(_module_imports()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [{"a", "b", "c"}]


def test_no_cli_function_takes_its_options_as_a_dict() -> None:
    """The library decides and takes typed options (BenchOptions, SweepOptions, AbOptions...);
    a CLI function handing an ``opts: dict`` down would move the decisions back into cli/."""
    import ast
    import pathlib

    cli = pathlib.Path(ttft.__file__).parent / "cli"
    offenders = []
    for path in cli.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in [*node.args.args, *node.args.kwonlyargs]:
                    annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                    if annotation.startswith(("dict[str, Any]", "Mapping[str, Any]")):
                        offenders.append(f"{path.name}:{node.lineno} {node.name}({arg.arg})")
    assert offenders == []


# Class names defined in two modules, each meaning something else there (issue 25: one name per
# concept). The list may only shrink: a new pair fails, and so does a pair renamed away but
# still listed.
TWICE_NAMED = {
    "Comparison": ["core/compare.py", "simulate/validate.py"],
    "Connection": ["client/connection.py", "gateway/http/conn.py"],
    "Directive": ["lint/nginx/config.py", "proxy/nginx_rewrite.py"],
    "Frame": ["gateway/prerender.py", "tune/frontend.py"],
    "Plan": ["core/plan.py", "gateway/plan.py"],
    "Sample": ["engines/prometheus.py", "probe/sampler.py"],
    "Token": ["engines/command.py", "proxy/nginx_rewrite.py"],
}


def test_no_new_class_name_is_defined_in_two_modules() -> None:
    import ast
    import pathlib

    root = pathlib.Path(ttft.__file__).parent
    homes: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                homes.setdefault(node.name, []).append(path.relative_to(root).as_posix())
    twice = {name: sorted(paths) for name, paths in homes.items() if len(paths) > 1}
    assert twice == TWICE_NAMED
