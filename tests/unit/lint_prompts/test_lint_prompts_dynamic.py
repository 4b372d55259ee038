"""Detectors of dynamic content: each format the issue names is found, ordinary text is not."""

from __future__ import annotations

import itertools

import pytest

from ttft.prompts.dynamic_content import find_dynamic


def kinds(text: str) -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in find_dynamic(text)]


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("Now: 2026-03-15T14:22:31Z.", "timestamp", "2026-03-15T14:22:31Z"),
        ("at 2026-03-15T14:22:31.123+08:00 sharp", "timestamp", "2026-03-15T14:22:31.123+08:00"),
        ("logged 2026-03-15 14:22:31 by", "timestamp", "2026-03-15 14:22:31"),
        ("Date: Sun, 15 Mar 2026 14:22:31 +0000", "timestamp", "Sun, 15 Mar 2026 14:22:31 +0000"),
        ("ts 1773584551 end", "epoch", "1773584551"),
        ("ms 1773584551123 end", "epoch", "1773584551123"),
        ("今天是2026年3月15日，", "date", "2026年3月15日"),
        ("due 03/15/2026 ok", "date", "03/15/2026"),
        ("due 15.03.2026 ok", "date", "15.03.2026"),
        ("on March 15, 2026 we", "date", "March 15, 2026"),
        ("Today Date: 15 Mar 2026", "date", "Today Date: 15 Mar 2026"),
        ("id 123e4567-e89b-12d3-a456-426614174000", "uuid", "123e4567-e89b-12d3-a456-426614174000"),
        ("see req_8f7a6b5c4d2e now", "request-id", "req_8f7a6b5c4d2e"),
        ("session=ab12cd34ef", "request-id", "session=ab12cd34ef"),
        (
            "trace 4bf92f3577b34da6a3ce929d0e0e4736 x",
            "hex-token",
            "4bf92f3577b34da6a3ce929d0e0e4736",
        ),
        ("key sk-AbCdEf1234567890XyZqWeRtY x", "base64-token", "sk-AbCdEf1234567890XyZqWeRtY"),
        ("This is request #42 today", "counter", "request #42"),
        ("Turn: 7\n", "counter", "Turn: 7"),
        ("User: Alice\nBe nice.", "user-name", "User: Alice"),
        ("The user's name is Bob Smith.", "user-name", "The user's name is Bob Smith"),
    ],
)
def test_each_named_format_is_found_with_its_kind(text: str, kind: str, value: str) -> None:
    assert (kind, value) in kinds(text)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Current time: 2026-03-15 14:22:31", "timestamp"),
        ("current time: 14:22", "time-phrase"),
        ("Today is Sunday.", "time-phrase"),
    ],
)
def test_a_labelled_time_phrase_is_one_span_including_its_label(text: str, kind: str) -> None:
    spans = find_dynamic(text)
    assert len(spans) == 1
    assert spans[0].start == 0 and spans[0].kind == kind


@pytest.mark.parametrize(
    "text",
    [
        "You are a helpful assistant. Answer in English.",
        "Version 1.2.3 was released in 2026.",
        "Call 555-1234 or write to support@example.com.",
        "User: What is 2+2?\nAssistant: 4",  # a few-shot line, not a user's name
        "Knowledge cutoff: December 2023",  # a month and year without a day is not dynamic
        "the hash deadbeefcafebabe is a word of hex letters",
        "ThisIsAVeryLongCamelCaseIdentifierName without digits",
        "Rule 3: be brief.",
    ],
)
def test_static_text_has_no_dynamic_spans(text: str) -> None:
    assert find_dynamic(text) == []


def test_volatility_separates_per_request_values_from_daily_dates() -> None:
    by_kind = {s.kind: s.volatility for s in find_dynamic("2026-03-15T14:22:31Z and 2026-03-16")}
    assert by_kind == {"timestamp": "request", "date": "daily"}


def test_a_date_with_a_time_of_day_changes_per_request() -> None:
    (span,) = find_dynamic("2026年3月15日 14:22")
    assert span.volatility == "request"


def test_spans_are_ordered_and_never_overlap() -> None:
    spans = find_dynamic("Current time: 2026-03-15 14:22:31, session=ab12cd34ef, User: Alice.")
    assert [s.kind for s in spans] == ["timestamp", "request-id", "user-name"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))
