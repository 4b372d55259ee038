"""``ttft lint engine``: parse a launch command line and run the shared rules plus its engine's."""

from __future__ import annotations

from dataclasses import replace

from ttft.core.findings import Finding, sort_findings
from ttft.engines.command import EngineCommand
from ttft.engines.device import detect_gpu
from ttft.engines.registry import adapter_for
from ttft.engines.rulekit import EngineLintOptions, Rule
from ttft.lint.engine.common_rules import (
    rule_concurrency_cap,
    rule_cuda_graphs,
    rule_flag_table,
    rule_kv_quantized,
    rule_memory,
    rule_offload,
    rule_speculative,
    rule_token_budget,
)

COMMON_RULES: tuple[Rule, ...] = (
    rule_flag_table,
    rule_token_budget,
    rule_memory,
    rule_concurrency_cap,
    rule_kv_quantized,
    rule_cuda_graphs,
    rule_offload,
    rule_speculative,
)


def lint_command(cmd: EngineCommand, options: EngineLintOptions | None = None) -> list[Finding]:
    """Every finding for one engine command line, sorted by position. The device is resolved
    first: given, else detected (``ttft.engines.device``), else a GPU."""
    opts = options or EngineLintOptions()
    if opts.gpu is None:
        detected, _why = detect_gpu(cmd, opts.live)
        opts = replace(opts, gpu=detected is not False)
    out: list[Finding] = []
    for rule in COMMON_RULES + adapter_for(cmd.engine).rules:
        out.extend(rule(cmd, opts))
    return sort_findings(out)
