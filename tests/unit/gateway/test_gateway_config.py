"""Configuration: every key is checked, typos and bad values are errors that name the key."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.gateway.config import (
    TOP_KEYS,
    AdmissionConfig,
    LimitsConfig,
    ModelConfig,
    RoutingConfig,
    UpstreamConfig,
    from_mapping,
    load,
    parse_listen,
)

MINIMAL = {"model": [{"name": "m", "upstreams": ["http://127.0.0.1:8080"]}]}


def test_a_minimal_config_gets_the_documented_defaults() -> None:
    config = from_mapping(MINIMAL)
    assert (config.host, config.port) == ("127.0.0.1", 8000)
    assert config.api_keys == ()
    assert config.admission.max_in_flight is None and config.admission.split_lanes  # the engine's
    model = config.models[0]
    assert model.prerender and model.chat_template == "auto" and not model.hygiene
    assert model.upstreams[0].url == "http://127.0.0.1:8080"


def test_the_example_config_in_examples_loads() -> None:
    root = Path(__file__).resolve().parents[3]
    config = load(root / "examples" / "gateway.toml")
    assert config.models and all(m.upstreams for m in config.models)


def test_every_key_the_config_accepts_is_shown_in_the_example() -> None:
    """A new key must be documented in examples/gateway.toml (set, or commented out)."""
    root = Path(__file__).resolve().parents[3]
    text = (root / "examples" / "gateway.toml").read_text(encoding="utf-8")
    tables = set(re.findall(r"(?m)^#?\s*\[+([a-z_]+)\]+", text))
    shown = set(re.findall(r"(?m)^\s*#?\s*([a-z_]+)\s*=", text))
    shown |= set(re.findall(r"[{,]\s*([a-z_]+)\s*=", text))  # inline tables
    sections = {
        "admission": AdmissionConfig,
        "routing": RoutingConfig,
        "limits": LimitsConfig,
        "model": ModelConfig,
        "upstream": UpstreamConfig,
    }
    missing = [f"top.{key}" for key in TOP_KEYS if key not in shown | tables]
    missing += [
        f"{where}.{f.name}"
        for where, cls in sections.items()
        for f in fields(cls)
        if f.name not in shown
    ]
    assert not missing, f"not in examples/gateway.toml: {missing}"


def test_upstreams_mix_urls_and_tables_and_lose_a_trailing_v1(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        'listen = "0.0.0.0:9000"\n'
        "[admission]\nmax_in_flight = 2\nqueue_timeout_s = 5\n"
        '[[model]]\nname = "a"\n'
        'upstreams = ["http://h1:8080/v1/", { url = "http://h2:8080", prerender = false, '
        "max_in_flight = 1 }]\n"
    )
    config = load(path)
    assert (config.host, config.port) == ("0.0.0.0", 9000)
    ups = config.models[0].upstreams
    assert [u.url for u in ups] == ["http://h1:8080", "http://h2:8080"]
    assert ups[1].prerender is False and ups[1].max_in_flight == 1
    assert config.admission.queue_timeout_s == 5.0


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({**MINIMAL, "lisen": "x"}, "unknown key(s) lisen"),
        ({"model": []}, "no [[model]]"),
        ({"model": [{"name": "m"}]}, "missing upstreams"),
        ({"model": [{"upstreams": ["http://h:1"]}]}, "missing name"),
        ({"model": [{"name": "m", "upstreams": ["ftp://h:1"]}]}, "not an http(s) URL"),
        ({"model": [{"name": "m", "upstreams": ["http://h:1", "http://h:1/v1"]}]}, "twice"),
        ({"model": [{"name": "m", "upstreams": ["http://h:1"], "engine": "x"}]}, "unknown engine"),
        (
            {"model": [{"name": "m", "upstreams": ["http://h:1"], "prerender": "yes"}]},
            "expected true or false",
        ),
        ({**MINIMAL, "admission": {"max_in_flight": 0}}, "at least 1"),
        ({**MINIMAL, "admission": {"queue_size": -1}}, "whole number"),
        ({**MINIMAL, "admission": {"quue_size": 3}}, "unknown key 'quue_size'"),
        ({**MINIMAL, "routing": {"load_factor": 0.5}}, "at least 1.0"),
        ({**MINIMAL, "api_keys": ["", "k"]}, "non-empty strings"),
        ({**MINIMAL, "listen": "localhost"}, "not host:port"),
        ({"model": [MINIMAL["model"][0], MINIMAL["model"][0]]}, "same name"),
    ],
)
def test_bad_configs_name_the_problem(raw: dict[str, object], needle: str) -> None:
    with pytest.raises(TtftError) as info:
        from_mapping(raw)
    assert needle in str(info.value)


def test_api_keys_come_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_KEYS", "k1, k2,,")
    config = from_mapping({**MINIMAL, "api_keys": ["k0"], "api_keys_env": "GW_KEYS"})
    assert config.api_keys == ("k0", "k1", "k2")
    monkeypatch.delenv("GW_KEYS")
    with pytest.raises(TtftError, match="GW_KEYS is not set"):
        from_mapping({**MINIMAL, "api_keys_env": "GW_KEYS"})


def test_invalid_toml_points_at_the_line(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text("[[model]]\nname = \n")
    with pytest.raises(TtftError, match="not valid TOML"):
        load(path)
    with pytest.raises(TtftError, match="cannot read"):
        load(tmp_path / "missing.toml")


def test_listen_addresses_parse_with_ipv6_brackets() -> None:
    assert parse_listen("[::1]:8000") == ("::1", 8000)
    assert parse_listen(":8000") == ("127.0.0.1", 8000)


def test_the_long_reserve_defaults_to_one_slot_from_the_file_and_the_flag() -> None:
    from ttft.cli.gateway_options import GatewayCliOptions
    from ttft.gateway.metrics import GatewayMetrics
    from ttft.gateway.runtime import build_runtime

    raw = {
        "model": [
            {
                "name": "m",
                "upstreams": [
                    "http://127.0.0.1:8080",
                    {"url": "http://127.0.0.1:8081", "max_in_flight": 1},
                    {"url": "http://127.0.0.1:8082", "max_in_flight": 8},
                ],
            }
        ]
    }
    config = from_mapping(raw)
    assert config.admission.long_reserve is None
    reserves = [
        r.admission.long_reserve
        for r in build_runtime(config, config.models[0], GatewayMetrics()).replicas
    ]
    assert reserves == [1, 0, 1]  # one slot kept for short prompts; none possible with one slot
    config = from_mapping({**raw, "admission": {"long_reserve": 3}})
    assert [
        r.admission.long_cap
        for r in build_runtime(config, config.models[0], GatewayMetrics()).replicas
    ] == [1, 1, 5]
    options = GatewayCliOptions(
        config_path=None,
        upstreams=("http://127.0.0.1:8080",),
        model="m",
        engine="llamacpp",
        chat_template="auto",
        tokenizer=None,
        no_prerender=False,
        hygiene=False,
        listen=None,
        api_keys=(),
        api_key_env=None,
        max_in_flight=None,
        queue_size=None,
        long_prompt_tokens=None,
        no_lanes=False,
        queue_timeout=None,
        long_reserve=2,
    )
    assert options.config().admission.long_reserve == 2
