"""The incremental SSE decoder yields the same events however the bytes are split."""

from __future__ import annotations

import pytest

from ttft.client.sse import SseDecoder, SseEvent


def decode_whole(raw: bytes) -> list[SseEvent]:
    decoder = SseDecoder()
    return decoder.feed(raw) + decoder.finish()


def decode_split(raw: bytes, *cuts: int) -> list[SseEvent]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    start = 0
    for cut in (*cuts, len(raw)):
        events += decoder.feed(raw[start:cut])
        start = cut
    return events + decoder.finish()


STREAM = (
    b": keep-alive comment\n"
    b'data: {"choices":[{"delta":{"role":"assistant","content":null}}]}\n\n'
    b"event: error\ndata: first line\ndata: second line\n\n"
    b"id: 7\ndata:no-space\n\n"
    + 'data: {"t":"caf\u00e9 \u2603"}\r\n\r\n'.encode()
    + b"data: [DONE]\n\n"
)
EXPECTED = [
    SseEvent('{"choices":[{"delta":{"role":"assistant","content":null}}]}'),
    SseEvent("first line\nsecond line", event="error"),
    SseEvent("no-space", id="7"),
    SseEvent('{"t":"caf\u00e9 \u2603"}', id="7"),
    SseEvent("[DONE]", id="7"),
]


def test_whole_stream_decodes_comments_multiline_data_event_names_and_ids() -> None:
    assert decode_whole(STREAM) == EXPECTED


def test_any_single_split_point_gives_the_same_events() -> None:
    for cut in range(1, len(STREAM)):
        assert decode_split(STREAM, cut) == EXPECTED, f"split at byte {cut}"


def test_any_pair_of_split_points_gives_the_same_events() -> None:
    for first in range(1, len(STREAM), 3):
        for second in range(first, len(STREAM), 5):
            assert decode_split(STREAM, first, second) == EXPECTED, (first, second)


def test_every_byte_in_its_own_read_gives_the_same_events() -> None:
    assert decode_split(STREAM, *range(1, len(STREAM))) == EXPECTED


def test_events_are_returned_by_the_read_that_completes_them() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\n") == [SseEvent("a")]
    assert decoder.feed(b"data: b\n\ndata: c\n\ndata: d") == [SseEvent("b"), SseEvent("c")]
    assert decoder.feed(b"\n\n") == [SseEvent("d")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_all_three_line_endings_are_line_ends(newline: bytes) -> None:
    raw = b"data: x" + newline + b"data: y" + newline + newline + b"data: z" + newline * 2
    expected = [SseEvent("x\ny"), SseEvent("z")]
    assert decode_whole(raw) == expected
    for cut in range(1, len(raw)):
        assert decode_split(raw, cut) == expected


def test_crlf_split_between_cr_and_lf_is_one_line_end_not_two() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    # Were the "\n" a second line end, this would dispatch "a" with an empty line.
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"\n\r\n") == [SseEvent("a\nb")]


def test_utf8_character_split_across_reads_is_decoded_whole() -> None:
    raw = "data: \u2603\n\n".encode()
    assert decode_split(raw, 7) == [SseEvent("\u2603")]


def test_comment_only_and_empty_events_are_not_dispatched() -> None:
    assert decode_whole(b": ping\n\n:\n\nevent: x\n\n") == []


def test_an_event_missing_its_final_blank_line_is_returned_by_finish() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.finish() == [SseEvent("[DONE]")]


def test_field_without_colon_and_unknown_fields_are_ignored_or_empty() -> None:
    assert decode_whole(b"data\nretry: 10\nfoo: bar\n\n") == [SseEvent("")]


def test_only_one_leading_space_is_stripped_from_a_value() -> None:
    assert decode_whole(b"data:  two spaces\n\n") == [SseEvent(" two spaces")]
