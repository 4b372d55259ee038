"""``ttft gateway``'s lanes in front of simulated replicas: per replica, the gateway's own
``LaneRules`` (the in-flight cap, the short and long lanes, the reserve for short requests, the
bounded queue and its timeout) driven by the fleet's discrete events.

As the real gateway does (``gateway/proxy.py``), each request is routed when it arrives, by the
gateway's ``Router`` over the replicas' admission loads (in flight + waiting; a replica whose
cap and queue are both full has no room), and then waits in *that* replica's lanes; nothing is
queued centrally. When a request's last token is out its slot is released and the lanes pick who
starts next. A request is shed, and counted, when no replica has room (429, ``queue_full``),
when its replica's lanes are full (429) or when it waited ``queue_timeout_s`` (503,
``queue_timeout``). ``round-robin`` is the simulator's own policy: the next replica in turn that
has room.

Not modelled: priorities and per-client shares (every simulated request has priority 0 and no
key), retries on a failed upstream, and llama-server slot pins (validation turns them off).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from ttft.core.errors import TtftError
from ttft.gateway.admission.lane_rules import LaneRules, Shed, Ticket, lane_for
from ttft.gateway.admission.lane_rules import resolve_long_reserve as _reserve
from ttft.gateway.config import AdmissionConfig
from ttft.gateway.routing import HIT, Router
from ttft.simulate.engine import SimOutcome
from ttft.simulate.requests import SimRequest

_GATEWAY = AdmissionConfig()  # the gateway's own defaults


@dataclass(frozen=True)
class Lanes:
    """The gateway's lane settings (``ttft gateway``'s names and defaults)."""

    long_prompt_tokens: int = _GATEWAY.long_prompt_tokens
    short_burst: int = _GATEWAY.short_burst
    long_reserve: int | None = _GATEWAY.long_reserve  # None: 1 with 2 slots or more, else 0
    queue_size: int = _GATEWAY.queue_size
    queue_timeout_s: float = _GATEWAY.queue_timeout_s

    def check(self) -> None:
        for name, value in (
            ("--long-prompt-tokens", self.long_prompt_tokens),
            ("--short-burst", self.short_burst),
            ("--queue-size", self.queue_size),
        ):
            if value < 1:
                raise TtftError(f"{name} must be at least 1, not {value}")
        if self.long_reserve is not None and self.long_reserve < 0:
            raise TtftError(f"--long-reserve must be 0 or more, not {self.long_reserve}")
        if not self.queue_timeout_s > 0:
            raise TtftError(f"--queue-timeout must be above 0, not {self.queue_timeout_s}")

    def reserve(self, max_in_flight: int) -> int:
        """The reserve the gateway resolves for a replica of ``max_in_flight`` slots."""
        return _reserve(self.long_reserve, max_in_flight)

    def describe(self, max_in_flight: int | None = None) -> str:
        """e.g. ``lanes long>1024 reserve=1 burst=4``; the reserve ``default`` (the gateway's:
        1 with 2 slots or more) when neither it nor the cap is known."""
        if self.long_reserve is not None:
            reserve = str(self.long_reserve)
        elif max_in_flight is not None:
            reserve = str(self.reserve(max_in_flight))
        else:
            reserve = "default"
        return f"lanes long>{self.long_prompt_tokens} reserve={reserve} burst={self.short_burst}"


@dataclass(slots=True)
class _Waiting:
    request: SimRequest
    started: bool = False


class SimAdmission(LaneRules[_Waiting]):
    """One replica's gateway admission, as the router sees it."""

    healthy = True


@dataclass
class GatewayState:
    """The gateway in front of ``replicas`` engines: one ``SimAdmission`` per replica, and the
    requests it shed (their outcomes, refused with the gateway's reason)."""

    replicas: int
    lanes: Lanes
    max_in_flight: int
    router: Router
    policy: str
    admissions: list[SimAdmission] = field(default_factory=list)
    shed: list[SimOutcome] = field(default_factory=list)
    hits: int = 0
    _turn: int = 0
    # (deadline, order, replica, ticket): when a waiting request gives up
    timeouts: list[tuple[float, int, int, Ticket[_Waiting]]] = field(default_factory=list)
    _order: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.lanes.check()
        if self.max_in_flight < 1:
            raise TtftError(f"--gateway-cap must be at least 1, not {self.max_in_flight}")
        self.admissions = [
            SimAdmission(
                self.max_in_flight,
                self.lanes.queue_size,
                split_lanes=True,
                short_burst=self.lanes.short_burst,
                long_reserve=self.lanes.reserve(self.max_in_flight),
            )
            for _ in range(self.replicas)
        ]

    def lane(self, request: SimRequest) -> str:
        tokens = request.prompt_tokens if request.lane_tokens is None else request.lane_tokens
        return lane_for(tokens, self.lanes.long_prompt_tokens)

    def _pick(self, key: int | None) -> int | None:
        adms = self.admissions
        if self.policy == "round-robin" and len(adms) > 1:
            n = len(adms)
            turn, self._turn = self._turn, self._turn + 1
            return next((i for i in ((turn + k) % n for k in range(n)) if adms[i].has_room), None)
        choice = self.router.pick(adms, key if self.policy == "prefix-affinity" else None)
        if choice is None:
            return None
        self.hits += choice.affinity == HIT and self.policy == "prefix-affinity"
        return choice.index

    def arrive(
        self, request: SimRequest, key: int | None, now: float
    ) -> list[tuple[int, SimRequest]]:
        """Route ``request`` and admit it; the (replica, request) pairs to submit now."""
        i = self._pick(key)
        if i is None:
            self._shed(request, -1, "queue_full", now)
            return []
        adm = self.admissions[i]
        lane = self.lane(request)
        if adm.try_start(lane):
            return [(i, request)]
        try:
            ticket = adm.enqueue(lane, 0, "", _Waiting(request))
        except Shed as exc:
            self._shed(request, i, exc.reason, now)
            return []
        deadline = now + self.lanes.queue_timeout_s
        heapq.heappush(self.timeouts, (deadline, next(self._order), i, ticket))
        return self._started(i, adm.grant()) if adm.in_flight < adm.max_in_flight else []

    def done(self, i: int, outcomes: Sequence[SimOutcome]) -> list[tuple[int, SimRequest]]:
        """Requests of replica ``i`` left the engine: their slots go to the lanes' next ones."""
        adm = self.admissions[i]
        out: list[tuple[int, SimRequest]] = []
        for outcome in outcomes:
            out.extend(self._started(i, adm.free(self.lane(outcome.request))))
        return out

    def time_out(self, now: float) -> None:
        """Shed every request that waited ``queue_timeout_s`` by ``now`` (503)."""
        while self.timeouts and self.timeouts[0][0] <= now:
            deadline, _, i, ticket = heapq.heappop(self.timeouts)
            if ticket.cancelled or ticket.item.started:
                continue
            self.admissions[i].withdraw(ticket)
            self._shed(ticket.item.request, i, "queue_timeout", deadline)

    def _started(self, i: int, tickets: list[Ticket[_Waiting]]) -> list[tuple[int, SimRequest]]:
        for ticket in tickets:
            ticket.item.started = True
        return [(i, t.item.request) for t in tickets]

    def _shed(self, request: SimRequest, replica: int, reason: str, now: float) -> None:
        self.shed.append(SimOutcome(request, replica, refused=reason, done_s=now))


SHED_REASONS = ("queue_full", "queue_timeout")


def shed_counts(outcomes: Sequence[SimOutcome]) -> dict[str, int]:
    """Requests the gateway refused, by reason (``queue_full``: 429, ``queue_timeout``: 503)."""
    counts: dict[str, int] = {}
    for o in outcomes:
        if o.refused in SHED_REASONS:
            counts[o.refused] = counts.get(o.refused, 0) + 1
    return counts
