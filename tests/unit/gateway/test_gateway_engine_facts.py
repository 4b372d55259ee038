"""What the gateway reads from an upstream engine besides its answers: the model listing, the
launch command of a loopback engine (its concurrency cap, its model folder) and the template."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from ttft.engines import control
from ttft.engines.local_process import (
    LaunchCommand,
    is_loopback,
    launch_command,
)
from ttft.gateway.app import Gateway
from ttft.gateway.config import GatewayConfig, from_mapping
from ttft.gateway.discover import discover_replica, model_entries
from ttft.gateway.engine_facts import (
    EngineCommandLine,
    concurrency_cap,
    parse_launch,
    template_place,
)
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.runtime import ModelRuntime, Replica, build_runtime


def _runtime(
    engine: str = "vllm", *, model: dict[str, Any] | None = None, **admission: Any
) -> tuple[GatewayConfig, ModelRuntime]:
    table = {"name": "default", "engine": engine, "upstreams": ["http://127.0.0.1:9"]}
    raw = {"model": [{**table, **(model or {})}], "admission": admission}
    config = from_mapping(raw)
    return config, build_runtime(config, config.models[0], GatewayMetrics())


def _line(*argv: str, pid: int = 4242) -> EngineCommandLine:
    line = parse_launch(LaunchCommand(pid, argv))
    assert line is not None
    return line


def _discover(
    runtime: ModelRuntime,
    config: GatewayConfig,
    models: dict[str, Any] | None,
    line: EngineCommandLine | None,
) -> None:
    async def get(replica: Replica, call: control.Call) -> dict[str, Any] | None:
        return models if call.path == "/v1/models" else {}

    async def read(replica: Replica) -> EngineCommandLine | None:
        return line

    asyncio.run(discover_replica(runtime, runtime.replicas[0], config, get, read, retry_s=0))


# -- the model listing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        {},  # a 404 or an answer that is no JSON object
        {"data": "nope"},
        {"data": [1, "x", None, {"no": "id"}, {"id": 7}, {"id": ""}, {"id": "a\nb"}]},
    ],
    ids=["missing", "data-not-a-list", "no-usable-id"],
)
def test_a_missing_or_malformed_listing_names_nothing(answer: dict[str, Any]) -> None:
    config, runtime = _runtime()
    assert model_entries(answer) == {}
    _discover(runtime, config, answer, None)
    assert runtime.engine_names == set() and runtime.listed_names() == ["default"]
    assert runtime.listed.is_set()  # template discovery is not left waiting for it


def test_listing_facts_are_kept_only_when_well_formed() -> None:
    answer = {
        "data": [
            {"id": "m", "root": "/models/m", "max_model_len": 4096},
            {"id": "m", "root": "/other"},  # a repeated id keeps its first entry
            {"id": "n", "root": "x" * 10_000, "max_model_len": True},
            {"id": "o", "root": "bad\x00root", "max_model_len": -1},
        ]
    }
    assert model_entries(answer) == {
        "m": {"root": "/models/m", "max_model_len": 4096},
        "n": {},
        "o": {},
    }


def test_v1_models_lists_the_engines_names_in_place_of_a_placeholder() -> None:
    config, _ = _runtime(model={"name_from_upstream": True})
    gateway = Gateway(config)
    runtime = gateway.models["default"]
    assert runtime.listed_names() == ["default"]  # until an engine answered
    _discover(runtime, config, {"data": [{"id": "b"}, {"id": "a", "max_model_len": 64}]}, None)
    assert runtime.listed_names() == ["b", "a"]  # the engine's order
    body = gateway._models_body()  # the endpoint's body, without a socket
    assert [(m["id"], m.get("max_model_len")) for m in body["data"]] == [("b", None), ("a", 64)]


def test_a_configured_name_is_listed_first_and_shared_names_once() -> None:
    raw = {
        "model": [
            {"name": "chat", "engine": "vllm", "upstreams": ["http://127.0.0.1:9"]},
            {"name": "other", "engine": "vllm", "upstreams": ["http://127.0.0.1:10"]},
        ]
    }
    config = from_mapping(raw)
    gateway = Gateway(config)
    for runtime in gateway.models.values():
        _discover(runtime, config, {"data": [{"id": "llama"}]}, None)
    assert [m["id"] for m in gateway._models_body()["data"]] == ["chat", "llama", "other"]


# -- the launch command and the in-flight cap ------------------------------------------------


def test_the_cap_comes_from_the_engines_launch_command_and_says_so() -> None:
    config, runtime = _runtime()
    replica = runtime.replicas[0]
    assert replica.admission.max_in_flight == 64
    line = _line("/venv/bin/python", "/venv/bin/vllm", "serve", "/m", "--max_num_seqs=8")
    _discover(runtime, config, {"data": [{"id": "m"}]}, line)
    assert replica.admission.max_in_flight == 8 and not replica.cap_from_engine
    assert replica.admission.long_reserve == 1  # recomputed for the new cap
    assert replica.limit_source == "the engine: --max-num-seqs 8 in the launch command of pid 4242"


def test_without_the_flag_the_default_stays_with_one_warning_naming_the_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, runtime = _runtime()
    with caplog.at_level(logging.WARNING, "ttft.gateway"):
        _discover(runtime, config, {"data": []}, _line("vllm", "serve", "/m", "--enforce-eager"))
    replica = runtime.replicas[0]
    assert replica.admission.max_in_flight == 64
    assert replica.limit_source.startswith("the gateway's default for vllm: ")
    assert "has no --max-num-seqs" in replica.limit_source
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "--max-in-flight" in warned[0]


def test_a_configured_cap_wins_over_the_launch_command() -> None:
    config, runtime = _runtime(max_in_flight=3)
    _discover(runtime, config, {"data": []}, _line("vllm", "serve", "/m", "--max-num-seqs", "8"))
    replica = runtime.replicas[0]
    assert replica.admission.max_in_flight == 3
    assert replica.limit_source.startswith("configured")


def test_a_generic_upstream_started_as_vllm_gets_the_vllm_cap() -> None:
    config, runtime = _runtime("openai")
    _discover(runtime, config, {"data": []}, _line("vllm", "serve", "m", "--max-num-seqs", "2"))
    assert runtime.replicas[0].admission.max_in_flight == 2


@pytest.mark.parametrize("value", ["0", "-3", "lots", "99999999"])
def test_odd_cap_values_are_not_used(value: str) -> None:
    assert concurrency_cap(_line("vllm", "serve", "m", "--max-num-seqs", value)) is None


def test_a_command_line_of_no_known_engine_is_none() -> None:
    assert parse_launch(LaunchCommand(1, ("python", "-m", "http.server", "8000"))) is None


@pytest.mark.parametrize(
    ("host", "local"),
    [("127.0.0.1", True), ("127.9.9.9", True), ("localhost", True), ("::1", True),
     ("[::1]", True), ("10.0.0.5", False), ("engine.internal", False)],
)  # fmt: skip
def test_only_loopback_upstreams_are_looked_up(host: str, local: bool) -> None:
    assert is_loopback(host) is local


def test_an_unreadable_proc_is_no_launch_command(tmp_path: Path) -> None:
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text("header\nnot a table line\n 0: 0100007F:1F90 x 0A\n")
    assert launch_command("127.0.0.1", 8080, proc=tmp_path) is None
    assert launch_command("127.0.0.1", 8080, proc=tmp_path / "missing") is None


# -- where the chat template lives ------------------------------------------------------------


def _model_folder(tmp_path: Path, template: str = "{{ bos_token }}{{ messages }}") -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    config = {"bos_token": "<s>", "chat_template": template}
    (folder / "tokenizer_config.json").write_text(__import__("json").dumps(config))
    return folder


def test_the_template_is_the_served_folders_found_by_launch_command_or_listing(
    tmp_path: Path,
) -> None:
    folder = _model_folder(tmp_path)
    place, _ = template_place(_line("vllm", "serve", str(folder)), {})
    assert place is not None and place.path == folder / "tokenizer_config.json"
    place, _ = template_place(None, {"m": {"root": str(folder)}})
    assert place is not None and place.path == folder / "tokenizer_config.json"
    # --tokenizer names the folder the template is read from
    line = _line("vllm", "serve", "org/hub-name", "--tokenizer", str(folder))
    assert template_place(line, {})[0] is not None


def test_a_chat_template_flag_wins_file_or_inline(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path)
    jinja = tmp_path / "t.jinja"
    jinja.write_text("{{ messages }}")
    line = _line("vllm", "serve", str(folder), "--chat-template", str(jinja))
    place, _ = template_place(line, {})
    assert place is not None and place.path == jinja
    place, _ = template_place(_line("vllm", "serve", "m", "--chat-template", "{{ x }}"), {})
    assert place is not None and place.text == "{{ x }}"
    place, why = template_place(_line("vllm", "serve", "m", "--chat-template", "/gone.j2"), {})
    assert place is None and "/gone.j2" in why


@pytest.mark.parametrize(
    ("line", "models", "said"),
    [
        (None, {}, "names no model folder"),
        (None, {"m": {"root": "meta-llama/Llama-3.1-8B"}}, "meta-llama/Llama-3.1-8B"),
        (None, {"m": {"root": "/not/here"}}, "a folder on another machine"),
    ],
    ids=["nothing", "hub-name", "remote-folder"],
)
def test_no_template_found_says_why(
    line: EngineCommandLine | None, models: dict[str, Any], said: str
) -> None:
    place, why = template_place(line, models)
    assert place is None and said in why


# -- pre-rendering for an engine without /props ------------------------------------------------

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _setup(
    monkeypatch: pytest.MonkeyPatch,
    runtime: ModelRuntime,
    config: GatewayConfig,
    engine_template: str | None,
) -> str:
    """Run pre-render setup against a fake vLLM ``/tokenize``: chat messages are rendered with
    ``engine_template`` (None: the endpoint is missing), text is tokenized one id per char."""
    import jinja2

    from ttft.gateway import prerender_setup

    async def fetch(replica: Replica, call: control.Call, timeout_s: float = 5.0) -> Any:
        if engine_template is None or call.path != "/tokenize" or call.body is None:
            return 404, b"{}"
        if "messages" in call.body:
            text = jinja2.Template(engine_template).render(
                messages=call.body["messages"], bos_token="<s>", add_generation_prompt=True
            )
        else:
            assert call.body["add_special_tokens"] is False  # the render carries its own BOS
            text = call.body["prompt"]
        return 200, __import__("json").dumps({"tokens": [ord(c) for c in text]}).encode()

    monkeypatch.setattr(prerender_setup, "fetch", fetch)
    asyncio.run(prerender_setup.setup_prerender(runtime, config, GatewayMetrics(), retry_s=0))
    return runtime.prerender_state


def test_vllm_pre_renders_with_its_model_folders_template_once_tokenize_agrees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _model_folder(tmp_path, TEMPLATE)
    config, runtime = _runtime()
    _discover(runtime, config, {"data": [{"id": "m", "root": str(folder)}]}, None)
    assert _setup(monkeypatch, runtime, config, TEMPLATE) == "on"
    assert runtime.prerenderer is not None


def test_a_template_the_engine_does_not_use_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The folder says one thing, the engine was started with another (--chat-template)."""
    folder = _model_folder(tmp_path, TEMPLATE)
    config, runtime = _runtime()
    _discover(runtime, config, {"data": [{"id": "m", "root": str(folder)}]}, None)
    state = _setup(monkeypatch, runtime, config, TEMPLATE.replace("<|im_start|>", "<|s|>"))
    assert state.startswith("disabled (the template here renders a probe conversation")
    assert runtime.prerenderer is None


def test_a_configured_template_is_checked_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _model_folder(tmp_path, "{{ bos_token }}{{ messages[-1]['content'] }}")
    table = {"chat_template": str(folder / "tokenizer_config.json")}
    config, runtime = _runtime(model=table)
    _discover(runtime, config, {"data": [{"id": "m"}]}, None)
    assert _setup(monkeypatch, runtime, config, TEMPLATE).startswith("disabled (the template")


def test_no_obtainable_template_is_one_clear_off_line_never_a_crash(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config, runtime = _runtime()
    _discover(runtime, config, {"data": [{"id": "m", "root": "org/hub-model"}]}, None)
    with caplog.at_level(logging.WARNING, "ttft.gateway"):
        state = _setup(monkeypatch, runtime, config, TEMPLATE)
    assert state.startswith("disabled (no chat template obtainable from the engine")
    assert "org/hub-model" in state and "--chat-template FILE" in state
    lines = [r.getMessage() for r in caplog.records if "pre-rendering" in r.getMessage()]
    assert len(lines) == 1 and state in lines[0]


def test_an_engine_without_tokenize_cannot_check_so_it_is_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _model_folder(tmp_path, TEMPLATE)
    config, runtime = _runtime()
    _discover(runtime, config, {"data": [{"id": "m", "root": str(folder)}]}, None)
    state = _setup(monkeypatch, runtime, config, None)
    assert state.startswith("disabled (") and "/tokenize" in state


def test_a_configured_template_is_kept_where_the_engine_cannot_be_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The user named it; only a template found on disk needs the engine's confirmation."""
    folder = _model_folder(tmp_path, TEMPLATE)
    config, runtime = _runtime(model={"chat_template": str(folder / "tokenizer_config.json")})
    _discover(runtime, config, {"data": [{"id": "m"}]}, None)
    with caplog.at_level(logging.WARNING, "ttft.gateway"):
        assert _setup(monkeypatch, runtime, config, None) == "on"
    assert any("not checked against the engine" in r.getMessage() for r in caplog.records)


def test_the_cli_without_model_lists_the_upstreams_names() -> None:
    import dataclasses

    from ttft.cli.gateway_options import GatewayCliOptions

    options = GatewayCliOptions(
        None, ("http://127.0.0.1:8000",), None, "vllm", "auto", None, False, False, None, (),
        None, None, None, None, False, None,
    )  # fmt: skip
    (model,) = options.config().models
    assert model.name == "default" and model.name_from_upstream  # "default" is still accepted
    (named,) = dataclasses.replace(options, model="chat").config().models
    assert named.name == "chat" and not named.name_from_upstream


def test_relative_paths_of_the_command_line_are_the_processes_own(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path)
    line = parse_launch(LaunchCommand(5, ("vllm", "serve", "model"), cwd=str(tmp_path)))
    assert line is not None
    place, _ = template_place(line, {})
    assert place is not None and place.path == folder / "tokenizer_config.json"


def test_a_template_found_for_an_engine_that_cannot_confirm_it_is_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _model_folder(tmp_path, TEMPLATE)
    config, runtime = _runtime("sglang")
    line = _line("python", "-m", "sglang.launch_server", "--tokenizer-path", str(folder))
    _discover(runtime, config, {"data": [{"id": "m"}]}, line)
    state = _setup(monkeypatch, runtime, config, TEMPLATE)
    assert state.startswith("disabled (found ") and "cannot confirm" in state
    # a generic upstream that turns out to be vLLM is checked with vLLM's /tokenize
    config, runtime = _runtime("openai")
    _discover(runtime, config, {"data": [{"id": "m"}]}, _line("vllm", "serve", str(folder)))
    assert _setup(monkeypatch, runtime, config, TEMPLATE) == "on"
