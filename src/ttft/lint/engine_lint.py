"""``ttft lint engine``: parse a launch command line and run the rules of its engine."""

from __future__ import annotations

from ttft.lint.engine_cmdline import EngineCommand
from ttft.lint.engine_rules import (
    EngineLintOptions,
    Rule,
    rule_concurrency_cap,
    rule_cuda_graphs,
    rule_flag_table,
    rule_kv_quantized,
    rule_memory,
    rule_offload,
    rule_token_budget,
)
from ttft.lint.engine_rules_llamacpp import LLAMACPP_RULES
from ttft.lint.engine_rules_vllm_sglang import SGLANG_RULES, VLLM_RULES
from ttft.lint.findings import Finding, sort_findings

COMMON_RULES: list[Rule] = [
    rule_flag_table,
    rule_token_budget,
    rule_memory,
    rule_concurrency_cap,
    rule_kv_quantized,
    rule_cuda_graphs,
    rule_offload,
]
ENGINE_RULES: dict[str, list[Rule]] = {
    "vllm": VLLM_RULES,
    "sglang": SGLANG_RULES,
    "llamacpp": LLAMACPP_RULES,
}


def lint_command(cmd: EngineCommand, options: EngineLintOptions | None = None) -> list[Finding]:
    """Every finding for one engine command line, sorted by position."""
    opts = options or EngineLintOptions()
    out: list[Finding] = []
    for rule in COMMON_RULES + ENGINE_RULES[cmd.engine]:
        out.extend(rule(cmd, opts))
    return sort_findings(out)
