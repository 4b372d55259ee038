"""Lint rules every engine shares: the flag table, token budget, memory, concurrency cap, KV
precision, CUDA graphs and offload. Which flag plays each part comes from the engine's adapter
(``FlagRoles``), so a new engine gets these checks by naming its flags.

The numbers quoted come from the seed article (an 8B model on one 80 GB GPU, 2400-token prompts at
concurrency 32) and from the embedded llama-server on this project's CPU machines (DESIGN.md).
"""

from __future__ import annotations

from ttft.core.findings import Finding, Severity
from ttft.engines.command import EngineCommand
from ttft.engines.registry import adapter_for
from ttft.engines.rulekit import (
    BUDGET_HIGH,
    BUDGET_LOW,
    BUDGET_START,
    MEMORY_RISKY,
    EngineLintOptions,
    finding_at,
    is_false,
    parse_count,
    parse_float,
)


def rule_flag_table(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    out: list[Finding] = []
    adapter = adapter_for(cmd.engine)
    name = adapter.display_name
    for arg in cmd.args:
        spec = arg.spec
        if spec is None:
            out.append(
                finding_at(
                    cmd,
                    "engine/unknown-flag",
                    Severity.INFO,
                    f"Flag not known to ttft: {arg.flag}",
                    f"{arg.flag} is not in ttft's table of {name} flags; it may be newer than "
                    "the table or misspelled. Its effect on TTFT is not checked.",
                    arg,
                    f"check the spelling against `{adapter.help_command}`",
                )
            )
        elif spec.status == "removed":
            out.append(
                finding_at(
                    cmd,
                    "engine/removed-flag",
                    Severity.WARNING,
                    f"{arg.flag} no longer exists",
                    f"Current {name} versions reject {arg.flag}: the server would not start.",
                    arg,
                    f"use {spec.replacement}" if spec.replacement != "nothing" else "remove it",
                )
            )
        elif spec.status == "deprecated":
            out.append(
                finding_at(
                    cmd,
                    "engine/deprecated-flag",
                    Severity.INFO,
                    f"{arg.flag} is deprecated",
                    f"{name} still accepts {arg.flag} but will drop it.",
                    arg,
                    f"use {spec.replacement}" if spec.replacement != "nothing" else "remove it",
                )
            )
        elif spec.takes_value and not arg.value:
            out.append(
                finding_at(
                    cmd,
                    "engine/missing-value",
                    Severity.WARNING,
                    f"{arg.flag} has no value",
                    f"{arg.flag} takes a value but the command line ends after it.",
                    arg,
                    f"give {arg.flag} a value",
                )
            )
    return out


def rule_token_budget(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    roles = adapter_for(cmd.engine).roles
    flag = roles.token_budget
    if flag is None:
        return []
    arg = cmd.get(flag)
    rule = f"{cmd.engine}/token-budget"
    sweep = f"--{flag} {BUDGET_START}, then sweep {BUDGET_LOW}/{BUDGET_START}/{BUDGET_HIGH}"
    if arg is None:
        default = roles.token_budget_default or "its own default"
        return [
            finding_at(
                cmd,
                rule,
                Severity.INFO,
                "Per-step token budget left at the default",
                f"--{flag} is not set, so the engine picks {default}. The budget decides how "
                "much prefill shares a step with decodes: too big slows every running stream's "
                "next token, too small stretches a long prompt's prefill over many steps. The "
                "article started at 2048 and swept it on its own length distribution.",
                None,
                sweep,
                "a budget fitted to your prompt lengths",
            )
        ]
    value = parse_count(arg.value)
    if value is None:
        return []
    if value < 0 and roles.token_budget_negative_off:
        return []  # the engine's own rule reports chunked prefill turned off
    if value < BUDGET_LOW:
        return [
            finding_at(
                cmd,
                rule,
                Severity.WARNING,
                "Token budget below the range worth sweeping",
                f"--{flag} {value}: a 2400-token prompt needs {-(-2400 // max(value, 1))} steps "
                "of prefill, each shared with decodes, so its first token waits for all of them.",
                arg,
                sweep,
                "fewer prefill steps per long prompt",
            )
        ]
    if value > BUDGET_HIGH:
        return [
            finding_at(
                cmd,
                rule,
                Severity.INFO,
                "Token budget above the range worth sweeping",
                f"--{flag} {value}: steps that big make running streams wait for whole long "
                "prefills between tokens (TPOT) and can hold newer short prompts back. Worth "
                "measuring against smaller budgets.",
                arg,
                sweep,
                "steadier TPOT; sometimes lower p99 TTFT",
            )
        ]
    return []


def rule_memory(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    flag = adapter_for(cmd.engine).roles.memory_fraction
    if flag is None:
        return []
    arg = cmd.get(flag)
    value = parse_float(arg.value) if arg else None
    if arg is None or value is None or value <= MEMORY_RISKY:
        return []
    return [
        finding_at(
            cmd,
            f"{cmd.engine}/memory-utilization",
            Severity.WARNING,
            "Memory fraction leaves no headroom",
            f"--{flag} {value:g}: with so little headroom, activation peaks and bursts push the "
            "KV cache to its limit and running requests get preempted (their KV thrown away and "
            "recomputed), which is what makes p99 TTFT explode. The article kept KV usage at "
            "80-90% with zero preemptions, at --gpu-memory-utilization 0.88.",
            arg,
            f"--{flag} 0.88 (then watch KV usage and the preemption counter under load)",
            "no preemptions under bursts (p99 TTFT)",
        )
    ]


def rule_concurrency_cap(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    roles = adapter_for(cmd.engine).roles
    flag = roles.concurrency_cap
    if flag is None:
        return []
    expected = opts.expected_concurrency
    if expected is None:
        return []
    arg = cmd.get(flag)
    spelled = roles.concurrency_cap_spelled or f"--{flag}"
    rule = f"{cmd.engine}/concurrency-cap"
    value = parse_count(arg.value) if arg else None
    if value is None or value < 0:  # unset, or -1 (auto): the engine's default
        value = roles.concurrency_cap_default
    if value is None:
        return []  # the engine sizes its default from memory: unknown here
    implicit = " (the default)" if arg is None else ""
    if value < expected:
        staircase = (
            roles.concurrency_note
            or " At concurrency 32 the article found queueing to be 45% of TTFT."
        )
        return [
            finding_at(
                cmd,
                rule,
                Severity.WARNING,
                "Concurrency cap below the expected load",
                f"{spelled} {value}{implicit} runs at most {value} requests at once, but "
                f"{expected} are expected: the other {expected - value} wait in a queue before "
                f"their prefill even starts.{staircase}",
                arg,
                f"{spelled} {expected}" + roles.concurrency_fix_note,
                "no queueing at the expected load",
            )
        ]
    if value > 4 * expected and value > 64:
        return [
            finding_at(
                cmd,
                rule,
                Severity.INFO,
                "Concurrency cap far above the expected load",
                f"{spelled} {value}{implicit} with {expected} expected: a burst is admitted all "
                "at once, "
                "and admitted requests share prefill and KV cache instead of queueing. The "
                "article saw p99 TTFT go from 800 ms to 4 s when raising the cap from 64 to "
                "256, and chose 64 for p99 < 600 ms.",
                arg,
                f"sweep {spelled} around your knee (e.g. {expected}, {2 * expected}, "
                f"{4 * expected}) and keep the largest that meets the p99 SLO",
                "bounded p99 TTFT under bursts",
            )
        ]
    return []


def rule_kv_quantized(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    flags = adapter_for(cmd.engine).roles.kv_cache_dtype
    out: list[Finding] = []
    for flag in flags:
        arg = cmd.get(flag)
        if arg is None:
            continue
        value = (arg.value or "").lower()
        if not value or value in ("auto", "f16", "bf16", "bfloat16", "f32", "float16"):
            continue
        out.append(
            finding_at(
                cmd,
                f"{cmd.engine}/kv-cache-quantized",
                Severity.WARNING,
                "Quantized KV cache needs a quality check",
                f"{arg.flag} {arg.value} stores keys/values at reduced precision. It roughly "
                "doubles KV capacity (the article: 24 -> 47 concurrent requests, -160 ms p50) "
                "but changes every attention score; answers can waver, most past ~8K context.",
                arg,
                "keep it only after a quality regression on your long-context prompts; "
                "otherwise drop the flag (auto/f16)",
                "no silent quality loss",
            )
        )
    return out


def rule_cuda_graphs(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    """Eager mode on a GPU; nothing on a CPU, where there are no CUDA graphs to lose (vLLM's
    CPU backend runs eager anyway) and a plan step to drop the flag would be noise."""
    flag = adapter_for(cmd.engine).roles.eager_mode
    arg = cmd.get(flag) if flag else None
    if arg is None or is_false(arg.value) or opts.gpu is False:
        return []
    return [
        finding_at(
            cmd,
            f"{cmd.engine}/cuda-graphs",
            Severity.WARNING,
            "CUDA graphs disabled",
            f"{arg.flag} launches every kernel from Python instead of replaying captured CUDA "
            "graphs; each decode step (including the one that emits the first token) pays the "
            "launch overhead. The article got -180 ms p50 from CUDA graphs.",
            arg,
            f"remove {arg.flag}",
            "about -180 ms p50 in the article",
        )
    ]


def rule_offload(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    flag = adapter_for(cmd.engine).roles.cpu_offload
    arg = cmd.get(flag) if flag else None
    value = parse_float(arg.value) if arg else None
    if arg is None or not value:
        return []
    return [
        finding_at(
            cmd,
            f"{cmd.engine}/cpu-offload",
            Severity.WARNING,
            "Weights offloaded to CPU memory",
            f"{arg.flag} {arg.value}: those weights cross PCIe on every forward pass, prefill "
            "included. Offload moves weights, it does not make them faster: TTFT gets worse.",
            arg,
            f"remove {arg.flag}; fit the model with a smaller --max-model-len, fewer sequences "
            "or more GPUs",
            "prefill at full GPU speed",
        )
    ]


def rule_speculative(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    """Speculative decoding is a decode (TPOT) lever; say so to whoever enabled it for TTFT."""
    for flag in adapter_for(cmd.engine).roles.speculative:
        arg = cmd.get(flag)
        if arg is None:
            continue
        shown = f"{arg.flag} {arg.value}" if arg.value else arg.flag
        return [
            finding_at(
                cmd,
                f"{cmd.engine}/speculative-decoding",
                Severity.INFO,
                "Speculative decoding targets TPOT, not TTFT",
                f"{shown} turns on speculative decoding: proposed tokens are verified several "
                "at a time, which speeds up decode (TPOT/ITL). The first token still waits for "
                "the target model's whole prefill, and a draft model prefills the same prompt "
                "as well (and takes memory from the KV cache), so TTFT stays or grows. The "
                "article: speculative decoding helps TPOT, not TTFT.",
                arg,
                "keep it for TPOT if it pays there; measure TTFT with and without it (`ttft "
                "tune ab`) rather than expecting it to cut first-token latency",
            )
        ]
    return []
