"""Prefix hygiene: dynamic lines leave the system prompt for the end of the last user message."""

from __future__ import annotations

from ttft.prompts.transform import move_dynamic


def test_a_timestamp_line_moves_to_the_end_of_the_last_user_message() -> None:
    messages = [
        {
            "role": "system",
            "content": "You are helpful.\nCurrent time: 2026-03-15 14:22:31\nAnswer in English.",
        },
        {"role": "user", "content": "What day is it?"},
    ]
    moved, kinds = move_dynamic(messages)
    assert kinds == ["timestamp"]
    assert "2026" not in moved[0]["content"]
    assert moved[0]["content"].startswith("You are helpful.\nAnswer in English.")
    assert moved[-1]["content"] == "What day is it?\n\nCurrent time: 2026-03-15 14:22:31"
    assert "2026" in messages[0]["content"]  # the caller's list is not modified


def test_two_requests_that_differ_only_in_ids_share_a_system_prompt_after_the_move() -> None:
    def request(rid: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": f"request_id=req_{rid}\nBe brief."},
            {"role": "user", "content": "hi"},
        ]

    a, _ = move_dynamic(request("a81f93c2d1"))
    b, _ = move_dynamic(request("77bd09e4aa"))
    assert a[0] == b[0] and a[-1] != b[-1]


def test_clean_prompts_and_user_content_are_left_alone() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "It is 2026-03-15 14:22:31 here."},
    ]
    moved, kinds = move_dynamic(messages)
    assert kinds == [] and moved is messages
