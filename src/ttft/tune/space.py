"""A parameter space (flag -> values to try), its configurations, and their stable identities.

A configuration is a mapping of engine flag -> value as text, spelled the way the engine's users
type it (``-np``, ``--max-num-batched-tokens``). Its id is a hash of its canonical JSON, so the
same configuration gets the same id in every run: that is what ``--resume`` matches on.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence

from ttft.core.errors import TtftError
from ttft.engines.registry import adapter_for

Config = Mapping[str, str]
Space = Mapping[str, Sequence[str]]


def flag_name(key: str) -> str:
    """Adapters list vLLM/SGLang tunables without dashes; a command line needs them."""
    return key if key.startswith("-") else "--" + key


def default_space(kind: str) -> dict[str, tuple[str, ...]]:
    """The engine's own tunables (``EngineAdapter.tunables``), keyed by their command-line flag."""
    return {flag_name(k): tuple(v) for k, v in adapter_for(kind).tunables.items()}


def parse_param(text: str) -> tuple[str, tuple[str, ...]]:
    """``-np=1,2,4`` or ``--max-num-seqs=64,128`` -> (flag, values)."""
    flag, sep, values = text.partition("=")
    parts = tuple(v.strip() for v in values.split(",") if v.strip())
    if not sep or not flag.strip() or not parts:
        raise TtftError(
            f"--param {text!r} is not FLAG=V1,V2,...", "e.g. --param -np=1,2,4 --param -ub=128,512"
        )
    return flag_name(flag.strip()), parts


def parse_space(texts: Iterable[str]) -> dict[str, tuple[str, ...]]:
    space: dict[str, tuple[str, ...]] = {}
    for text in texts:
        flag, values = parse_param(text)
        space[flag] = values
    return space


def configurations(space: Space) -> list[dict[str, str]]:
    """Every combination, the first flag varying slowest (the order the user wrote them)."""
    flags = list(space)
    return [dict(zip(flags, combo, strict=True)) for combo in itertools.product(*space.values())]


def config_id(config: Config, extra: Mapping[str, object] | None = None) -> str:
    """A short stable id of a configuration (plus anything else that changes a trial's result,
    such as the workload and the SLOs)."""
    payload = {"config": dict(sorted(config.items())), "extra": extra or {}}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def config_label(config: Config) -> str:
    return " ".join(f"{k} {v}" for k, v in config.items()) or "(defaults)"


def engine_args(kind: str, config: Config) -> list[str]:
    """The flags of ``config`` as the engine's command line takes them.

    Switches follow the adapter's flag table: a boolean (``b``) becomes ``--flag`` for on and its
    ``--no-`` form for off; a plain switch (``f``) is present for on and absent for off.
    """
    adapter = adapter_for(kind)
    argv: list[str] = []
    for key, value in config.items():
        flag = flag_name(key)
        spec = adapter.flags.get(flag)
        if spec is not None and spec.kind in ("b", "f"):
            on = _switch_value(flag, value)
            if on:
                argv.append(flag)
            elif spec.negative:
                argv.append(spec.negative[0])
            continue
        argv.extend([flag, value])
    return argv


def _switch_value(flag: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in ("on", "true", "1", "yes"):
        return True
    if lowered in ("off", "false", "0", "no"):
        return False
    raise TtftError(f"{flag} is a switch: give on or off, not {value!r}")


def launch_command(kind: str, base: Sequence[str], config: Config) -> list[str]:
    """``base`` (the user's launch command, e.g. ``vllm serve MODEL``) plus the trial's flags."""
    return [*base, *engine_args(kind, config)]
