"""Where GPU readings come from during a measurement, and the loop that samples them.

A source is a DCGM exporter (``--gpu-metrics-url``; any Prometheus endpoint with the DCGM names)
or a local ``nvidia-smi``. Sampling runs beside the load, like the engine's gauge sampler: a
reading after the load sees an idle GPU.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ttft.core.errors import TtftError
from ttft.engines.gpu import NVIDIA_SMI_ARGS, GpuReading, from_dcgm, from_nvidia_smi_csv, has_dcgm
from ttft.engines.prometheus import scrape_url

GPU_SAMPLE_S = 0.5  # nvidia-smi itself takes tens of ms; DCGM refreshes its fields slower still


class GpuSource(Protocol):
    """Anything that can read the GPUs now; raises TtftError when it cannot."""

    @property
    def description(self) -> str: ...

    def read(self) -> list[GpuReading]: ...


@dataclass
class DcgmSource:
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def description(self) -> str:
        return f"DCGM metrics at {self.url}"

    def read(self) -> list[GpuReading]:
        scrape = scrape_url(self.url, timeout_s=3.0, headers=self.headers)
        if not has_dcgm(scrape):
            raise TtftError(
                f"{self.url} exports no DCGM_FI_DEV_GPU_UTIL",
                "point --gpu-metrics-url at a DCGM exporter (default port 9400, /metrics)",
            )
        return from_dcgm(scrape)


Runner = Callable[[list[str]], str]


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False)
    if done.returncode != 0:
        raise TtftError(f"{argv[0]} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


@dataclass
class NvidiaSmiSource:
    binary: str
    runner: Runner = _run  # injectable so the parsing is testable without a GPU

    @property
    def description(self) -> str:
        return f"nvidia-smi ({self.binary})"

    def read(self) -> list[GpuReading]:
        try:
            text = self.runner([self.binary, *NVIDIA_SMI_ARGS])
        except (OSError, subprocess.SubprocessError) as exc:
            raise TtftError(f"nvidia-smi could not run: {exc}") from exc
        return from_nvidia_smi_csv(text)


_NOT_SEEN = (
    "GPU utilization, memory and SM clocks were not seen, and the 'TTFT high, GPU utilization "
    "low' check did not run"
)


def find_gpu_source(
    url: str | None,
    *,
    local: bool,
    which: Callable[[str], str | None] = shutil.which,
) -> tuple[GpuSource | None, str]:
    """The source to sample, or why there is none: the URL when given, else nvidia-smi on PATH
    when the service runs on this machine (``local``; a remote service's GPUs are not ours)."""
    if url:
        # No auth headers: the exporter is another service, the API key is not its business.
        return DcgmSource(url), ""
    binary = which("nvidia-smi")
    if binary and local:
        return NvidiaSmiSource(binary), ""
    if binary:
        why = (
            "the service is not on this machine, so this machine's nvidia-smi does not see its GPUs"
        )
    else:
        why = "--gpu-metrics-url not given and nvidia-smi not on PATH"
    return None, (
        f"no GPU telemetry ({why}): {_NOT_SEEN}; give the service's DCGM exporter, e.g. "
        "--gpu-metrics-url http://gpu-node:9400/metrics"
    )


async def track_gpu(
    source: GpuSource,
    readings: list[list[GpuReading]],
    errors: list[str],
    every_s: float = GPU_SAMPLE_S,
) -> None:
    """Append one list of readings per sampling instant until cancelled; errors are kept once."""
    while True:
        try:
            readings.append(await asyncio.to_thread(source.read))
        except TtftError as exc:
            if str(exc) not in errors:
                errors.append(str(exc))
        await asyncio.sleep(every_s)
