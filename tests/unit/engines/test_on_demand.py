"""One way to size and start the embedded engine when a command has no --url."""

from __future__ import annotations

from ttft.core.target import Target
from ttft.engines.llamacpp.on_demand import (
    EMBEDDED_SLOTS,
    EmbeddedSize,
    context_for,
    target_or_embedded,
)


def test_the_context_gives_every_slot_its_tokens_in_whole_kib() -> None:
    assert context_for(1536) == 1536 * EMBEDDED_SLOTS  # 6144: already whole
    assert context_for(1000) == 4096
    assert context_for(1025, slots=1) == 2048
    assert context_for(100, slots=2) == 1024


def test_the_start_line_names_slots_context_and_extra_flags() -> None:
    size = EmbeddedSize(8192, extra_args=("--swa-full",))
    assert size.describe() == "llama-server, Gemma 3 270M, 4 slots, context 8192 --swa-full"


def test_a_given_target_is_used_as_is_and_nothing_is_sized_or_started() -> None:
    asked: list[str] = []

    def size() -> EmbeddedSize:
        asked.append("size")
        return EmbeddedSize(1024)

    given = Target("http://127.0.0.1:9", api_key="k")
    with target_or_embedded(
        given, size, complete=False, on_start=lambda s: asked.append("start")
    ) as served:
        assert served.target is given and served.engine is None
    assert asked == []
