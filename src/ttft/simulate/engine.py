"""What every simulated engine replica shares: the step loop's contract and the per-request
outcome.

A replica runs one step (one forward pass over a batch) at a time. ``submit`` hands it a request
at time ``now``; a request that arrives during a step joins at the next step, as in the real
engines. ``finish_step`` applies the running step's effects (prompt tokens computed, first tokens
out, requests done) and starts the next one, returning its end time (None: idle). The fleet
(``simulate/fleet.py``) interleaves replicas by these end times.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest


@dataclass(slots=True)
class SimOutcome:
    """One simulated request: when it arrived, got a slot, produced its first and last token.

    ``ttft_s`` includes the client-side overhead of the cost model, like a measured TTFT.
    """

    request: SimRequest
    replica: int = 0
    admitted_s: float | None = None
    first_token_s: float | None = None
    done_s: float | None = None
    cached_tokens: int = 0
    preemptions: int = 0
    overhead_s: float = 0.0
    refused: str | None = None  # why the engine refused it (e.g. longer than a slot's context)

    @property
    def ok(self) -> bool:
        return self.refused is None and self.first_token_s is not None

    @property
    def ttft_s(self) -> float | None:
        if self.first_token_s is None:
            return None
        return self.first_token_s - self.request.arrival_s + self.overhead_s

    @property
    def queue_s(self) -> float | None:
        if self.admitted_s is None:
            return None
        return self.admitted_s - self.request.arrival_s


class ReplicaSim(ABC):
    """One engine replica. Subclasses decide what each step computes."""

    def __init__(self, cost: CostModel, settings: EngineSettings, index: int = 0) -> None:
        settings.check()
        self.cost = cost
        self.settings = settings
        self.index = index
        self.speed = 1.0  # a per-run factor on every step's time (the calibration's scatter)
        self.step_end: float | None = None
        self.outcomes: list[SimOutcome] = []
        self.finished: list[SimOutcome] = []  # done since the fleet last looked (closed loop)
        self.steps = 0
        self.busy_s = 0.0
        self.preemptions = 0
        self._waking = False
        self.step_start = 0.0
        self.version = 0  # bumped whenever step_end moves: the fleet's stale events are skipped

    # -- what the router reads -------------------------------------------------------------
    healthy = True
    max_in_flight: int | None = None  # a gateway in front sends at most this many (None: all)

    @property
    def has_room(self) -> bool:
        return self.max_in_flight is None or self.load < self.max_in_flight

    @property
    @abstractmethod
    def load(self) -> int:
        """Requests in flight plus waiting."""

    @property
    @abstractmethod
    def has_free_slot(self) -> bool:
        """A new request would start at the next step, without waiting for a slot."""

    # -- the step loop ---------------------------------------------------------------------
    @abstractmethod
    def _enqueue(self, outcome: SimOutcome) -> None:
        """Take a new request into the waiting queue."""

    @abstractmethod
    def _plan_step(self, now: float) -> float | None:
        """Pick the next batch at ``now``; its duration, or None when there is nothing to do."""

    @abstractmethod
    def _apply_step(self, end: float) -> None:
        """The planned batch has run and ended at ``end``."""

    def submit(self, request: SimRequest, now: float) -> float | None:
        """A request arrives; returns the end of a step started for it (None: one is running)."""
        outcome = SimOutcome(request, self.index, overhead_s=self.cost.overhead_s)
        self.outcomes.append(outcome)
        self._enqueue(outcome)
        if outcome.refused is not None:
            outcome.done_s = now
            self.finished.append(outcome)
        if self.step_end is None:
            # idle: wake at ``now``, after every other arrival of the same instant has joined
            self.step_end = now
            self._waking = True
            self.version += 1
            return now
        if not self._waking:
            end = self._interrupt(now)
            if end is not None:
                self.version += 1
                return end
        return None

    def _interrupt(self, now: float) -> float | None:
        """A request arrived during a step that stands for several (a fast-forwarded run):
        cut it at the first step boundary after ``now``; the new end, or None if unchanged."""
        return None

    def finish_step(self) -> float | None:
        """Apply the running step (or wake up) and start the next; its end, or None (idle)."""
        assert self.step_end is not None
        end = self.step_end
        if self._waking:
            self._waking = False
        else:
            self._apply_step(end)
        self.step_end = None
        return self._start(end)

    def _start(self, now: float) -> float | None:
        duration = self._plan_step(now)
        if duration is None:
            return None
        duration *= self.speed
        self.steps += 1
        self.busy_s += duration
        self.step_start = now
        self.step_end = now + duration
        self.version += 1
        return self.step_end
