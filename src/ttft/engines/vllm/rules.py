"""Flag checks that only apply to vLLM (the shared ones live in ``lint/engine/common_rules.py``)."""

from __future__ import annotations

from ttft.core.findings import Finding, Severity
from ttft.engines.command import EngineCommand
from ttft.engines.rulekit import (
    BUDGET_START,
    EngineLintOptions,
    Rule,
    finding_at,
    is_false,
)


def rule_vllm_prefix_cache(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg = cmd.get("enable-prefix-caching")
    if arg is not None and is_false(arg.value):
        return [
            finding_at(
                cmd,
                "vllm/prefix-cache",
                Severity.WARNING,
                "Prefix caching turned off",
                f"{arg.flag} makes every request prefill its whole prompt, even when thousands "
                "of leading tokens (system prompt, tools, history) are identical to the last "
                "request. The V1 engine enables prefix caching by default; in the article a "
                "1200-token system prompt saved 430 ms once cached.",
                arg,
                f"remove {arg.flag}",
                "the shared prefix is not recomputed (article: -430 ms for 1200 tokens)",
            )
        ]
    if arg is None and cmd.env_value("VLLM_USE_V1") == "0":
        return [
            finding_at(
                cmd,
                "vllm/prefix-cache",
                Severity.WARNING,
                "V0 engine without prefix caching",
                "VLLM_USE_V1=0 selects the V0 engine, where prefix caching is off unless "
                "--enable-prefix-caching is given.",
                None,
                "add --enable-prefix-caching (or drop VLLM_USE_V1=0)",
                "the shared prefix is not recomputed",
            )
        ]
    return []


def rule_vllm_chunked_prefill(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg = cmd.get("enable-chunked-prefill")
    if arg is None or not is_false(arg.value):
        return []
    return [
        finding_at(
            cmd,
            "vllm/chunked-prefill",
            Severity.WARNING,
            "Chunked prefill turned off",
            f"{arg.flag}: a long prompt's prefill runs as one step and every other request "
            "(new prompts and running streams alike) waits behind it: head-of-line blocking, "
            "with p50 fine and p99 bad.",
            arg,
            f"remove {arg.flag}; set --max-num-batched-tokens {BUDGET_START} and sweep",
            "short requests stop waiting behind long prefills (p99 TTFT)",
        )
    ]


RULES: tuple[Rule, ...] = (rule_vllm_prefix_cache, rule_vllm_chunked_prefill)
