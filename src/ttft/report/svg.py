"""Inline SVG charts built as plain strings: no plotting library, nothing fetched at view time.

Every chart is one ``<svg class="chart" data-chart=NAME>`` whose drawn data carry the class
``mark``, so a browser test can check that each chart has something visible in it. Values arrive
in display units (ms, requests/s); the caller has already converted them, so a chart never
guesses a unit. Coordinates are rounded to 0.1 px to keep pages small and output stable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)
SLO_COLOR = "#c00"
WIDTH, HEIGHT = 640, 320
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 150, 16, 44


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def num(value: float) -> str:
    """A tick or label number: few digits, no trailing zeros."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    return f"{value:.3g}"


def _c(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


@dataclass(frozen=True, slots=True)
class Scale:
    """Maps data values in [lo, hi] onto pixels [start, end], linearly or logarithmically."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            value = math.log10(max(value, self.lo))
        else:
            lo, hi = self.lo, self.hi
        span = hi - lo or 1.0
        return self.start + (value - lo) / span * (self.end - self.start)

    def ticks(self) -> list[float]:
        return log_ticks(self.lo, self.hi) if self.log else nice_ticks(self.lo, self.hi)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    ticks, value = [], first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade inside [lo, hi] (only powers of ten when that gives enough)."""
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    multipliers = (1.0,) if len(decades) > 4 else (1.0, 2.0, 5.0)
    return [m * 10.0**d for d in decades for m in multipliers if lo <= m * 10.0**d <= hi]


def padded_range(
    values: Sequence[float], *, zero: bool = True, log: bool = False
) -> tuple[float, float]:
    """A data range with a little room, from 0 for linear axes of positive data."""
    finite = [v for v in values if math.isfinite(v) and (not log or v > 0)]
    if not finite:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = min(finite), max(finite)
    if log:
        return lo / 1.2, hi * 1.2
    if zero and lo >= 0:
        lo = 0.0
    if hi == lo:
        return lo - 1.0 if lo else 0.0, hi + 1.0
    return lo, hi + (hi - lo) * 0.05


@dataclass(slots=True)
class Series:
    """One line (or set of points) of a chart. ``step`` draws a CDF-like staircase."""

    name: str
    points: list[tuple[float, float]]
    color: str = PALETTE[0]
    step: bool = False
    markers: bool = False
    line: bool = True
    labels: list[str] = field(default_factory=list)  # per-point text shown on hover


@dataclass(frozen=True, slots=True)
class Rule:
    """A reference line across the plot: an SLO threshold, a knee."""

    value: float
    label: str
    color: str = SLO_COLOR


def _open(name: str, title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg class="chart" data-chart="{escape(name)}" role="img" viewBox="0 0 {width} {height}"'
        f' width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]


def _frame(x: Scale, y: Scale) -> str:
    return (
        f'<path d="M{_c(x.start)},{_c(y.end)}V{_c(y.start)}H{_c(x.end)}" stroke="#333" '
        'fill="none"/>'
    )


def _x_axis(x: Scale, y: Scale, label: str, height: int) -> list[str]:
    parts = ['<g class="axis x" font-size="11" fill="#333">']
    for tick in x.ticks():
        px = x(tick)
        parts.append(
            f'<line x1="{_c(px)}" y1="{_c(y.start)}" x2="{_c(px)}" y2="{_c(y.end)}" '
            f'stroke="#eee"/><text x="{_c(px)}" y="{_c(y.start + 14)}" '
            f'text-anchor="middle">{num(tick)}</text>'
        )
    middle = (x.start + x.end) / 2
    parts.append(
        f'<text x="{_c(middle)}" y="{height - 6}" text-anchor="middle">{escape(label)}</text></g>'
    )
    return parts


def _y_axis(x: Scale, y: Scale, label: str) -> list[str]:
    parts = ['<g class="axis y" font-size="11" fill="#333">']
    for tick in y.ticks():
        py = y(tick)
        parts.append(
            f'<line x1="{_c(x.start)}" y1="{_c(py)}" x2="{_c(x.end)}" y2="{_c(py)}" '
            f'stroke="#eee"/><text x="{_c(x.start - 4)}" y="{_c(py + 4)}" '
            f'text-anchor="end">{num(tick)}</text>'
        )
    middle = (y.start + y.end) / 2
    parts.append(
        f'<text transform="translate(14,{_c(middle)}) rotate(-90)" text-anchor="middle">'
        f"{escape(label)}</text></g>"
    )
    return parts


def _legend(entries: Sequence[tuple[str, str]], x0: float) -> list[str]:
    parts = ['<g class="legend" font-size="11">']
    for i, (name, fill) in enumerate(entries):
        y0 = MARGIN_TOP + 6 + i * 16
        parts.append(
            f'<rect x="{_c(x0)}" y="{y0}" width="10" height="10" fill="{fill}"/>'
            f'<text x="{_c(x0 + 14)}" y="{y0 + 9}">{escape(name[:24])}</text>'
        )
    parts.append("</g>")
    return parts


def _path(series: Series, x: Scale, y: Scale) -> str:
    points = series.points
    if series.step:
        staircase: list[tuple[float, float]] = []
        previous_y = 0.0
        for px, py in points:
            staircase += [(px, previous_y), (px, py)]
            previous_y = py
        points = staircase
    moves = "".join(
        ("M" if i == 0 else "L") + f"{_c(x(px))},{_c(y(py))}" for i, (px, py) in enumerate(points)
    )
    return (
        f'<path class="mark" d="{moves}" fill="none" stroke="{series.color}" stroke-width="1.8">'
        f"<title>{escape(series.name)}</title></path>"
    )


def line_chart(
    name: str,
    title: str,
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    x_log: bool = False,
    y_log: bool = False,
    x_rules: Sequence[Rule] = (),
    y_rules: Sequence[Rule] = (),
    y_range: tuple[float, float] | None = None,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """Lines and/or points on linear or log axes, with vertical and horizontal reference rules."""
    xs = [p[0] for s in series for p in s.points] + [r.value for r in x_rules]
    ys = [p[1] for s in series for p in s.points] + [r.value for r in y_rules]
    x_lo, x_hi = padded_range(xs, log=x_log)
    y_lo, y_hi = y_range or padded_range(ys, log=y_log)
    x = Scale(x_lo, x_hi, MARGIN_LEFT, width - MARGIN_RIGHT, x_log)
    y = Scale(y_lo, y_hi, height - MARGIN_BOTTOM, MARGIN_TOP, y_log)
    parts = _open(name, title, width, height) + _x_axis(x, y, x_label, height)
    parts += [*_y_axis(x, y, y_label), _frame(x, y)]
    for s in series:
        if s.line and len(s.points) > 1:
            parts.append(_path(s, x, y))
        if s.markers or len(s.points) == 1:
            for i, (px, py) in enumerate(s.points):
                tip = s.labels[i] if i < len(s.labels) else f"{s.name}: {num(px)}, {num(py)}"
                parts.append(
                    f'<circle class="mark" cx="{_c(x(px))}" cy="{_c(y(py))}" r="3.5" '
                    f'fill="{s.color}"><title>{escape(tip)}</title></circle>'
                )
    for rule in x_rules:
        px = x(rule.value)
        parts.append(
            f'<line class="rule" x1="{_c(px)}" y1="{_c(y.start)}" x2="{_c(px)}" y2="{_c(y.end)}" '
            f'stroke="{rule.color}" stroke-dasharray="5,3"/><text x="{_c(px + 3)}" '
            f'y="{_c(y.end + 10)}" font-size="11" fill="{rule.color}">{escape(rule.label)}</text>'
        )
    for rule in y_rules:
        py = y(rule.value)
        parts.append(
            f'<line class="rule" x1="{_c(x.start)}" y1="{_c(py)}" x2="{_c(x.end)}" y2="{_c(py)}" '
            f'stroke="{rule.color}" stroke-dasharray="5,3"/><text x="{_c(x.end - 3)}" '
            f'y="{_c(py - 3)}" font-size="11" text-anchor="end" fill="{rule.color}">'
            f"{escape(rule.label)}</text>"
        )
    parts += _legend([(s.name, s.color) for s in series], width - MARGIN_RIGHT + 10)
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Bar:
    """One vertical bar from ``base`` to ``value``, with an optional interval whisker."""

    label: str
    value: float
    base: float = 0.0
    low: float | None = None
    high: float | None = None
    color: str = PALETTE[0]
    tip: str = ""


def bar_chart(
    name: str,
    title: str,
    bars: Sequence[Bar],
    *,
    y_label: str,
    legend: Sequence[tuple[str, str]] = (),
    y_rules: Sequence[Rule] = (),
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """Floating bars (a waterfall when each starts where the previous ended) with CI whiskers."""
    values = [v for b in bars for v in (b.value, b.base, b.low, b.high) if v is not None]
    y_lo, y_hi = padded_range(values + [r.value for r in y_rules])
    y = Scale(y_lo, y_hi, height - MARGIN_BOTTOM - 14, MARGIN_TOP)
    slot = (width - MARGIN_RIGHT - MARGIN_LEFT) / max(1, len(bars))
    x = Scale(0, max(1, len(bars)), MARGIN_LEFT, width - MARGIN_RIGHT)
    parts = _open(name, title, width, height) + _y_axis(x, y, y_label) + [_frame(x, y)]
    for i, bar in enumerate(bars):
        left = x.start + i * slot + slot * 0.2
        top, bottom = y(max(bar.value, bar.base)), y(min(bar.value, bar.base))
        tip = bar.tip or f"{bar.label}: {num(bar.value)}"
        parts.append(
            f'<rect class="mark" x="{_c(left)}" y="{_c(top)}" width="{_c(slot * 0.6)}" '
            f'height="{_c(max(bottom - top, 1.0))}" fill="{bar.color}"><title>{escape(tip)}'
            "</title></rect>"
        )
        if bar.low is not None and bar.high is not None:
            middle = left + slot * 0.3
            lo_px, hi_px = y(bar.low), y(bar.high)
            parts.append(
                f'<path class="whisker" d="M{_c(middle)},{_c(lo_px)}V{_c(hi_px)}'
                f'M{_c(middle - 5)},{_c(lo_px)}h10M{_c(middle - 5)},{_c(hi_px)}h10" '
                'stroke="#000" fill="none"/>'
            )
        parts.append(
            f'<text x="{_c(left + slot * 0.3)}" y="{_c(height - MARGIN_BOTTOM + 2)}" '
            f'font-size="10" text-anchor="middle">{escape(bar.label[:18])}</text>'
        )
    for rule in y_rules:
        py = y(rule.value)
        parts.append(
            f'<line class="rule" x1="{_c(x.start)}" y1="{_c(py)}" x2="{_c(x.end)}" y2="{_c(py)}" '
            f'stroke="{rule.color}" stroke-dasharray="5,3"/>'
        )
    parts += _legend(legend, width - MARGIN_RIGHT + 10)
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of a horizontal stacked bar or of a timeline row: [start, end) in data units."""

    start: float
    end: float
    color: str
    tip: str = ""


def lanes_chart(
    name: str,
    title: str,
    rows: Sequence[tuple[str, Sequence[Segment]]],
    *,
    x_label: str,
    legend: Sequence[tuple[str, str]] = (),
    x_rules: Sequence[Rule] = (),
    width: int = WIDTH,
    row_height: float = 22.0,
) -> str:
    """Horizontal lanes of segments: the ladder waterfall (one lane per cell) or a per-request
    timeline (one thin lane per request)."""
    ends = [s.end for _, segments in rows for s in segments] + [r.value for r in x_rules]
    starts = [s.start for _, segments in rows for s in segments]
    x_lo, x_hi = padded_range(starts + ends)
    plot_height = max(row_height * len(rows), 40.0)
    height = int(MARGIN_TOP + plot_height + MARGIN_BOTTOM)
    x = Scale(x_lo, x_hi, MARGIN_LEFT + 40, width - MARGIN_RIGHT)
    y = Scale(0, plot_height, MARGIN_TOP + plot_height, MARGIN_TOP)
    parts = _open(name, title, width, height) + _x_axis(x, y, x_label, height) + [_frame(x, y)]
    thick = max(row_height * 0.7, 1.0)
    for i, (label, segments) in enumerate(rows):
        top = MARGIN_TOP + i * row_height + (row_height - thick) / 2
        if row_height >= 10:
            parts.append(
                f'<text x="{_c(x.start - 4)}" y="{_c(top + thick / 2 + 4)}" font-size="10" '
                f'text-anchor="end">{escape(label[:16])}</text>'
            )
        for seg in segments:
            left, right = x(seg.start), x(seg.end)
            tip = f"<title>{escape(seg.tip)}</title>" if seg.tip else ""
            parts.append(
                f'<rect class="mark" x="{_c(left)}" y="{_c(top)}" '
                f'width="{_c(max(right - left, 0.6))}" height="{_c(thick)}" '
                f'fill="{seg.color}">{tip}</rect>'
            )
    for rule in x_rules:
        px = x(rule.value)
        parts.append(
            f'<line class="rule" x1="{_c(px)}" y1="{_c(y.start)}" x2="{_c(px)}" y2="{_c(y.end)}" '
            f'stroke="{rule.color}" stroke-dasharray="5,3"/><text x="{_c(px + 3)}" '
            f'y="{_c(y.end + 10)}" font-size="11" fill="{rule.color}">{escape(rule.label)}</text>'
        )
    parts += _legend(legend, width - MARGIN_RIGHT + 10)
    parts.append("</svg>")
    return "".join(parts)
