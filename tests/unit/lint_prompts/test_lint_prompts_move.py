"""The suggested fixes applied to requests: dynamic lines moved last, static parts canonical."""

from __future__ import annotations

from ttft.prompts.static_prefix import TextPlace
from ttft.prompts.transform import canonical_tools, move_to_end, normalize, static_key
from ttft.workload.request_log import ChatRequest


def request(system: object, user: object = "Question?") -> ChatRequest:
    return ChatRequest([{"role": "system", "content": system}, {"role": "user", "content": user}])


def place_of(req: ChatRequest, needle: str, message: int = 0) -> TextPlace:
    text = req.messages[message]["content"]
    at = text.index(needle)
    return TextPlace(message, None, at, at + len(needle))


def test_the_line_holding_the_value_moves_to_the_end_of_the_last_user_message() -> None:
    req = request("Current time: 2026-03-15 14:22:31\nYou are helpful.\nBe brief.")
    fixed = move_to_end(req, [place_of(req, "2026-03-15 14:22:31")])
    assert fixed.messages[0]["content"] == "You are helpful.\nBe brief."
    assert fixed.messages[1]["content"] == "Question?\n\nCurrent time: 2026-03-15 14:22:31"
    assert req.messages[0]["content"].startswith("Current time")  # the input is not changed


def test_in_a_long_line_only_the_sentence_with_the_value_moves() -> None:
    long_text = (
        "You are a support bot. " * 10 + "The session id is sess_9f8e7d6c5b. " + "Be kind. " * 5
    )
    req = request(long_text.strip())
    fixed = move_to_end(req, [place_of(req, "sess_9f8e7d6c5b")])
    assert "sess_9f8e7d6c5b" not in fixed.messages[0]["content"]
    assert fixed.messages[0]["content"].startswith("You are a support bot.")
    assert fixed.messages[0]["content"].endswith("Be kind.")
    assert fixed.messages[1]["content"].endswith("\n\nThe session id is sess_9f8e7d6c5b.")


def test_several_values_move_in_their_order_and_an_emptied_system_message_is_dropped() -> None:
    req = request("User: Alice\nsession=ab12cd34ef")
    fixed = move_to_end(req, [place_of(req, "session=ab12cd34ef"), place_of(req, "User: Alice")])
    assert [m["role"] for m in fixed.messages] == ["user"]
    assert fixed.messages[0]["content"] == "Question?\n\nUser: Alice\nsession=ab12cd34ef"


def test_list_content_gets_the_moved_text_as_a_new_text_part() -> None:
    req = request(
        [{"type": "text", "text": "Now: 2026-03-15T14:22:31Z\nRules."}],
        [{"type": "text", "text": "Hi"}],
    )
    at = "Now: 2026-03-15T14:22:31Z\nRules.".index("2026")
    fixed = move_to_end(req, [TextPlace(0, 0, at, at + 20)])
    assert fixed.messages[0]["content"] == [{"type": "text", "text": "Rules."}]
    assert fixed.messages[1]["content"][-1] == {
        "type": "text",
        "text": "\n\nNow: 2026-03-15T14:22:31Z",
    }


def test_no_places_means_the_same_request() -> None:
    req = request("static")
    assert move_to_end(req, []) is req


def test_canonical_tools_sort_keys_at_every_level() -> None:
    tools = [{"type": "function", "function": {"parameters": {"b": 1, "a": 2}, "name": "f"}}]
    assert str(canonical_tools(tools)) == (
        "[{'function': {'name': 'f', 'parameters': {'a': 2, 'b': 1}}, 'type': 'function'}]"
    )


def test_normalize_trims_static_messages_but_not_the_last_user_message() -> None:
    req = request("  Rules.   \nMore.  \n", "  keep  ")
    norm = normalize(req)
    assert norm.messages[0]["content"] == "Rules.\nMore."
    assert norm.messages[1]["content"] == "  keep  "


def test_static_key_is_equal_for_requests_equal_after_normalization() -> None:
    a = ChatRequest(
        [{"role": "system", "content": "S "}, {"role": "user", "content": "1"}],
        tools=[{"b": 1, "a": 2}],
    )
    b = ChatRequest(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "2"}],
        tools=[{"a": 2, "b": 1}],
    )
    c = ChatRequest([{"role": "system", "content": "T"}, {"role": "user", "content": "1"}])
    assert static_key(a) == static_key(b) != static_key(c)
