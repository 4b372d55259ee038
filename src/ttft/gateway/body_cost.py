"""What a request body will cost to parse, read from its bytes before it is parsed.

A client chooses the shape of its body, and the shape sets the cost: 3.8 MB of small objects
took 0.4-0.8 s of the gateway's CPU and about 100 MB once parsed, where 4 MB of text takes a few
milliseconds and about 4 MB. So before a body is parsed, its JSON values are counted with a few
passes of C code (``bytes.count``), weighted by what each kind costs to build, and a body over
``limits.max_body_cost`` is refused (413) without being parsed. The same count estimates the
memory the parsed body will hold, which is charged to the body budget on top of its bytes.

Weights, from ``python benchmarks/gateway_body_cost.py`` (Python 3.11, the gateway's own
``parse_body``, 2-core machine): an element or member (a comma) ~40-50 ns, an array ~130 ns, an
object ~800 ns (a dict and the duplicate-key check), a float ~150 ns (the finiteness check).
Commas and brackets inside strings count too where a body has many strings (an over-estimate);
where it has few, the strings are cut out first, so a long text with many commas costs little.
"""

from __future__ import annotations

from dataclasses import dataclass

# Units of ~50 ns of parsing on the development machine.
_OBJECT, _ARRAY, _FLOAT, _ELEMENT = 16, 3, 3, 1
# Bytes a parsed value holds beyond its text (tracemalloc, same benchmark): a small dict, an
# empty list, a pointer in its container, a float, a string's header.
_OBJECT_BYTES, _ARRAY_BYTES, _ELEMENT_BYTES, _FLOAT_BYTES, _STRING_BYTES = 180, 56, 8, 24, 40
# Up to this many strings, they are cut out before counting (one split); above, the raw bytes
# are counted as they are.
_EXACT_STRINGS = 32 * 1024


@dataclass(frozen=True, slots=True)
class BodyCost:
    units: int  # ~50 ns of parsing each
    memory: int  # bytes the parsed body is expected to hold beyond its wire size


def body_cost(raw: bytes) -> BodyCost:
    quotes = raw.count(b'"')
    text = raw
    if quotes <= 2 * _EXACT_STRINGS:
        # Escaped backslashes and quotes first; then every quote opens or closes a string.
        unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
        text = b"".join(unescaped.split(b'"')[::2])
    objects = text.count(b"{")
    arrays = text.count(b"[")
    elements = text.count(b",") + objects + arrays
    floats = text.count(b".")
    units = _OBJECT * objects + _ARRAY * arrays + _FLOAT * floats + _ELEMENT * elements
    memory = (
        _OBJECT_BYTES * objects
        + _ARRAY_BYTES * arrays
        + _ELEMENT_BYTES * elements
        + _FLOAT_BYTES * floats
        + _STRING_BYTES * (quotes // 2)
    )
    return BodyCost(units, memory)


__all__ = ["BodyCost", "body_cost"]
