"""Doctor's dynamic-prefix step on the real llama-server, on logs built unlike each other.

Each log carries its dynamic content somewhere else (the first line, the second line, inside a
sentence, in an assistant few-shot turn, in a tool description) or nowhere. The step replays it
as it is and with the spans moved; the engine's cached-token counts must show what the analysis
predicts, the finding must name the same spans as ``ttft lint prompts`` does, and a clean log
must give no finding. Assertions are relations (more cached tokens, an interval), never times.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ttft.core.target import Target
from ttft.doctor.context import DoctorContext
from ttft.doctor.findings import StepResult
from ttft.doctor.step_dynamic import analysis_of, dynamic_prefix
from ttft.engines.control import ControlClient
from ttft.engines.llamacpp.embedded import RunningEngine
from ttft.testing.dynamic_logs import BUILDERS
from ttft.workload.builders import from_jsonl

pytestmark = [pytest.mark.e2e]


def _write(path: Path, bodies: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    return path


# A ChatML template that writes the tools' JSON into the system block, as tool-use templates do.
TOOLS_CHATML = (
    "{% if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _step(
    engine: RunningEngine, log: Path, template: str | None = None
) -> tuple[StepResult, set[str]]:
    """The step's result, and the values of every span doctor's analysis names; the chat
    template is the engine's (from ``/props``, as doctor reads it) unless one is given."""
    target = Target(engine.base_url, engine_kind="llamacpp")
    props = ControlClient(target).props() or {}
    if template is not None:
        props = {**props, "chat_template": template}
    ctx = DoctorContext(
        target=target,
        deadline=time.monotonic() + 240,
        real_items=from_jsonl(log, max_tokens=1),
        props=props,
    )
    step = dynamic_prefix(ctx)
    analysis = analysis_of(ctx)
    return step, set() if analysis is None else {s.text for s in analysis.all_spans}


def _lint_values(log: Path, engine: RunningEngine, *options: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ttft", "lint", "prompts", str(log), *options,
         "--url", engine.base_url, "--prefill-rate", "400", "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-2000:]
    report = json.loads(done.stdout)
    return {s["text"] for s in report["prefix_cache"]["dynamic_spans"]}


@pytest.mark.parametrize("name", ["second-line", "mid-sentence", "few-shot"])
def test_moving_the_spans_found_anywhere_makes_the_engine_reuse_the_static_part(
    embedded_server: RunningEngine, tmp_path: Path, name: str
) -> None:
    built = BUILDERS[name](count=4, words=200)
    log = _write(tmp_path / f"{name}.jsonl", built.bodies)
    step, named = _step(embedded_server, log)
    rules = [f.rule for f in step.findings]
    assert rules == ["cache/dynamic-prefix"], (rules, step.notes, step.evidence)
    evidence = {e.name: e.value for e in step.evidence}
    before = evidence["cached prompt tokens as they are (p50)"]
    after = evidence["cached prompt tokens moved (p50)"]
    assert after > before + 150, evidence
    finding = step.findings[0]
    assert finding.change is not None and finding.change.transforms == ("move-dynamic",)
    values: set[str] = set().union(*built.expected)
    assert named == values == _lint_values(log, embedded_server)
    assert any(repr(v) in finding.change.label for v in values)


def test_a_value_in_a_rendered_tool_description_is_reported_unmovable_with_its_reason(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    built = BUILDERS["tool-description"](count=4, words=120)
    log = _write(tmp_path / "tool.jsonl", built.bodies)
    template = tmp_path / "tools.jinja"
    template.write_text(TOOLS_CHATML)
    step, named = _step(embedded_server, log, TOOLS_CHATML)
    assert [f.rule for f in step.findings] == ["cache/dynamic-unmovable"]
    linted = _lint_values(log, embedded_server, "--template", str(template))
    assert named == set().union(*built.expected) == linted
    assert "tool" in step.findings[0].message and step.findings[0].change is None


def test_tools_the_engine_template_leaves_out_cannot_break_the_prefix(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    """llama-server's fallback ChatML template renders no tools: neither names their values."""
    log = _write(tmp_path / "tool.jsonl", BUILDERS["tool-description"](count=4, words=60).bodies)
    step, named = _step(embedded_server, log)
    assert step.findings == [] and named == set() == _lint_values(log, embedded_server)


def test_a_clean_log_gives_no_finding_from_doctor_nor_from_lint(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    log = _write(tmp_path / "clean.jsonl", BUILDERS["clean"](count=4, words=120).bodies)
    step, named = _step(embedded_server, log)
    assert step.findings == [] and step.status.value == "ok", step.notes
    assert named == set() == _lint_values(log, embedded_server)
