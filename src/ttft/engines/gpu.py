"""GPU telemetry as doctor reads it: DCGM exporter scrapes and ``nvidia-smi`` CSV, one shape.

Two documented sources:

- NVIDIA's DCGM exporter (or any Prometheus endpoint using its field names): gauges
  ``DCGM_FI_DEV_GPU_UTIL`` (percent of the sample period in which a kernel ran),
  ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` (framebuffer MiB), ``DCGM_FI_DEV_SM_CLOCK``
  (MHz), labelled per device with ``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``.
  Fields a GPU does not support are exported as DCGM's "blank" sentinels (values near 2**63),
  which mean "no value", not a number.
- ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits``: one line per GPU,
  comma-separated in the order asked; unsupported values read ``[N/A]`` or ``[Not Supported]``.

Utilization here is the driver's coarse "busy" fraction, not how much of the compute the kernels
used: a GPU at 100% can still be far from its peak, but one at 60% while requests wait is idle
40% of the time, which is what the "TTFT high, GPU utilization low" row of the article needs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ttft.engines.prometheus import Scrape

DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"
DCGM_SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
# DCGM's blank values (DCGM_INT64_BLANK and its neighbours, DCGM_FP64_BLANK = 1.4e14) stand for
# "not supported / not available"; anything this large is no measurement.
_DCGM_BLANK_FLOOR = 1.0e14

# The query doctor sends to nvidia-smi, in this order (CSV columns come back in it).
NVIDIA_SMI_FIELDS = ("index", "uuid", "utilization.gpu", "memory.used", "memory.total", "clocks.sm")
NVIDIA_SMI_ARGS = (
    f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}",
    "--format=csv,noheader,nounits",
)


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one moment. ``None`` where the source had no value."""

    gpu: str  # the device index as the source names it ("0", "1", ...)
    util_pct: float | None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    sm_clock_mhz: float | None = None
    uuid: str = ""


def _value(raw: float | None) -> float | None:
    if raw is None or math.isnan(raw) or abs(raw) >= _DCGM_BLANK_FLOOR:
        return None
    return raw


def has_dcgm(scrape: Scrape) -> bool:
    return DCGM_UTIL in scrape.names()


def from_dcgm(scrape: Scrape) -> list[GpuReading]:
    """One reading per GPU of a DCGM-exporter scrape (devices keyed by the ``gpu`` label).

    The exporter may add pod/container labels, and repeat a device once per pod using it: the
    first sample of each device wins, as every copy carries the same device value.
    """
    per_gpu: dict[str, dict[str, float | None]] = {}
    uuids: dict[str, str] = {}
    for sample in scrape.samples:
        if sample.name not in (DCGM_UTIL, DCGM_FB_USED, DCGM_FB_FREE, DCGM_SM_CLOCK):
            continue
        labels = dict(sample.labels)
        gpu = labels.get("gpu", labels.get("device", "0"))
        fields = per_gpu.setdefault(gpu, {})
        fields.setdefault(sample.name, _value(sample.value))
        uuids.setdefault(gpu, labels.get("UUID", ""))
    out = []
    for gpu, fields in sorted(per_gpu.items()):
        used, free = fields.get(DCGM_FB_USED), fields.get(DCGM_FB_FREE)
        total = used + free if used is not None and free is not None else None
        out.append(
            GpuReading(
                gpu, fields.get(DCGM_UTIL), used, total, fields.get(DCGM_SM_CLOCK), uuids[gpu]
            )
        )
    return out


def _csv_number(text: str) -> float | None:
    cleaned = text.strip()
    # Units are stripped by ``nounits``; tolerate them anyway (a user's own recording may have
    # been taken with plain ``--format=csv``).
    for unit in (" %", " MiB", " MHz"):
        cleaned = cleaned.removesuffix(unit)
    try:
        return float(cleaned)
    except ValueError:  # "[N/A]", "[Not Supported]", "[Unknown Error]"
        return None


def from_nvidia_smi_csv(text: str) -> list[GpuReading]:
    """Parse the output of ``nvidia-smi`` with ``NVIDIA_SMI_ARGS``; a header line is skipped."""
    out = []
    for line in text.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(NVIDIA_SMI_FIELDS) or cols[0].startswith("index"):
            continue
        index, uuid, util, used, total, clock = cols
        out.append(
            GpuReading(
                index,
                _csv_number(util),
                _csv_number(used),
                _csv_number(total),
                _csv_number(clock),
                uuid,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class GpuWindow:
    """What the GPUs did over one measurement window (one load level)."""

    util_mean_pct: float | None  # mean over samples and GPUs that reported one
    util_max_pct: float | None
    mem_used_peak_mib: float | None
    mem_total_mib: float | None
    sm_clock_mean_mhz: float | None
    samples: int  # readings taken in the window
    distinct: int  # distinct utilization values seen: 1 over many samples suggests a stale source
    gpus: int

    @property
    def mem_used_pct(self) -> float | None:
        if self.mem_used_peak_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * self.mem_used_peak_mib / self.mem_total_mib


def summarize_window(readings: Sequence[Sequence[GpuReading]]) -> GpuWindow | None:
    """Fold the readings taken during one window (a list per sampling instant) into one view."""
    flat = [r for instant in readings for r in instant]
    if not flat:
        return None
    utils = [r.util_pct for r in flat if r.util_pct is not None]
    used = [r.mem_used_mib for r in flat if r.mem_used_mib is not None]
    totals = [r.mem_total_mib for r in flat if r.mem_total_mib is not None]
    clocks = [r.sm_clock_mhz for r in flat if r.sm_clock_mhz is not None]
    return GpuWindow(
        util_mean_pct=statistics.fmean(utils) if utils else None,
        util_max_pct=max(utils) if utils else None,
        mem_used_peak_mib=max(used) if used else None,
        mem_total_mib=max(totals) if totals else None,
        sm_clock_mean_mhz=statistics.fmean(clocks) if clocks else None,
        samples=len(readings),
        distinct=len(set(utils)),
        gpus=len({r.gpu for r in flat}),
    )
