"""Text Generation Inference as ttft knows it: its metrics (no flag table yet)."""

from __future__ import annotations

from ttft.engines.adapter import EngineAdapter
from ttft.engines.tgi.metrics import BLIND_SPOTS, SOURCES

ADAPTER = EngineAdapter(
    kind="tgi",
    display_name="TGI",
    metric_prefix="tgi_",
    sources=SOURCES,
    blind_spots=BLIND_SPOTS,
)
