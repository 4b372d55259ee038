"""Where templates and requests come from, and what a user sees when one is malformed."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.prompts.sources import load_template, template_from_props
from ttft.workload.request_log import load_request_log, load_sample

TEMPLATES = Path(__file__).resolve().parents[2] / "data" / "templates"


def _gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_gguf(path: Path, kv: list[tuple[str, int, bytes]]) -> Path:
    """A metadata-only GGUF v3: magic, version, 0 tensors, then the given key/values."""
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for key, vtype, value in kv:
        body += _gguf_string(key) + struct.pack("<I", vtype) + value
    path.write_bytes(body)
    return path


def _tokens_array(tokens: list[str]) -> bytes:
    return struct.pack("<IQ", 8, len(tokens)) + b"".join(_gguf_string(t) for t in tokens)


def test_a_jinja_file_is_read_as_the_template_with_its_path(tmp_path: Path) -> None:
    t = load_template(TEMPLATES / "gemma3.jinja")
    assert t.source.startswith("{{ bos_token }}")
    assert t.path == str(TEMPLATES / "gemma3.jinja")


def test_tokenizer_config_gives_template_and_special_tokens_in_either_spelling(
    tmp_path: Path,
) -> None:
    config = {
        "chat_template": (TEMPLATES / "gemma3.jinja").read_text(),
        "bos_token": "<bos>",
        "eos_token": {"content": "<eos>", "lstrip": False},  # AddedToken form
    }
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps(config))
    t = load_template(path)
    assert t.special_tokens == {"bos_token": "<bos>", "eos_token": "<eos>"}
    assert t.origin.endswith("tokenizer_config.json (chat_template)")


def test_named_templates_in_tokenizer_config_are_picked_by_name(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer_config.json"
    path.write_text(
        json.dumps(
            {
                "chat_template": [
                    {"name": "default", "template": "D"},
                    {"name": "tool_use", "template": "T"},
                ]
            }
        )
    )
    assert load_template(path).source == "D"
    assert load_template(path, "tool_use").source == "T"
    with pytest.raises(TtftError, match=r"no chat template named 'rag'.*default, tool_use"):
        load_template(path, "rag")


def test_tokenizer_config_without_template_uses_chat_template_jinja_beside_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(TtftError, match="no chat_template field"):
        load_template(tmp_path / "tokenizer_config.json")
    (tmp_path / "chat_template.jinja").write_text("J")
    assert load_template(tmp_path / "tokenizer_config.json").source == "J"


def test_broken_tokenizer_config_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer_config.json"
    path.write_text('{\n  "chat_template": "x",\n  oops\n}')
    with pytest.raises(TtftError, match=r"tokenizer_config.json:3: not valid JSON"):
        load_template(path)


def test_gguf_metadata_gives_the_template_and_bos_eos_texts(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "m.gguf",
        [
            ("general.architecture", 8, _gguf_string("gemma3")),
            ("general.file_type", 4, struct.pack("<I", 15)),
            ("tokenizer.ggml.tokens", 9, _tokens_array(["<pad>", "<eos>", "<bos>", "hi"])),
            ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 4) + b"\0" * 16),
            ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 2)),
            ("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 1)),
            ("tokenizer.chat_template", 8, _gguf_string("{{ bos_token }}{{ messages }}")),
        ],
    )
    t = load_template(path)
    assert t.source == "{{ bos_token }}{{ messages }}"
    assert t.special_tokens == {"bos_token": "<bos>", "eos_token": "<eos>"}
    assert t.origin.endswith("m.gguf (tokenizer.chat_template)")


def test_a_gguf_without_template_says_llama_server_falls_back_and_what_to_do(
    tmp_path: Path,
) -> None:
    path = write_gguf(tmp_path / "m.gguf", [("general.architecture", 8, _gguf_string("gemma3"))])
    with pytest.raises(TtftError) as err:
        load_template(path)
    assert "no tokenizer.chat_template" in str(err.value)
    assert "GET /props" in str(err.value)


def test_a_file_that_is_not_gguf_or_is_truncated_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"NOPE" + b"\0" * 20)
    with pytest.raises(TtftError, match=r"not a readable GGUF file: .*GGUF magic"):
        load_template(tmp_path / "x.gguf")
    good = write_gguf(tmp_path / "t.gguf", [("tokenizer.chat_template", 8, _gguf_string("x" * 50))])
    (tmp_path / "cut.gguf").write_bytes(good.read_bytes()[:-20])
    with pytest.raises(TtftError, match="not a readable GGUF file") as err:
        load_template(tmp_path / "cut.gguf")
    assert "cut.gguf" in str(err.value)


def test_a_missing_template_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TtftError, match="chat template file not found"):
        load_template(tmp_path / "nope.jinja")


def test_the_request_log_keeps_file_and_line_and_skips_blank_lines(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        json.dumps({"messages": [{"role": "user", "content": "a"}]})
        + "\n\n"
        + json.dumps(
            {"messages": [{"role": "user", "content": "b"}], "tools": [{"type": "function"}]}
        )
        + "\n"
    )
    first, second = load_request_log(log)
    assert (first.line, second.line) == (1, 3)
    assert second.where == f"{log}:3"
    assert second.tools == [{"type": "function"}]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"messages": [', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"prompt": "hi"}', "no 'messages' list"),
        ('{"messages": [{"content": "x"}]}', "messages[0] is not an object with a string 'role'"),
        ('{"messages": [{"role": "user", "content": 5}]}', "messages[0].content is int"),
        ('{"messages": [{"role": "user", "content": "x"}], "tools": {}}', "'tools' must be a list"),
    ],
)
def test_a_malformed_log_line_is_reported_as_file_colon_line(
    tmp_path: Path, line: str, message: str
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        json.dumps({"messages": [{"role": "user", "content": "ok"}]}) + "\n" + line + "\n"
    )
    with pytest.raises(TtftError) as err:
        load_request_log(log)
    assert str(err.value).startswith(f"{log}:2: ")
    assert message in str(err.value)


def test_an_empty_log_is_an_error_not_an_empty_report(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(TtftError, match="holds no requests"):
        load_request_log(tmp_path / "empty.jsonl")


def test_a_sample_is_a_chat_body_or_a_bare_list_of_messages(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    (tmp_path / "b.json").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    assert load_sample(tmp_path / "a.json").messages == load_sample(tmp_path / "b.json").messages
    assert load_sample(tmp_path / "a.json").line is None


def test_a_props_answer_gives_the_template_its_string_special_tokens_and_the_server() -> None:
    props = {"chat_template": "{{ messages }}", "bos_token": "<s>", "eos_token": 7, "x": "y"}
    t = template_from_props(props, "http://h:8080")
    assert t is not None
    assert t.source == "{{ messages }}"
    assert t.special_tokens == {"bos_token": "<s>"}  # a non-string token is not a token text
    assert t.origin == "GET http://h:8080/props (chat_template)"


@pytest.mark.parametrize("props", [{}, {"chat_template": ""}, {"chat_template": None}])
def test_a_props_answer_without_a_template_gives_none(props: dict[str, object]) -> None:
    assert template_from_props(props, "http://h") is None
