from __future__ import annotations

import pytest

from ttft.core.errors import TtftError
from ttft.engines.cmdline import parse, tokens_from_argv
from ttft.tune.space import (
    config_id,
    configurations,
    default_space,
    engine_args,
    launch_command,
    parse_space,
)


def test_configurations_vary_the_last_flag_fastest() -> None:
    space = parse_space(["-np=1,2,4", "-ub=128,512"])
    configs = configurations(space)
    assert len(configs) == 6
    assert configs[0] == {"-np": "1", "-ub": "128"}
    assert configs[1] == {"-np": "1", "-ub": "512"}
    assert configs[-1] == {"-np": "4", "-ub": "512"}


def test_config_id_is_stable_and_ignores_key_order() -> None:
    a = config_id({"-np": "2", "-ub": "128"}, {"slos": ["ttft:p99<600ms"]})
    b = config_id({"-ub": "128", "-np": "2"}, {"slos": ["ttft:p99<600ms"]})
    assert a == b and len(a) == 12
    assert a != config_id({"-np": "2", "-ub": "512"}, {"slos": ["ttft:p99<600ms"]})
    assert a != config_id({"-np": "2", "-ub": "128"}, {"slos": ["ttft:p99<900ms"]})


def test_bad_param_text_is_a_clear_error() -> None:
    with pytest.raises(TtftError, match="FLAG=V1,V2"):
        parse_space(["-np"])


def test_default_spaces_come_from_the_adapters_with_dashes() -> None:
    vllm = default_space("vllm")
    assert vllm["--max-num-batched-tokens"] == ("1024", "2048", "4096")
    assert "--max-num-seqs" in vllm and "--enable-chunked-prefill" in vllm
    assert set(default_space("sglang")) >= {
        "--chunked-prefill-size",
        "--max-running-requests",
        "--mem-fraction-static",
        "--schedule-policy",
    }
    assert set(default_space("llamacpp")) >= {"-np", "-b", "-ub", "-fa", "-ctk", "-ctv"}


def test_vllm_argv_from_the_space() -> None:
    config = {
        "--max-num-batched-tokens": "2048",
        "--max-num-seqs": "64",
        "--enable-chunked-prefill": "off",
        "--enable-prefix-caching": "on",
        "--kv-cache-dtype": "fp8",
    }
    argv = launch_command("vllm", ["vllm", "serve", "Qwen/Qwen3-8B"], config)
    assert argv == [
        "vllm", "serve", "Qwen/Qwen3-8B",
        "--max-num-batched-tokens", "2048",
        "--max-num-seqs", "64",
        "--no-enable-chunked-prefill",
        "--enable-prefix-caching",
        "--kv-cache-dtype", "fp8",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "base"),
    [("vllm", ["vllm", "serve", "m"]), ("sglang", ["python", "-m", "sglang.launch_server"])],
)
def test_every_default_configuration_parses_back_to_its_own_settings(
    kind: str, base: list[str]
) -> None:
    """The argv each default configuration produces is read back by the engine's own flag
    table (the one lint uses): every flag known and current, every value as configured."""
    for config in configurations(default_space(kind)):
        argv = launch_command(kind, base, config)
        command = parse(tokens_from_argv(argv), kind)
        parsed = {arg.spec.canonical: arg.value for arg in command.args if arg.spec}
        assert all(arg.spec is not None and arg.spec.status == "current" for arg in command.args)
        for flag, value in config.items():
            expected = {"on": "true", "off": "false"}.get(value, value)
            assert parsed[flag.lstrip("-")] == expected, (flag, argv)


def test_sglang_and_tgi_argv_from_the_space() -> None:
    argv = engine_args(
        "sglang",
        {"--chunked-prefill-size": "4096", "--schedule-policy": "lpm"},
    )
    assert argv == ["--chunked-prefill-size", "4096", "--schedule-policy", "lpm"]
    tgi = engine_args("tgi", {"--max-batch-prefill-tokens": "4096"})
    assert tgi == ["--max-batch-prefill-tokens", "4096"]


def test_a_switch_needs_on_or_off() -> None:
    with pytest.raises(TtftError, match="on or off"):
        engine_args("vllm", {"--enable-chunked-prefill": "2048"})
