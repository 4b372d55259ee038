"""Every command that measures a live service names it with the same options, from one place."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ttft.cli.bench import bench
from ttft.cli.doctor import doctor
from ttft.cli.main import cli
from ttft.core.errors import TtftError

TARGET = {"url", "model", "api_key", "metrics_url", "engine_kind", "headers"}


def _target_params(command: click.Command) -> dict[str, tuple[tuple[str, ...], str | None]]:
    return {p.name: (tuple(p.opts), getattr(p, "help", None)) for p in command.params
            if p.name in TARGET}  # fmt: skip


@pytest.mark.parametrize("command", [bench, doctor], ids=["bench", "doctor"])
def test_the_command_has_every_target_option(command: click.Command) -> None:
    assert set(_target_params(command)) == TARGET


def test_bench_and_doctor_spell_and_explain_them_identically() -> None:
    assert _target_params(bench) == _target_params(doctor)


@pytest.mark.parametrize("command", ["bench", "doctor"])
def test_a_malformed_header_is_a_clear_error_before_anything_is_sent(command: str) -> None:
    result = CliRunner().invoke(
        cli, [command, "--url", "http://127.0.0.1:9", "--header", "no colon here"]
    )
    assert isinstance(result.exception, TtftError)  # main() prints it and exits 2
    assert "is not 'Name: value'" in str(result.exception)


def test_a_url_that_is_not_http_is_refused_with_the_fix() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--url", "ftp://x"])
    assert isinstance(result.exception, TtftError)
    assert "not an http(s) URL" in str(result.exception)


def test_verify_quality_spells_and_explains_its_access_options_as_bench_does() -> None:
    from ttft.cli.verify import quality

    access = {"api_key", "headers"}
    mine = {k: v for k, v in _target_params(quality).items() if k in access}
    assert set(mine) == access
    assert mine == {k: v for k, v in _target_params(bench).items() if k in access}


def test_verify_quality_refuses_a_malformed_header_before_anything_starts() -> None:
    args = ["verify", "quality", "--candidate", "http://127.0.0.1:9", "--header", "no colon"]
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, TtftError)
    assert "is not 'Name: value'" in str(result.exception)
