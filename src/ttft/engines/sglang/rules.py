"""Flag checks that only apply to SGLang (shared ones: ``lint/engine/common_rules.py``)."""

from __future__ import annotations

from ttft.core.findings import Finding, Severity
from ttft.engines.command import EngineCommand
from ttft.engines.rulekit import (
    BUDGET_HIGH,
    BUDGET_LOW,
    BUDGET_START,
    EngineLintOptions,
    Rule,
    finding_at,
    is_false,
    parse_count,
)


def rule_sglang_radix_cache(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg = cmd.get("disable-radix-cache")
    if arg is None or is_false(arg.value):
        return []
    return [
        finding_at(
            cmd,
            "sglang/prefix-cache",
            Severity.WARNING,
            "Radix (prefix) cache turned off",
            "--disable-radix-cache makes every request prefill its whole prompt even when its "
            "leading tokens match an earlier one; in the article a cached 1200-token system "
            "prompt saved 430 ms.",
            arg,
            "remove --disable-radix-cache",
            "the shared prefix is not recomputed",
        )
    ]


def rule_sglang_lpm(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg = cmd.get("schedule-policy")
    if arg is None or (arg.value or "").lower() != "lpm":
        return []
    return [
        finding_at(
            cmd,
            "sglang/schedule-lpm",
            Severity.INFO,
            "Longest-prefix-match scheduling can starve requests",
            "--schedule-policy lpm admits waiting requests with the longest cached prefix "
            "first. That raises cache hits, but under sustained load a request whose prefix "
            "matches nothing can wait behind a stream of better-matching ones: good p50, "
            "unbounded p99 TTFT for the odd request out.",
            arg,
            "measure p99 TTFT per prompt family with lpm and with fcfs (the default); keep lpm "
            "only if the worst family still meets the SLO",
            "bounded worst-case queueing",
        )
    ]


def rule_sglang_chunked_prefill_off(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg = cmd.get("chunked-prefill-size")
    value = parse_count(arg.value) if arg else None
    if arg is None or value is None or value >= 0:
        return []
    sweep = (
        f"--chunked-prefill-size {BUDGET_START}, "
        f"then sweep {BUDGET_LOW}/{BUDGET_START}/{BUDGET_HIGH}"
    )
    return [
        finding_at(
            cmd,
            "sglang/chunked-prefill",
            Severity.WARNING,
            "Chunked prefill disabled",
            "--chunked-prefill-size -1 turns chunked prefill off: a long prompt's prefill "
            "runs in one piece and every other request waits behind it (head-of-line "
            "blocking; p50 fine, p99 bad).",
            arg,
            sweep,
            "short requests stop waiting behind long prefills (p99 TTFT)",
        )
    ]


RULES: tuple[Rule, ...] = (
    rule_sglang_radix_cache,
    rule_sglang_lpm,
    rule_sglang_chunked_prefill_off,
)
