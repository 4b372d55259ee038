"""Plan steps set flags on the user's own launch command, whatever spelling it used."""

from __future__ import annotations

from ttft.engines.argv_edit import flag_value, remove_flags, set_flags

LAUNCH = ["llama-server", "-m", "m.gguf", "--parallel=1", "-c", "4096", "-fa", "on", "--metrics"]


def test_a_flag_is_replaced_in_any_spelling_and_appears_once() -> None:
    out = set_flags(LAUNCH, {"-np": "4", "-c": "16384"}, kind="llamacpp")
    assert out == ["llama-server", "-m", "m.gguf", "-fa", "on", "--metrics",
                   "-np", "4", "-c", "16384"]  # fmt: skip
    assert flag_value(out, "--parallel", "llamacpp") == "4"
    assert flag_value(out, "--ctx-size", "llamacpp") == "16384"


def test_unset_removes_switches_optional_values_and_negative_forms() -> None:
    argv = [*LAUNCH, "--no-perf"]
    out = set_flags(argv, {}, ["--metrics", "--flash-attn", "--perf"], kind="llamacpp")
    assert out == ["llama-server", "-m", "m.gguf", "--parallel=1", "-c", "4096"]


def test_a_bare_switch_is_set_without_a_value_and_read_back_as_empty() -> None:
    out = set_flags(["llama-server"], {"--cont-batching": ""}, kind="llamacpp")
    assert out == ["llama-server", "--cont-batching"]
    assert flag_value(out, "--cont-batching", "llamacpp") == ""
    assert flag_value(out, "-np", "llamacpp") is None


def test_flags_an_unknown_engine_does_not_list_are_matched_as_written() -> None:
    argv = ["serve", "--my-flag", "3", "--other", "--keep"]
    assert remove_flags(argv, ["--my-flag", "--other"], None) == ["serve", "--keep"]
