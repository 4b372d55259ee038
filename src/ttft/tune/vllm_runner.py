"""``ttft tune sweep --engine vllm``: each trial starts vLLM with its configuration.

From the user's launch command (``--launch 'vllm serve MODEL ...'``, the tuned flags set on it in
vLLM's own spellings) or, without one, the small local model ``ttft serve --engine vllm`` serves.
Each trial's start-up time is reported with it (vLLM takes tens of seconds on a CPU, minutes with
torch.compile on a GPU): it is the cost of every point of the sweep.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.core.target import Target
from ttft.engines.argv_edit import remove_flags, set_flags
from ttft.engines.control import complete_target
from ttft.engines.process import free_loopback_port
from ttft.engines.vllm.local import (
    RunningVllm,
    VllmConfig,
    launch_vllm,
    runnable_vllm_argv,
    start_argv,
)
from ttft.tune.runner import HttpTrialSession, TrialSession, open_sink, refuse_target_change
from ttft.tune.space import Config, engine_args, flag_name
from ttft.tune.workload import TuneWorkload


@dataclass
class VllmRunner:
    launch: tuple[str, ...] = ()  # ``vllm serve MODEL ...`` without the tuned flags; () : local
    startup_timeout_s: float = 600.0
    request_timeout_s: float = 300.0

    def _start(self, config: Config) -> RunningVllm:
        flags = engine_args("vllm", config)
        if not self.launch:
            return launch_vllm(
                VllmConfig(extra_args=tuple(flags)), startup_timeout_s=self.startup_timeout_s
            )
        argv, why = runnable_vllm_argv(list(self.launch))
        if argv is None:
            raise TtftError(f"cannot start vLLM from --launch: {why}")
        port = free_loopback_port()
        argv = set_flags(argv, {"--host": "127.0.0.1", "--port": str(port)}, kind="vllm")
        # the tuned flags replace the launch command's own, whatever spelling it used
        argv = remove_flags(argv, [flag_name(key) for key in config], "vllm") + flags
        served = VllmConfig(port=port)
        return start_argv(argv, served, "", startup_timeout_s=self.startup_timeout_s)

    @contextlib.contextmanager
    def open(
        self, config: Config, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> Iterator[TrialSession]:
        refuse_target_change(config)
        with self._start(config) as engine:
            target = complete_target(Target(engine.base_url, None, engine.metrics_url, "vllm"))
            with open_sink(records, config, target) as sink:
                yield HttpTrialSession(
                    target,
                    workload,
                    sink,
                    slos,
                    # Fixed answer lengths: a trial must not get faster by stopping early.
                    extra_body={"ignore_eos": True},
                    launch_command=engine.argv,
                    startup_s=engine.startup_s,
                    timeout_s=self.request_timeout_s,
                )
