"""Unit conversions and number formatting for display.

Everything inside ``ttft`` keeps durations as integer (or float, for statistics) nanoseconds;
conversion to milliseconds happens here, called by renderers only.
"""

from __future__ import annotations

import math

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000

# Units a metric can carry, and what a renderer shows for them.
DURATION_UNIT = "ns"
TOKENS_UNIT = "tokens"
_DISPLAY_UNIT = {DURATION_UNIT: "ms", TOKENS_UNIT: "tokens"}


def ns_to_ms(ns: float) -> float:
    return ns / NS_PER_MS


def ns_to_s(ns: float) -> float:
    return ns / NS_PER_S


def display_unit(unit: str) -> str:
    """The unit a renderer shows for a metric's internal unit (``ns`` shows as ``ms``)."""
    return _DISPLAY_UNIT.get(unit, unit)


def to_display(value: float, unit: str) -> float:
    """A metric value converted to its display unit (ns -> ms; others unchanged)."""
    return ns_to_ms(value) if unit == DURATION_UNIT else value


def format_ms(ns: float | None) -> str:
    """A duration in ns shown in ms with precision that fits its size: 0.42, 45.2, 1830."""
    if ns is None or math.isnan(ns):
        return "-"
    ms = ns_to_ms(ns)
    magnitude = abs(ms)
    if magnitude < 10:
        return f"{ms:.2f}"
    if magnitude < 1000:
        return f"{ms:.1f}"
    return f"{ms:.0f}"


def format_number(value: float | None) -> str:
    """A count or token figure: whole numbers without decimals, others with one."""
    if value is None or math.isnan(value):
        return "-"
    if float(value).is_integer():
        return f"{int(value)}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}"


def format_value(value: float | None, unit: str) -> str:
    """A metric value in its display unit, as text."""
    if unit == DURATION_UNIT:
        return format_ms(value)
    return format_number(value)


def format_rate(per_s: float | None) -> str:
    """A throughput (things per second) with sensible precision."""
    if per_s is None or math.isnan(per_s):
        return "-"
    if abs(per_s) >= 100:
        return f"{per_s:.0f}"
    if abs(per_s) >= 10:
        return f"{per_s:.1f}"
    return f"{per_s:.2f}"


def format_duration_s(ns: float | None) -> str:
    """A run length in seconds: ``12.3 s``."""
    if ns is None:
        return "-"
    return f"{ns_to_s(ns):.1f} s"


def format_percent(fraction: float | None) -> str:
    if fraction is None or math.isnan(fraction):
        return "-"
    return f"{100 * fraction:.1f}%"
