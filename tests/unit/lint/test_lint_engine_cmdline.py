"""Parsing engine command lines: launchers, spellings, values, environment, files.

Command lines are quoted from where they were published (named above each), so the parser is
tested on what people actually type.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.engines.cmdline import (
    command_from_file,
    parse,
    tokens_from_argv,
    tokens_from_text,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "engine"

# The seed article, round 2 (../shared/seed, DIGEST.md section 3).
ARTICLE_VLLM = (
    "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.88 "
    "--enable-prefix-caching --enable-chunked-prefill --max-num-batched-tokens 2048 "
    "--max-num-seqs 64"
)
# vLLM's OpenAI-compatible server docs, the module form.
VLLM_MODULE = "python -m vllm.entrypoints.openai.api_server --model facebook/opt-125m"
# SGLang's README quick start.
SGLANG_README = (
    "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B-Instruct "
    "--host 0.0.0.0 --port 30000"
)
# llama.cpp tools/server/README.md, Docker section.
LLAMA_DOCKER = (
    "docker run -p 8080:8080 -v /path/to/models:/models ghcr.io/ggml-org/llama.cpp:server "
    "-m models/7B/ggml-model.gguf -c 512 --host 0.0.0.0 --port 8080"
)
# A public run script (lum7671/Scripts run_llvm_coder.zsh): old bare -fa and -dt.
LLAMA_SCRIPT = (
    "llama-server -hf ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF --port 8012 -ngl 99 -fa -ub 1024 "
    "-b 1024 -dt 0.1 --ctx-size 0 --cache-reuse 256"
)


def _parse(text: str, engine: str | None = None):  # type: ignore[no-untyped-def]
    return parse(tokens_from_text(text), engine)


def test_article_vllm_command_parses_every_flag() -> None:
    cmd = _parse(ARTICLE_VLLM)
    assert cmd.engine == "vllm"
    assert [p.text for p in cmd.positionals] == ["meta-llama/Llama-3.1-8B-Instruct"]
    assert cmd.value("gpu-memory-utilization") == "0.88"
    assert cmd.value("enable-prefix-caching") == "true"
    assert cmd.value("max-num-batched-tokens") == "2048"
    assert all(a.spec is not None for a in cmd.args)


def test_vllm_module_form_and_negative_booleans() -> None:
    cmd = _parse(VLLM_MODULE + " --no-enable-prefix-caching --max_num_seqs=8")
    assert cmd.engine == "vllm"
    assert cmd.value("model") == "facebook/opt-125m"
    assert cmd.value("enable-prefix-caching") == "false"
    assert cmd.value("max-num-seqs") == "8"  # underscores and --flag=value, as vLLM accepts


def test_sglang_readme_command_and_argparse_prefixes() -> None:
    cmd = _parse(SGLANG_README + " --tp 2 --chunked-prefill-size -1")
    assert cmd.engine == "sglang"
    assert cmd.value("model-path") == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert cmd.value("tp-size") == "2"  # argparse accepts the unambiguous prefix --tp
    assert cmd.value("chunked-prefill-size") == "-1"  # a negative number is a value


def test_sglang_serve_entry_point() -> None:
    assert _parse("sglang serve --model-path m --disable-radix-cache").engine == "sglang"


def test_llama_docker_image_arguments_are_the_servers() -> None:
    cmd = _parse(LLAMA_DOCKER)
    assert cmd.engine == "llamacpp"
    assert cmd.value("model") == "models/7B/ggml-model.gguf"
    assert cmd.value("ctx-size") == "512"


def test_llama_short_and_long_spellings_map_to_one_flag() -> None:
    for spelling in ("-ngl", "--n-gpu-layers", "--gpu-layers"):
        assert _parse(f"llama-server -m m.gguf {spelling} 33").value("n-gpu-layers") == "33"


def test_bare_fa_of_older_builds_has_no_value() -> None:
    cmd = _parse(LLAMA_SCRIPT)
    fa = cmd.get("flash-attn")
    assert fa is not None and fa.value is None
    assert cmd.value("ubatch-size") == "1024"  # the flag after a bare -fa is not swallowed


def test_fa_with_a_value_takes_it() -> None:
    assert _parse("llama-server -m m.gguf -fa off").value("flash-attn") == "off"


def test_llama_negative_switches() -> None:
    cmd = _parse("llama-server -m m.gguf -nocb --no-cache-prompt -nkvo")
    assert cmd.value("cont-batching") == "false"
    assert cmd.value("cache-prompt") == "false"
    assert cmd.value("kv-offload") == "false"


def test_environment_prefix_is_read_and_llama_env_flags_apply() -> None:
    cmd = _parse("CUDA_VISIBLE_DEVICES=0 LLAMA_ARG_N_GPU_LAYERS=99 llama-server -m m.gguf")
    assert cmd.env_value("CUDA_VISIBLE_DEVICES") == "0"
    assert cmd.value("n-gpu-layers") == "99"


def test_command_line_flag_wins_over_llama_env() -> None:
    cmd = _parse("LLAMA_ARG_N_PARALLEL=8 llama-server -m m.gguf -np 2")
    assert cmd.value("parallel") == "2"


def test_unknown_flags_are_kept_with_a_guessed_value() -> None:
    cmd = _parse("vllm serve m --brand-new-flag 7 --other-switch --max-num-seqs 4")
    unknown = [a for a in cmd.args if a.spec is None]
    assert [(a.flag, a.value) for a in unknown] == [
        ("--brand-new-flag", "7"),
        ("--other-switch", None),
    ]
    assert cmd.value("max-num-seqs") == "4"


def test_the_last_occurrence_wins() -> None:
    assert _parse("vllm serve m --max-num-seqs 8 --max-num-seqs 16").value("max-num-seqs") == "16"


def test_one_quoted_argument_is_split_like_a_shell() -> None:
    tokens = tokens_from_argv(["vllm serve 'my model' --max-num-seqs 8"])
    assert [t.text for t in tokens] == ["vllm", "serve", "my model", "--max-num-seqs", "8"]


def test_forced_engine_accepts_a_wrapper_launcher() -> None:
    cmd = parse(tokens_from_text("./run-engine.sh --max-num-seqs 8"), "vllm")
    assert cmd.engine == "vllm" and cmd.value("max-num-seqs") == "8"


def test_forced_llama_engine_keeps_its_m_flag() -> None:
    cmd = parse(tokens_from_text("/opt/bin/my-llama -m model.gguf -np 2"), "llamacpp")
    assert cmd.value("model") == "model.gguf"


def test_unrecognised_launcher_is_a_user_error_naming_the_fix() -> None:
    with pytest.raises(TtftError, match="cannot tell which engine") as info:
        _parse("text-generation-launcher --model-id x")
    assert "--engine" in str(info.value)


def test_empty_and_unbalanced_quotes_are_user_errors() -> None:
    with pytest.raises(TtftError, match="empty command line"):
        parse([])
    with pytest.raises(TtftError, match="check the quotes"):
        tokens_from_text("vllm serve 'unterminated")


def test_shell_script_tokens_keep_their_lines() -> None:
    tokens, source = command_from_file(DATA / "start-vllm.sh")
    cmd = parse(tokens, None, source)
    assert cmd.engine == "vllm"
    eager = cmd.get("enforce-eager")
    assert eager is not None and eager.token.line == 15
    assert cmd.location(eager.token).display().endswith("start-vllm.sh:15")


def test_dockerfile_cmd_is_found_after_the_from_line() -> None:
    tokens, _ = command_from_file(DATA / "Dockerfile.llama")
    cmd = parse(tokens)
    assert cmd.engine == "llamacpp"
    fa = cmd.get("flash-attn")
    assert fa is not None and fa.value == "off" and fa.token.line == 6


def test_dockerfile_exec_form_is_json(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text('FROM vllm/vllm-openai\nCMD ["vllm", "serve", "m", "--enforce-eager"]\n')
    tokens, _ = command_from_file(path)
    assert [t.text for t in tokens] == ["vllm", "serve", "m", "--enforce-eager"]
    assert tokens[0].line == 2


def test_file_without_a_launch_command_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "start.sh"
    path.write_text("echo hello\n")
    with pytest.raises(TtftError, match="no vllm, sglang or llama-server command"):
        command_from_file(path)
    with pytest.raises(TtftError, match="no such file"):
        command_from_file(tmp_path / "missing.sh")
