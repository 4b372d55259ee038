"""What the simulator knows about one engine: its cost model (seconds per step, fitted from
measurements) and its scheduler settings (slots, batch tokens, KV blocks), saved as one small
JSON file with the fit's residuals so a reader can judge how far to trust it.

The cost of one engine step (one forward pass over a batch) is linear in its composition::

    step_s = step_base_s
           + prefill_token_s * (prompt tokens in the batch)
           + decode_seq_s    * (sequences decoding one token in the batch)
           + attention_s     * (sum over the batch's tokens of the context they attend to) / 1000
           + cached_token_s  * (prompt tokens restored from the prefix cache this step)

A request's time to first token at the client is ``overhead_s`` (HTTP, template, tokenizer,
first chunk) plus its wait for a slot plus the steps until its last prompt token is computed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from ttft.core.errors import TtftError

SCHEMA = "ttft.simulate.calibration/1"
EngineKind = Literal["llamacpp", "vllm", "sglang"]
ENGINE_KINDS: tuple[EngineKind, ...] = ("llamacpp", "vllm", "sglang")
# SGLang's --schedule-policy values the SGLang model knows (simulate/sglang.py)
SGLANG_POLICIES: tuple[str, ...] = ("fcfs", "lpm")


@dataclass(frozen=True, slots=True)
class CostModel:
    """Seconds per engine step as a function of its batch (see the module docstring)."""

    step_base_s: float
    prefill_token_s: float
    decode_seq_s: float
    attention_s: float = 0.0
    cached_token_s: float = 0.0
    overhead_s: float = 0.0
    noise_cv: float = 0.0  # the step time's relative scatter seen in the fit (0: exact)

    def step_s(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        attention_ktokens: float = 0.0,
        cached_tokens: int = 0,
    ) -> float:
        return (
            self.step_base_s
            + self.prefill_token_s * prefill_tokens
            + self.decode_seq_s * decode_seqs
            + self.attention_s * attention_ktokens
            + self.cached_token_s * cached_tokens
        )

    def scaled(self, factor: float) -> CostModel:
        """Every compute cost times ``factor`` (a faster or slower machine); overhead kept."""
        return replace(
            self,
            step_base_s=self.step_base_s * factor,
            prefill_token_s=self.prefill_token_s * factor,
            decode_seq_s=self.decode_seq_s * factor,
            attention_s=self.attention_s * factor,
            cached_token_s=self.cached_token_s * factor,
        )


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The scheduler settings the simulation runs with (what-if flags override them).

    ``slots``: llama.cpp ``-np`` / vLLM ``--max-num-seqs`` / SGLang ``--max-running-requests``.
    ``batch_tokens``: llama.cpp ``-b`` / vLLM ``--max-num-batched-tokens`` / SGLang
    ``--chunked-prefill-size`` (``chunked_prefill`` False: SGLang's ``-1``). ``ctx_per_slot``:
    llama.cpp's context per slot (longer prompts are refused). ``kv_blocks`` x ``block_tokens``:
    vLLM's paged KV cache, SGLang's token pool in pages of ``--page-size`` (None: never short of
    KV; SGLang's page is 1 token by default, which ``targets.sglang_settings`` sets: the field's
    own default, 16, is vLLM's block). SGLang only: ``max_prefill_tokens``
    (``--max-prefill-tokens``), ``schedule_policy`` (``--schedule-policy``), ``mixed_chunk``
    (``--enable-mixed-chunk``), ``schedule_conservativeness`` (``--schedule-conservativeness``);
    ``prefix_cache`` False is ``--disable-radix-cache``.
    """

    kind: EngineKind = "llamacpp"
    slots: int = 4
    batch_tokens: int = 2048
    ctx_per_slot: int | None = None
    kv_blocks: int | None = None
    block_tokens: int = 16
    prefix_cache: bool = True
    chunked_prefill: bool = True
    host_cache_tokens: int | None = None  # llama.cpp --cache-ram, in tokens (None: unbounded)
    max_prefill_tokens: int = 16384  # SGLang's default (server_args.py)
    schedule_policy: str = "fcfs"  # SGLang's default (server_args.py)
    mixed_chunk: bool = False  # SGLang's default (server_args.py)
    schedule_conservativeness: float = 1.0  # SGLang's default (server_args.py)

    def check(self) -> None:
        if self.kind not in ENGINE_KINDS:
            raise TtftError(
                f"unknown engine kind {self.kind!r}", f"choose one of {', '.join(ENGINE_KINDS)}"
            )
        if self.schedule_policy not in SGLANG_POLICIES:
            raise TtftError(
                f"schedule policy {self.schedule_policy!r} is not modelled",
                f"the SGLang model knows {', '.join(SGLANG_POLICIES)}",
            )
        for name in ("slots", "batch_tokens", "block_tokens", "max_prefill_tokens"):
            if getattr(self, name) < 1:
                raise TtftError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.kind == "sglang" and self.chunked_prefill and self.batch_tokens % self.block_tokens:
            raise TtftError(
                f"SGLang's chunked prefill size ({self.batch_tokens}) must be a multiple of its "
                f"page size ({self.block_tokens})",
                "give --batch-tokens in whole pages (server_args.py asserts it)",
            )
        if not self.schedule_conservativeness > 0:
            raise TtftError("schedule_conservativeness must be above 0")
        if self.kv_blocks is not None and self.kv_blocks < 1:
            raise TtftError(f"kv_blocks must be at least 1, not {self.kv_blocks}")


@dataclass(frozen=True)
class FitReport:
    """How well the cost model explains the calibration's own measurements."""

    samples: int
    r2: float
    rel_residual_p50: float  # median |measured - fitted| / measured
    rel_residual_p95: float
    notes: tuple[str, ...] = ()
    points: tuple[dict[str, float | str], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Calibration:
    """One engine's fitted cost model and settings; ``source`` says what was measured."""

    cost: CostModel
    engine: EngineSettings
    fit: FitReport
    source: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "cost": asdict(self.cost),
            "engine": asdict(self.engine),
            "fit": {**asdict(self.fit), "notes": list(self.fit.notes)},
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "calibration") -> Calibration:
        if data.get("schema") != SCHEMA:
            raise TtftError(
                f"{where}: not a ttft simulate calibration (schema {data.get('schema')!r})",
                "make one with `ttft simulate calibrate --out FILE`",
            )
        try:
            cost = CostModel(**_known(CostModel, data["cost"]))
            engine = EngineSettings(**_known(EngineSettings, data["engine"]))
            fit_data = _known(FitReport, data["fit"])
            fit_data["notes"] = tuple(fit_data.get("notes", ()))
            fit_data["points"] = tuple(fit_data.get("points", ()))
            fit = FitReport(**fit_data)
        except (KeyError, TypeError) as exc:
            raise TtftError(
                f"{where}: a field is missing or of the wrong type ({exc})",
                "re-run `ttft simulate calibrate`",
            ) from None
        for value in asdict(cost).values():
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise TtftError(f"{where}: cost values must be finite numbers >= 0")
        engine.check()
        return cls(cost, engine, fit, dict(data.get("source", {})))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Calibration:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TtftError(
                f"calibration file not found: {path}",
                "make one with `ttft simulate calibrate --out FILE`",
            ) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TtftError(f"cannot read calibration {path}: {exc}") from None
        if not isinstance(data, dict):
            raise TtftError(f"{path}: a calibration is a JSON object")
        return cls.from_dict(data, str(path))


def _known(kind: type, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError(f"expected an object for {kind.__name__}")
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}
