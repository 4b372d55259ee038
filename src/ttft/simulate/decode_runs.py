"""Runs of decode-only steps as one event, for the continuous-batching models (vLLM, SGLang).

While every running request decodes one token per step and nothing else can change (nobody is
admitted, no memory is evicted or taken back), the next steps differ only in the context their
attention reads. Such a run is planned as one event whose step ends are added up one step at a
time, exactly as step by step would; an arrival cuts it at the first step boundary after it. A
model says when a run may start (``_decode_run``) and what its steps hold (``_run_shape``), and
applies a finished run itself (``repeat`` steps).
"""

from __future__ import annotations

from bisect import bisect_left

from ttft.simulate.engine import ReplicaSim
from ttft.simulate.model import CostModel, EngineSettings


class DecodeRuns(ReplicaSim):
    fast_forward = True  # False: every step is its own event (the reference the tests use)

    def __init__(self, cost: CostModel, settings: EngineSettings, index: int = 0) -> None:
        super().__init__(cost, settings, index)
        self.repeat = 1  # decode steps the running event stands for
        self.in_run = False  # the running event is a decode run (possibly cut to one step)
        self._ends: list[float] = []  # a decode run's step ends
        self._durations: list[float] = []  # and its steps' durations
        self._busy_before = 0.0  # busy_s when the run started

    def _decode_run(self) -> int:
        """Steps the next ones stay alike for; 0 when the next step is not part of a run."""
        raise NotImplementedError

    def _run_shape(self) -> tuple[int, int]:
        """(sequences decoding, context tokens they hold) at the run's first step."""
        raise NotImplementedError

    def _start(self, now: float) -> float | None:
        k = self._decode_run() if self.fast_forward else 0
        if k < 2:
            self.repeat = 1
            self.in_run = False
            return super()._start(now)
        n, attention = self._run_shape()
        self._busy_before = busy = self.busy_s
        self._ends, self._durations = ends, durations = [], []
        step_s, speed, t = self.cost.step_s, self.speed, now
        for j in range(k):  # added up one step at a time, as step by step would
            duration = step_s(0, n, (attention + j * n) / 1000.0) * speed
            busy += duration
            t += duration
            ends.append(t)
            durations.append(duration)
        self.busy_s = busy
        self.repeat, self.in_run = k, True
        self.steps += k
        self.step_start, self.step_end = now, t
        self.version += 1
        return t

    def _interrupt(self, now: float) -> float | None:
        if not self.in_run:
            return None
        done = bisect_left(self._ends, now) + 1  # the first step ending at or after ``now``
        if done >= self.repeat:
            return None
        self.steps -= self.repeat - done
        busy = self._busy_before
        for duration in self._durations[:done]:
            busy += duration  # as step by step adds them
        self.busy_s = busy
        self.repeat = done
        self.step_end = self._ends[done - 1]
        return self.step_end
