"""The terminal text of ``ttft simulate``: a row per prediction, what a fewest-replicas search
found, the calibration's fit, the burst check and predicted against measured.

Every function returns lines; the CLI only prints them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttft.simulate.model import Calibration
from ttft.simulate.sweep import PointResult, Sweep
from ttft.simulate.validate import Validation
from ttft.simulate.whatif import Prediction

HEADER = (
    "config | TTFT p50 ms [95% interval] | p95 | p99 | queue p95 ms | req/s | goodput/s | SLO met"
)


def ms(value: float) -> str:
    return f"{value * 1e3:.0f}"


def row(p: Prediction, rate: float | None) -> str:
    """One prediction as a row under ``HEADER``."""
    t, q = p.ttft_s, p.queue_s
    cells = [
        p.config.describe() + (f" rate={rate:g}/s" if rate is not None else ""),
        *(
            f"{ms(t[k].value)} [{ms(t[k].interval.low)}-{ms(t[k].interval.high)}]"
            for k in (50.0, 95.0, 99.0)
        ),
        f"{ms(q[95.0].value)}",
        f"{p.throughput_rps.value:.2f}",
        "-" if p.goodput_rps is None else f"{p.goodput_rps.value:.2f}",
        "-" if p.slo_met is None else ("yes" if p.slo_met else "no"),
    ]
    return " | ".join(cells)


def point_lines(result: PointResult, sweep: Sweep) -> list[str]:
    """A point's answer: its row and notes, or every count a fewest-replicas search tried."""
    rate = result.point.rate
    if result.prediction is None:
        lines = [row(p, rate) for p in result.tried]
        best = result.fewest
        found = str(best) if best is not None else f"none up to {sweep.max_replicas}"
        slos = ", ".join(s.text for s in sweep.slos)
        return [*lines, f"  -> fewest replicas holding {slos}: {found}"]
    return [row(result.prediction, rate), *(f"  note: {n}" for n in result.prediction.notes)]


def calibration_lines(cal: Calibration) -> list[str]:
    """The fitted step cost, the per-request overhead and how well the fit holds."""
    c, f = cal.cost, cal.fit
    return [
        f"step = {c.step_base_s * 1e3:.2f} ms + {c.prefill_token_s * 1e3:.3f} ms/prompt token "
        f"+ {c.decode_seq_s * 1e3:.2f} ms/decoding sequence + {c.attention_s * 1e3:.3f} ms per "
        f"1k context tokens attended + {c.cached_token_s * 1e3:.4f} ms/cached token",
        f"per-request overhead {c.overhead_s * 1e3:.1f} ms",
        f"fit: {f.samples} samples, R^2 {f.r2:.3f}, |residual| p50 {f.rel_residual_p50:.1%} "
        f"p95 {f.rel_residual_p95:.1%}",
        *(f"  note: {note}" for note in f.notes),
    ]


def burst_line(pairs: Sequence[tuple[float, float]]) -> str:
    """The burst check's predicted/measured TTFT pairs."""
    text = ", ".join(f"{p * 1e3:.0f}/{m * 1e3:.0f}" for p, m in pairs)
    return f"burst check (not fitted), predicted/measured TTFT ms: {text}"


def comparison_lines(label: str, result: Validation) -> list[str]:
    """Predicted against measured per percentile, with the measured interval."""
    lines = [f"  {label}:"]
    for c in result.comparisons:
        lines.append(
            f"    p{c.quantile:g}: predicted {ms(c.predicted_s)} ms, measured "
            f"{ms(c.measured_s)} ms [{ms(c.measured_interval.low)}-"
            f"{ms(c.measured_interval.high)}], error {c.error:+.1%}"
            + (
                ""
                if c.same_arrivals_s is None or c.same_arrivals_error is None
                else f"; same arrivals {ms(c.same_arrivals_s)} ms ({c.same_arrivals_error:+.1%})"
            )
        )
    return lines
