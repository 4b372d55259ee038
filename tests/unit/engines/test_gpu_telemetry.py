"""GPU readings from dcgm-exporter text and nvidia-smi CSV (tests/data/metrics/README.md says
how each file follows its tool's documented format)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.engines.gpu import (
    NVIDIA_SMI_ARGS,
    from_dcgm,
    from_nvidia_smi_csv,
    has_dcgm,
    summarize_window,
)
from ttft.engines.prometheus import parse_exposition
from ttft.load.gpu_sampler import DcgmSource, NvidiaSmiSource, find_gpu_source

DATA = Path(__file__).parents[2] / "data" / "metrics"


def test_a_dcgm_exporter_scrape_gives_utilization_memory_and_clock() -> None:
    scrape = parse_exposition((DATA / "dcgm_queueing_c32.prom").read_text())
    assert has_dcgm(scrape)
    (gpu,) = from_dcgm(scrape)
    assert gpu.gpu == "0" and gpu.uuid.startswith("GPU-5f3c")
    assert gpu.util_pct == 61
    assert gpu.mem_used_mib == 71842 and gpu.mem_total_mib == 81559  # used + free
    assert gpu.sm_clock_mhz == 1980


def test_dcgm_blank_sentinels_are_no_value() -> None:
    text = (
        (DATA / "dcgm_busy_c1.prom")
        .read_text()
        .replace("DCGM_FI_DEV_GPU_UTIL{gpu", "DCGM_FI_DEV_GPU_UTIL_X{gpu")
    )
    text += (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-5f3c"} 9223372036854775794\n'
        'DCGM_FI_DEV_SM_CLOCK{gpu="1", UUID="GPU-a07e"} 1410\n'
    )
    readings = {r.gpu: r for r in from_dcgm(parse_exposition(text))}
    assert readings["0"].util_pct is None
    assert readings["1"].sm_clock_mhz == 1410 and readings["1"].util_pct is None


def test_a_prometheus_endpoint_without_dcgm_names_is_refused_clearly() -> None:
    assert not has_dcgm(parse_exposition((DATA / "vllm_idle.prom").read_text()))


def test_nvidia_smi_csv_gives_one_reading_per_gpu() -> None:
    readings = from_nvidia_smi_csv((DATA / "nvidia_smi_h100x2.csv").read_text())
    assert [r.gpu for r in readings] == ["0", "1"]
    assert readings[1].util_pct == 59 and readings[1].mem_total_mib == 81559
    window = summarize_window([readings, readings])
    assert window is not None
    assert window.gpus == 2 and window.samples == 2
    assert window.util_mean_pct == pytest.approx(60.0)
    assert window.mem_used_pct == pytest.approx(100 * 71842 / 81559)


def test_nvidia_smi_not_available_values_and_a_header_line() -> None:
    text = "index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], clocks.sm\n"
    text += (DATA / "nvidia_smi_mig.csv").read_text()
    (reading,) = from_nvidia_smi_csv(text)
    assert reading.util_pct is None and reading.mem_used_mib == 19456
    assert summarize_window([[reading]]) is not None


def test_nvidia_smi_source_asks_for_the_documented_query() -> None:
    seen: list[list[str]] = []

    def runner(argv: list[str]) -> str:
        seen.append(argv)
        return (DATA / "nvidia_smi_h100x2.csv").read_text()

    source = NvidiaSmiSource("/usr/bin/nvidia-smi", runner)
    assert len(source.read()) == 2
    assert seen[0][1:] == list(NVIDIA_SMI_ARGS)
    assert "--format=csv,noheader,nounits" in seen[0]

    def broken(argv: list[str]) -> str:
        raise OSError("No devices were found")

    with pytest.raises(TtftError, match="nvidia-smi"):
        NvidiaSmiSource("/usr/bin/nvidia-smi", broken).read()


def test_which_gpu_source_and_why_none() -> None:
    source, why = find_gpu_source("http://gpu:9400/metrics", local=False)
    assert isinstance(source, DcgmSource) and why == ""
    source, why = find_gpu_source(None, local=True, which=lambda _: "/usr/bin/nvidia-smi")
    assert isinstance(source, NvidiaSmiSource)
    source, why = find_gpu_source(None, local=False, which=lambda _: "/usr/bin/nvidia-smi")
    assert source is None and "not on this machine" in why
    source, why = find_gpu_source(None, local=True, which=lambda _: None)
    assert source is None and "--gpu-metrics-url" in why and "utilization" in why
