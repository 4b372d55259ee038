"""Quality verification: does a speed lever (KV quantization, precision) change the answers?

``ttft verify quality`` runs one regression set, built in the model's own tokens, against a
baseline and a candidate, and gives a verdict per context length next to the speed gained.
"""

from __future__ import annotations

from ttft.verify.metrics import (
    Thresholds,
    first_divergence,
    recall_hit,
    top1_agrees,
    topk_kl,
    verdict_for,
)
from ttft.verify.probes import Probe, build_probes
from ttft.verify.quality import Generation, LengthSummary, QualityReport, compare_sides
from ttft.verify.run import QualityCheck, QualityOptions, check_windows, run_quality
from ttft.verify.sides import SideSpec, parse_side

__all__ = [
    "Generation",
    "LengthSummary",
    "Probe",
    "QualityCheck",
    "QualityOptions",
    "QualityReport",
    "SideSpec",
    "Thresholds",
    "build_probes",
    "check_windows",
    "compare_sides",
    "first_divergence",
    "parse_side",
    "recall_hit",
    "run_quality",
    "top1_agrees",
    "topk_kl",
    "verdict_for",
]
