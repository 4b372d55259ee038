"""Rendering with Hugging Face apply_chat_template semantics, on real model templates."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest

from ttft.core.errors import TtftError
from ttft.prompts.chat_template import ChatTemplate, TemplateRenderer

CLOCK = datetime(2026, 3, 15, 14, 22, 31)
CONVERSATION = [
    {"role": "system", "content": "You are terse.  "},
    {"role": "user", "content": " Hi "},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Weather?"},
]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Wetter in Köln",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def render(text: str, **kwargs: object) -> str:
    return TemplateRenderer(ChatTemplate(text, "t.jinja"), clock=lambda: CLOCK).render(
        [{"role": "user", "content": "x"}],
        **kwargs,  # type: ignore[arg-type]
    )


def test_gemma3_folds_the_system_prompt_into_the_first_user_turn(
    template: Callable[[str], ChatTemplate],
) -> None:
    out = TemplateRenderer(template("gemma3")).render(CONVERSATION)
    assert out == (
        "<bos><start_of_turn>user\nYou are terse.  \n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nWeather?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_gemma3_refuses_roles_out_of_order_with_the_template_line(
    template: Callable[[str], ChatTemplate],
) -> None:
    with pytest.raises(TtftError) as err:
        TemplateRenderer(template("gemma3")).render(
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            where="log.jsonl:7",
        )
    text = str(err.value)
    assert "gemma3.jinja: line 19" in text  # the raise_exception line
    assert "log.jsonl:7" in text and "must alternate" in text


def test_llama3_2_writes_todays_date_from_strftime_now_and_trims_content(
    template: Callable[[str], ChatTemplate],
) -> None:
    out = TemplateRenderer(template("llama3_2"), clock=lambda: CLOCK).render(CONVERSATION)
    assert out == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 15 Mar 2026\n\n"
        "You are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_llama3_2_renders_tools_with_tojson_indent_4_keeping_non_ascii(
    template: Callable[[str], ChatTemplate],
) -> None:
    out = TemplateRenderer(template("llama3_2"), clock=lambda: CLOCK).render(
        CONVERSATION[:2], [WEATHER_TOOL]
    )
    assert "Environment: ipython\n" in out
    assert '{\n    "type": "function",\n    "function": {\n        "name": "get_weather"' in out
    assert '"description": "Wetter in Köln"' in out
    assert out.endswith("Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")


def test_the_llama_server_chatml_fallback_keeps_content_as_sent(
    template: Callable[[str], ChatTemplate],
) -> None:
    out = TemplateRenderer(template("llama_server_chatml")).render(CONVERSATION[:2])
    assert out == (
        "<|im_start|>system\nYou are terse.  <|im_end|>\n"
        "<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n"
    )


def test_add_generation_prompt_false_leaves_the_assistant_header_out(
    template: Callable[[str], ChatTemplate],
) -> None:
    out = TemplateRenderer(template("llama_server_chatml")).render(
        CONVERSATION[:2], add_generation_prompt=False
    )
    assert out.endswith("<|im_end|>\n")


def test_trim_blocks_and_lstrip_blocks_are_on() -> None:
    assert render("  {% if true %}\nA\n  {% endif %}\nB") == "A\nB"


def test_tojson_keeps_non_ascii_and_takes_indent_and_sort_keys() -> None:
    out = render("{{ {'b': 'é', 'a': 1} | tojson(indent=2, sort_keys=True) }}")
    assert out == '{\n  "a": 1,\n  "b": "é"\n}'


def test_tojson_does_not_escape_html_as_jinja_default_would() -> None:
    assert render("{{ '<tag>' | tojson }}") == '"<tag>"'


def test_loop_controls_and_generation_blocks_are_available() -> None:
    out = render(
        "{% for i in [1, 2, 3] %}{% if i == 2 %}{% continue %}{% endif %}{{ i }}{% endfor %}"
        "{% generation %}G{% endgeneration %}"
    )
    assert out == "13G"


def test_special_tokens_and_extra_kwargs_are_template_variables() -> None:
    renderer = TemplateRenderer(
        ChatTemplate("{{ bos_token }}{{ flavour }}", "t", {"bos_token": "<s>"})
    )
    assert renderer.render([], extra={"flavour": "mint"}) == "<s>mint"


def test_strftime_now_reads_the_renderers_clock() -> None:
    assert render("{{ strftime_now('%Y-%m-%d %H:%M') }}") == "2026-03-15 14:22"


def test_the_sandbox_is_immutable_and_its_violation_is_a_clear_error() -> None:
    with pytest.raises(TtftError) as err:
        render("{% set xs = [] %}\n{{ xs.append(1) }}")
    assert "t.jinja: line 2" in str(err.value)


def test_a_syntax_error_names_the_file_and_line() -> None:
    with pytest.raises(TtftError) as err:
        TemplateRenderer(ChatTemplate("ok\n{% for m in messages %}\n{{ m }", "bad.jinja"))
    assert str(err.value).startswith("bad.jinja: line 3: chat template syntax error")


def test_a_missing_variable_attribute_is_an_error_with_the_line_not_a_traceback() -> None:
    with pytest.raises(TtftError) as err:
        render("a\n{{ messages[3].content.upper() }}")
    assert "t.jinja: line 2: the chat template failed" in str(err.value)


def test_without_jinja2_the_lint_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(TtftError) as err:
        TemplateRenderer(ChatTemplate("x", "t.jinja"))
    assert "ttft lint prompts needs the optional 'lint' extra" in str(err.value)
