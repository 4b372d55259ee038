"""Slot pinning: short requests take the lowest free llama-server slot (served first in every
batch), long ones the highest, a slot that saw the same prefix is preferred, and the request body
gains ``id_slot`` without being re-serialized."""

from __future__ import annotations

import json

from ttft.gateway.admission.lanes import LONG, SHORT
from ttft.gateway.admission.slot_pins import SlotPins, with_slot


def test_short_requests_take_the_lowest_free_slot_and_long_ones_the_highest() -> None:
    pins = SlotPins(4, reserve=1)
    assert pins.take(LONG) == 3
    assert pins.take(SHORT) == 0
    assert pins.take(LONG) == 2
    assert pins.take(SHORT) == 1
    assert pins.take(SHORT) is None  # all busy: the engine picks
    pins.give_back(0)
    assert pins.take(SHORT) == 0


def test_a_long_request_prefers_the_free_slot_that_served_its_prefix() -> None:
    pins = SlotPins(4, reserve=1)
    assert pins.take(LONG, key=42) == 3
    assert pins.take(LONG, key=7) == 2
    pins.give_back(3)
    pins.give_back(2)
    assert pins.take(LONG, key=7) == 2  # key 7's slot, not the highest free one


def test_a_shared_prefix_key_never_pulls_a_long_request_into_the_reserved_slot() -> None:
    """Every prompt without a system message shares the template header's key: a short request
    in slot 0 must not make the next long one with that key land in slot 0."""
    pins = SlotPins(2, reserve=1)
    assert pins.take(SHORT, key=1) == 0
    pins.give_back(0)
    assert pins.take(LONG, key=1) == 1
    assert pins.take(SHORT, key=1) == 0


def test_long_requests_take_reserved_slots_only_when_nothing_else_is_free() -> None:
    pins = SlotPins(2, reserve=1)
    assert pins.take(SHORT) == 0
    assert pins.take(SHORT) == 1
    pins.give_back(0)
    assert pins.take(LONG) == 0


def test_giving_back_a_slot_twice_or_out_of_range_changes_nothing() -> None:
    pins = SlotPins(2)
    slot = pins.take(SHORT)
    pins.give_back(slot)
    pins.give_back(slot)
    pins.give_back(None)
    pins.give_back(9)
    assert pins.free == 2


def test_with_slot_adds_id_slot_and_keeps_every_other_byte() -> None:
    raw = b'{"model":"m","prompt":"x \\u00e9", "max_tokens":2}'
    out = with_slot(raw, 3)
    assert json.loads(out) == {**json.loads(raw), "id_slot": 3}
    assert out.endswith(raw[1:])


def test_with_slot_on_an_empty_object_and_leading_whitespace() -> None:
    assert json.loads(with_slot(b"{}", 0)) == {"id_slot": 0}
    assert json.loads(with_slot(b"  { }", 1)) == {"id_slot": 1}
