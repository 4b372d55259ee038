"""Everything ttft knows about one engine kind, in one declarative object.

Each kind builds one ``EngineAdapter`` in ``engines/<kind>/adapter.py`` and the registry lists it.
Lint, doctor, bench, the gateway (and later tune) ask the adapter instead of keeping their own
per-engine tables, so adding an engine is one folder plus one registry line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ttft.engines.flags import FlagSpec
from ttft.engines.metrics import CommonMetric, MetricSource

if TYPE_CHECKING:
    from ttft.engines.rulekit import Rule


@dataclass(frozen=True)
class FlagRoles:
    """Which of the engine's flags plays each part that the shared lint rules (and tune) reason
    about. ``None`` means the engine has no such flag, and the shared rule stays silent for it."""

    token_budget: str | None = None  # per-step prefill token budget (chunked prefill)
    token_budget_default: str = ""  # what the engine picks when the flag is unset, in words
    token_budget_negative_off: bool = False  # a negative budget turns chunked prefill off
    memory_fraction: str | None = None  # fraction of accelerator memory for weights + KV
    concurrency_cap: str | None = None  # how many requests run at once
    concurrency_cap_spelled: str = ""  # how a person types it, e.g. "-np/--parallel"
    concurrency_cap_default: int | None = None  # the cap when the flag is unset (None: unknown)
    concurrency_note: str = ""  # a measured example of what queueing behind the cap costs
    concurrency_fix_note: str = ""  # what else to change with the cap
    # The context size the slots share (llama.cpp: each of -np slots gets -c / -np tokens), so a
    # change of the cap must scale it; None: each request's context is its own.
    shared_context: str | None = None
    # The boolean flag whose positive form turns prefix caching on (its negative turns it off).
    prefix_cache: str | None = None
    kv_cache_dtype: tuple[str, ...] = ()  # flags that set KV-cache precision
    eager_mode: str | None = None  # the switch that turns CUDA graphs off
    cpu_offload: str | None = None  # the flag that offloads weights to CPU memory
    # Flags that turn speculative decoding on (a draft model, n-gram or EAGLE proposals): a TPOT
    # lever that people reach for expecting a TTFT gain.
    speculative: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineAdvice:
    """The engine-specific sentences doctor (and tune) show next to a finding.

    ``more_slots`` is formatted with ``level`` (the concurrency that queued).
    """

    prefix_cache_off: str = "enable the engine's prefix caching"
    head_of_line: str = "enable chunked prefill"
    more_slots: str = "raise the engine's concurrent-request limit"
    cold_start: str = (
        "send a warm-up request before taking traffic; llama-server: "
        "`-lm mlock` (older builds `--mlock --no-mmap`)"
    )


GENERIC_ADVICE = EngineAdvice()

# Where a command line hands over to the engine: given the tokens and a position, the number of
# tokens the launcher takes there (``vllm serve`` is 2), or None when it is not this engine's.
Launcher = Callable[[Sequence[str], int], int | None]


@dataclass(frozen=True)
class EngineAdapter:
    kind: str  # the one spelling used in CLI choices, configs and reports
    display_name: str  # how people name it in prose ("vLLM", "llama.cpp llama-server")
    metric_prefix: str = ""  # Prometheus name prefix that identifies its scrapes
    metrics_path: str = "/metrics"
    sources: Mapping[CommonMetric, MetricSource] = field(default_factory=dict)
    blind_spots: Mapping[CommonMetric, str] = field(default_factory=dict)
    flags: Mapping[str, FlagSpec] = field(default_factory=dict)  # every spelling -> spec
    flags_source: str = ""  # where the flag table came from
    env_flags: Mapping[str, str] = field(default_factory=dict)  # env var -> the flag it sets
    help_command: str = ""  # the command that prints the engine's own flag help
    launchers: tuple[Launcher, ...] = ()
    module_flag_is_model: bool = False  # llama-server's ``-m`` is its model, not ``python -m``
    accepts_underscores: bool = False  # ``--max_num_seqs`` means ``--max-num-seqs`` (vLLM)
    accepts_prefixes: bool = False  # unambiguous prefixes of long flags (argparse, SGLang)
    roles: FlagRoles = field(default_factory=FlagRoles)
    rules: tuple[Rule, ...] = ()  # lint rules of this engine only (shared ones live in lint)
    advice: EngineAdvice = GENERIC_ADVICE
    # Whether its streamed answers carry ``X-Accel-Buffering: no`` (which tells nginx not to
    # buffer them); None: not known.
    sends_x_accel_buffering_no: bool | None = None
    # llama-server's control endpoints (/props, /tokenize, /apply-template): the gateway reads the
    # chat template and checks its own rendering against them.
    control_endpoints: bool = False
    # A text prompt sent to its completions endpoint always gets BOS prepended (no
    # ``add_special_tokens`` switch), so a pre-rendered prompt must leave its own BOS out.
    completions_prompt_gets_bos: bool = False
    # ``POST /tokenize`` takes chat ``messages`` and renders them with the engine's own template
    # (vLLM): the gateway checks its pre-rendering against it.
    tokenizes_chat: bool = False
    ignores_eos: bool = False  # accepts ``ignore_eos`` in requests (exact output lengths)
    # Whether its answers say how many prompt tokens came from the prefix cache (usage's
    # cached_tokens, llama-server's timings.cache_n); if not, only a metrics counter tells.
    reports_cached_tokens: bool = True
    # The engine settings worth sweeping, by flag; ``ttft tune`` reads this.
    tunables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def metric_sources(self) -> Mapping[CommonMetric, MetricSource]:
        return self.sources

    def unavailable(self) -> Mapping[CommonMetric, str]:
        return self.blind_spots

    def launcher_at(self, texts: Sequence[str], i: int) -> int | None:
        for launcher in self.launchers:
            taken = launcher(texts, i)
            if taken is not None:
                return taken
        return None
