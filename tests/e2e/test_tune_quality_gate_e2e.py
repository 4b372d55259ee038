"""The `tune sweep --quality-gate` check on the real embedded llama-server: q4_0 KV against the
f16 baseline fails (so a sweep would never choose it), q8_0 KV does not.

Bounded: the gate's own short check (one 512-token length, two probes, eight tokens); the
baseline is measured once, so three engines run one after the other (~65 s on 2 shared cores).
"""

from __future__ import annotations

import pytest

from ttft.tune.quality_gate import quality_gate

pytestmark = pytest.mark.e2e


def test_q4_0_kv_fails_the_gate_and_q8_0_kv_does_not() -> None:
    gate = quality_gate({"-ctk": "f16", "-ctv": "f16"}, threads=2, model_path=None)
    assert gate({"-ctk": "q4_0", "-ctv": "q4_0"}) == "fail"
    assert gate({"-ctk": "q8_0", "-ctv": "q8_0"}) in ("pass", "degraded")
