"""vLLM's launcher and installer helpers, without starting vLLM (tests/e2e/vllm starts it)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.engines import control
from ttft.engines.vllm import install, local, make_model


def test_argv_names_every_setting_once() -> None:
    config = local.VllmConfig(
        port=8123,
        max_num_seqs=4,
        max_num_batched_tokens=512,
        prefix_caching=False,
        kv_blocks=36,
        served_model_name="m",
        extra_args=("--seed", "1"),
    )
    argv = local.build_argv(config, "/x/vllm", "/models/m", load_dummy=True)
    assert argv[:3] == ["/x/vllm", "serve", "/models/m"]
    assert argv[argv.index("--max-num-seqs") + 1] == "4"
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == "36"
    assert "--no-enable-prefix-caching" in argv and "--enable-prefix-caching" not in argv
    assert "--load-format" in argv and "--enforce-eager" in argv
    assert argv[-2:] == ["--seed", "1"]


def test_defaults_leave_the_engine_its_own_choices() -> None:
    argv = local.build_argv(local.VllmConfig(), "vllm", "m", load_dummy=False)
    for flag in ("--max-num-seqs", "--max-num-batched-tokens", "--num-gpu-blocks-override"):
        assert flag not in argv
    assert not any("prefix-caching" in a for a in argv)
    assert "--load-format" not in argv


def test_missing_install_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_VLLM_HOME", str(tmp_path))
    with pytest.raises(TtftError) as info:
        local.launch_vllm()
    assert "ttft.engines.vllm.install" in str(info.value)


def test_dist_info_alias_is_read_by_importlib(tmp_path: Path) -> None:
    install.write_vllm_dist_info(tmp_path, "0.32.0+cpu")
    install.write_vllm_dist_info(tmp_path, "0.32.0+cpu")  # a second run replaces the first
    found = importlib.metadata.distributions(path=[str(tmp_path)])
    assert [(d.metadata["Name"], d.version) for d in found] == [("vllm", "0.32.0+cpu")]


def test_engine_env_keeps_ttft_tree_out(monkeypatch: pytest.MonkeyPatch) -> None:
    env = install.engine_env({"PYTHONPATH": "/src", "HOME": "/h"})
    assert "PYTHONPATH" not in env and env["VLLM_TARGET_DEVICE"] == "cpu"


def test_tokenize_body_speaks_both_engines() -> None:
    body = control.tokenize("hi", add_special=True).body
    assert body is not None
    assert body["content"] == body["prompt"] == "hi"
    assert body["add_special"] is body["add_special_tokens"] is True
    assert control.text_of({"prompt": "a"}) == "a" and control.text_of({"content": "b"}) == "b"


def test_model_marker_decides_completeness(tmp_path: Path) -> None:
    assert not make_model.is_complete(tmp_path)
    (tmp_path / make_model.MARKER).write_text(f'{{"layout": {make_model.LAYOUT_VERSION}}}')
    assert make_model.is_complete(tmp_path)


def test_local_model_sizes_share_everything_but_their_shape() -> None:
    """The small model differs from the tiny one only in its layers' shape, so both serve the
    same tokenizer, template and context length."""
    tiny = make_model._config(make_model.MODEL_NAME)
    small = make_model._config(make_model.SMALL_MODEL_NAME)
    shape = set(make_model.SIZES[make_model.MODEL_NAME])
    assert {k: v for k, v in tiny.items() if k not in shape} == {
        k: v for k, v in small.items() if k not in shape
    }
    assert small["num_hidden_layers"] > tiny["num_hidden_layers"]  # type: ignore[operator]
    assert small["hidden_size"] > tiny["hidden_size"]  # type: ignore[operator]


def test_unknown_local_model_is_refused_with_the_choices() -> None:
    with pytest.raises(TtftError, match="no local vLLM model 'big'") as info:
        local.local_model("big")
    assert make_model.SMALL_MODEL_NAME in str(info.value.fix)


def test_each_local_model_has_its_own_folder(tmp_path: Path) -> None:
    assert make_model.model_dir(tmp_path) != make_model.model_dir(
        tmp_path, make_model.SMALL_MODEL_NAME
    )
