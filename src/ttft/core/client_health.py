"""Is the load generator itself the bottleneck? A verdict per cell and per run, from numbers.

A client that saturates itself reports its own queueing as the server's latency. Each signal
below is checked against named thresholds; the verdict is the worst level any check reached,
and every verdict says why (the numbers and the threshold they crossed) and what to do.

- event-loop lag: how late a timer in the client's event loop woke up (sampled every few ms);
- CPU share: the client process's CPU time over wall time (one core saturated is ~100%);
- schedule lag: open loop, scheduled -> sent at p99 (time the request waited in the client);
- delivered load: the send rate achieved against the rate the schedule asked for;
- read gap: kernel receive stamp -> the moment the process read the bytes (Linux, plain TCP);
- socket errors: the client ran out of file descriptors or local ports (EMFILE, EADDRNOTAVAIL);
- lost workers: a client process died mid-cell and its requests were counted as failed.

Pure: the load layer samples, this module judges.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Mapping, Sequence

from ttft.core.client_verdict import (
    _RANK,
    HEALTHY,
    INVALID,
    SUSPECT,
    Check,
    ClientVerdict,
    HealthSample,
)
from ttft.core.records import RequestRecord
from ttft.core.stats import percentile

# Timer lateness at p99. A healthy asyncio loop wakes within ~1 ms even on a busy machine;
# beyond 10 ms reads, sends and timers queue behind each other; beyond 100 ms the client is
# measuring itself.
LOOP_LAG_SUSPECT_NS = 10_000_000
LOOP_LAG_INVALID_NS = 100_000_000
# When every read carries the kernel's receive time, a late loop no longer moves any rung of
# the ladder (sent is stamped at the send itself); it only sends late. A wider margin then.
LOOP_LAG_STAMPED_SUSPECT_NS = 25_000_000
LOOP_LAG_STAMPED_INVALID_NS = 250_000_000
# Below this CPU share a lagging loop was kept waiting by other processes, not by its own work.
BUSY_ELSEWHERE_SHARE = 0.5
# A single-threaded event loop at 90% of a core has no headroom left for bursts.
CPU_SHARE_SUSPECT = 0.90
# Scheduled -> sent at p99 (the same 10 ms as the summary's client_lag warning).
SCHEDULE_LAG_SUSPECT_NS = 10_000_000
SCHEDULE_LAG_INVALID_NS = 100_000_000
# Achieved send rate over the rate the schedule asked for.
DELIVERED_SUSPECT = 0.95
DELIVERED_INVALID = 0.80
MIN_REQUESTS_FOR_RATE = 10  # fewer sends say nothing about a rate
# Bytes waiting in the socket before the process read them, at p99 (measured where the kernel
# stamps reads). Packets that queue up are read together, and one read carries the newest
# packet's stamp: token times can be late by up to this gap.
READ_GAP_SUSPECT_NS = 10_000_000
READ_GAP_INVALID_NS = 100_000_000

WORKER_LOST = "worker_lost"  # the error kind of requests whose client process died
# Errors that are the client machine's, not the server's: out of descriptors, ports, buffers.
_SOCKET_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.ENOBUFS, errno.ENOMEM)
SOCKET_ERROR_TEXTS = tuple(os.strerror(code) for code in _SOCKET_ERRNOS)

_SCALE_FIX = (
    "lower the load, or spread it over more client processes (--workers N, one per spare "
    "core; --ray ADDRESS for more machines); check what else runs on this machine"
)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms" if ns >= 1e5 else f"{ns / 1e6:.2f} ms"


def _level(value: float, suspect: float, invalid: float | None = None) -> str:
    if invalid is not None and value > invalid:
        return INVALID
    return SUSPECT if value > suspect else HEALTHY


def _worst_sample(samples: Sequence[HealthSample], key: str) -> tuple[HealthSample, int] | None:
    found = [(s, getattr(s, key)) for s in samples if getattr(s, key) is not None]
    return max(found, key=lambda pair: pair[1]) if found else None


def _who(sample: HealthSample, many: bool) -> str:
    return f" (worker {sample.worker})" if many else ""


def _loop_lag_check(sample: HealthSample, many: bool) -> tuple[tuple[int, int], Check]:
    """This sample's loop-lag check, and its sort key (level, then value)."""
    value = sample.loop_lag_p99_ns or 0
    if sample.kernel_stamped:
        suspect, invalid, note = (
            LOOP_LAG_STAMPED_SUSPECT_NS,
            LOOP_LAG_STAMPED_INVALID_NS,
            f"; reads kernel-stamped, else {_ms(LOOP_LAG_SUSPECT_NS)}",
        )
    else:
        suspect, invalid, note = LOOP_LAG_SUSPECT_NS, LOOP_LAG_INVALID_NS, ""
    level = _level(value, suspect, invalid)
    detail = (
        f"event-loop lag p99 {_ms(value)}{_who(sample, many)} (suspect above {_ms(suspect)}, "
        f"invalid above {_ms(invalid)}{note})"
    )
    fix, why = _late_fix(sample, level)
    short = f"loop lag p99 {_ms(value)}{_who(sample, many)}"
    check = Check("loop_lag", level, detail + why, fix, short)
    return (_RANK[level], value), check


def _late_fix(sample: HealthSample, level: str) -> tuple[str, str]:
    """The fix for a process that ran late, and a note when its own work was not the cause."""
    if level == HEALTHY:
        return "", ""
    share = sample.cpu_share
    if share is not None and share < BUSY_ELSEWHERE_SHARE:
        return (
            "other processes kept the client off the CPU (an engine on the same cores?): run "
            "the client on cores or a machine of its own (taskset, --ray), or lighten the load "
            "beside it",
            f" while the client itself used {share:.0%} of a core",
        )
    return _SCALE_FIX, ""


def _process_checks(samples: Sequence[HealthSample]) -> list[Check]:
    many = len(samples) > 1
    checks: list[Check] = []
    lags = [_loop_lag_check(s, many) for s in samples if s.loop_lag_p99_ns is not None]
    if lags:
        checks.append(max(lags, key=lambda pair: pair[0])[1])
    shares = [(s, s.cpu_share) for s in samples if s.cpu_share is not None]
    if shares:
        sample, share = max(shares, key=lambda pair: pair[1] or 0.0)
        assert share is not None
        level = _level(share, CPU_SHARE_SUSPECT)
        checks.append(
            Check(
                "cpu_share",
                level,
                f"client CPU {share:.0%} of one core{_who(sample, many)} (suspect above "
                f"{CPU_SHARE_SUSPECT:.0%})",
                "" if level == HEALTHY else _SCALE_FIX,
                f"CPU {share:.0%}{_who(sample, many)}",
            )
        )
    gap = _worst_sample([s for s in samples if s.reads], "read_gap_p99_ns")
    if gap is not None:
        sample, value = gap
        level = _level(value, READ_GAP_SUSPECT_NS, READ_GAP_INVALID_NS)
        fix, why = _late_fix(sample, level)
        checks.append(
            Check(
                "read_gap",
                level,
                f"kernel receive -> read p99 {_ms(value)} over {sample.reads} reads"
                f"{_who(sample, many)} (suspect above {_ms(READ_GAP_SUSPECT_NS)}: packets "
                f"queued that long are read together under the newest one's stamp){why}",
                fix,
                f"read gap p99 {_ms(value)}{_who(sample, many)}",
            )
        )
    return checks


def _sent(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.sent_ns is not None and r.scheduled_ns is not None]


def schedule_lag_p99(records: Iterable[RequestRecord]) -> int | None:
    """scheduled -> sent at p99 over the requests that were sent (``None`` for none)."""
    lags = sorted(max(0, (r.sent_ns or 0) - (r.scheduled_ns or 0)) for r in _sent(records))
    return int(percentile(lags, 99.0)) if lags else None


def _worst_worker_lag(samples: Sequence[HealthSample]) -> str:
    found = [(s.schedule_lag_p99_ns, s.worker) for s in samples if s.schedule_lag_p99_ns]
    if len(samples) < 2 or not found:
        return ""
    lag, worker = max(found)
    return f"; worst worker {worker}: p99 {_ms(lag)}"


def _schedule_checks(
    records: Sequence[RequestRecord],
    rate: float | None,
    capped: bool,
    samples: Sequence[HealthSample] = (),
) -> list[Check]:
    if rate is None:
        return []
    if capped:
        return [
            Check(
                "schedule_lag",
                HEALTHY,
                "open-loop schedule lag not judged: --max-in-flight makes requests wait on purpose",
                short="schedule lag not judged (--max-in-flight)",
            )
        ]
    sent = _sent(records)
    checks: list[Check] = []
    lags = sorted(max(0, (r.sent_ns or 0) - (r.scheduled_ns or 0)) for r in sent)
    if lags:
        p99 = percentile(lags, 99.0)
        level = _level(p99, SCHEDULE_LAG_SUSPECT_NS, SCHEDULE_LAG_INVALID_NS)
        late = max(samples, key=lambda s: s.schedule_lag_p99_ns or 0, default=None)
        fix = _late_fix(late, level)[0] if late is not None else _SCALE_FIX
        checks.append(
            Check(
                "schedule_lag",
                level,
                f"open-loop schedule lag (scheduled -> sent, connection set-up included) p99 "
                f"{_ms(p99)}{_worst_worker_lag(samples)} (suspect above "
                f"{_ms(SCHEDULE_LAG_SUSPECT_NS)}, invalid above {_ms(SCHEDULE_LAG_INVALID_NS)})",
                "" if level == HEALTHY else fix,
                f"schedule lag p99 {_ms(p99)}{_worst_worker_lag(samples)}",
            )
        )
    if len(sent) >= MIN_REQUESTS_FOR_RATE:
        scheduled = [r.scheduled_ns or 0 for r in sent]
        sends = [r.sent_ns or 0 for r in sent]
        planned_span = max(scheduled) - min(scheduled)
        sent_span = max(sends) - min(scheduled)  # from the first planned moment to the last send
        if planned_span > 0 and sent_span > 0:
            planned = (len(sent) - 1) * 1e9 / planned_span
            delivered = (len(sent) - 1) * 1e9 / sent_span
            fraction = min(1.0, delivered / planned)
            level = HEALTHY
            if fraction < DELIVERED_INVALID:
                level = INVALID
            elif fraction < DELIVERED_SUSPECT:
                level = SUSPECT
            checks.append(
                Check(
                    "delivered_load",
                    level,
                    f"delivered {delivered:.1f} req/s of the {planned:.1f} req/s the schedule "
                    f"asked (configured {rate:g}/s): {fraction:.0%} (suspect below "
                    f"{DELIVERED_SUSPECT:.0%}, invalid below {DELIVERED_INVALID:.0%})",
                    "" if level == HEALTHY else _SCALE_FIX,
                    f"delivered {fraction:.0%} of schedule",
                )
            )
    return checks


def socket_errors(records: Iterable[RequestRecord]) -> int:
    """Requests that failed for lack of client resources (descriptors, local ports, buffers)."""
    return sum(
        1
        for r in records
        if r.error is not None and any(text in r.error.message for text in SOCKET_ERROR_TEXTS)
    )


def _error_checks(records: Sequence[RequestRecord]) -> list[Check]:
    checks: list[Check] = []
    if not records:
        checks.append(
            Check(
                "no_records",
                SUSPECT,
                "no request of this cell came back from the client",
                "look at the client workers' logs and rerun",
            )
        )
    resource = socket_errors(records)
    if resource:
        checks.append(
            Check(
                "socket_errors",
                INVALID,
                f"{resource} requests failed on the client's own limits (EMFILE, ENFILE, "
                "EADDRNOTAVAIL, ENOBUFS): the server never saw them",
                "raise the descriptor limit (ulimit -n 65536), widen the local port range "
                "(sysctl net.ipv4.ip_local_port_range) or spread the load over --workers",
            )
        )
    lost = sum(1 for r in records if r.error is not None and r.error.kind == WORKER_LOST)
    if lost:
        checks.append(
            Check(
                "worker_lost",
                SUSPECT,
                f"a client worker died: {lost} of its requests are counted as failed "
                f"({WORKER_LOST}) and the cell ran below its configured load",
                "look at the worker's log (memory, a killed process, a lost Ray node) and rerun",
            )
        )
    return checks


def assess(
    samples: Sequence[HealthSample],
    records: Sequence[RequestRecord],
    *,
    open_loop_rate: float | None = None,
    capped: bool = False,
) -> ClientVerdict:
    """The verdict for one cell: ``samples`` from every client process that ran it, the cell's
    records, and the open-loop rate it was asked for (``None`` for a closed loop)."""
    checks = [
        *_process_checks(samples),
        *_schedule_checks(records, open_loop_rate, capped, samples),
        *_error_checks(records),
    ]
    return verdict_of(checks, list(samples))


def verdict_of(checks: Sequence[Check], samples: list[HealthSample]) -> ClientVerdict:
    if not checks:
        return ClientVerdict(
            SUSPECT,
            "nothing about the client was measured for this cell",
            "run it through ttft bench, which samples the client",
            [],
            samples,
        )
    worst = max(_RANK[check.level] for check in checks)
    level = next(name for name, rank in _RANK.items() if rank == worst)
    if level == HEALTHY:
        reason = ", ".join(check.short or check.detail for check in checks)
        reason += " (every check within its threshold)"
        return ClientVerdict(HEALTHY, reason, "none needed", list(checks), samples)
    bad = [check for check in checks if check.level == level]
    fixes = list(dict.fromkeys(check.fix for check in bad if check.fix))
    return ClientVerdict(
        level, "; ".join(check.detail for check in bad), "; ".join(fixes), list(checks), samples
    )


def overall(cells: Mapping[str, ClientVerdict]) -> ClientVerdict:
    """The run's verdict: the worst cell's, naming the cells at that level."""
    if not cells:
        return verdict_of([], [])
    worst = max(_RANK[v.level] for v in cells.values())
    level = next(name for name, rank in _RANK.items() if rank == worst)
    names = [name for name, v in cells.items() if v.level == level]
    if level == HEALTHY:
        return ClientVerdict(
            HEALTHY, f"every cell's client was healthy ({len(cells)})", "none needed"
        )
    first = cells[names[0]]
    signals = [c.short or c.name for c in first.checks if c.level == level]
    return ClientVerdict(
        level,
        f"{', '.join(names)}: {', '.join(signals)} (the cell's lines say why)",
        first.fix,
        list(first.checks),
        [],
    )
