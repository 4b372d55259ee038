"""`ttft doctor --gpu-metrics-url` reaches the options doctor runs with, and its help says what
it reads and what doctor falls back to."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from ttft.cli.doctor import doctor
from ttft.doctor.options import DoctorOptions


def test_the_gpu_metrics_url_is_passed_through(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[DoctorOptions] = []

    def execute(options: DoctorOptions) -> None:
        seen.append(options)

    monkeypatch.setattr("ttft.cli.doctor_run.execute", execute)
    url = "http://gpu-node:9400/metrics"
    result = CliRunner().invoke(doctor, ["--url", "http://x:8000", "--gpu-metrics-url", url])
    assert result.exit_code == 0, result.output
    assert seen[0].gpu_metrics_url == url


def test_the_help_names_dcgm_and_the_nvidia_smi_fallback() -> None:
    text: Any = CliRunner().invoke(doctor, ["--help"]).output
    assert "--gpu-metrics-url" in text and "DCGM" in text and "nvidia-smi" in text
