"""The experiment directory: every trial's records and result on disk as soon as it finishes.

Layout::

    experiment.json          what was asked (kind, space or chain, SLOs, workload): fixed at start
    trials/<id>/records.jsonl  every request of the trial, appended as it finishes
    trials/<id>/trial.json     the trial's result, written last and atomically: its presence
                               is what marks a trial finished
    results.jsonl            one line per finished trial, appended (the run's history)

``--resume`` reopens the directory, checks that the same experiment is asked, and runs only
trials without ``trial.json``. A trial cut short by SIGKILL keeps its partial records under
``records.interrupted-N.jsonl`` and runs again from the start.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ttft import __version__
from ttft.core.errors import TtftError
from ttft.tune.trial import TrialResult

EXPERIMENT_SCHEMA = "ttft.tune.experiment/1"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # readers see the old file or the whole new one, never half


class ExperimentDir:
    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def open(cls, root: Path, spec: dict[str, Any], *, resume: bool) -> ExperimentDir:
        """Start a new experiment in ``root``, or (``resume``) continue the one there.

        A directory that already holds an experiment is never overwritten without ``--resume``,
        and ``--resume`` refuses a directory whose experiment asked something else.
        """
        exp = cls(root)
        header = root / "experiment.json"
        if header.exists():
            if not resume:
                raise TtftError(
                    f"{root} already holds an experiment",
                    "add --resume to continue it, or choose another --out",
                )
            saved = json.loads(header.read_text(encoding="utf-8"))
            if saved.get("spec") != spec:
                raise TtftError(
                    f"--resume: the experiment in {root} was started with other settings",
                    "run with the same options as the first time, or choose another --out",
                )
            return exp
        root.mkdir(parents=True, exist_ok=True)
        _write_atomic(
            header,
            json.dumps(
                {
                    "schema": EXPERIMENT_SCHEMA,
                    "ttft_version": __version__,
                    "created": time.time(),
                    "spec": spec,
                },
                indent=2,
            ),
        )
        return exp

    def trial_dir(self, trial_id: str) -> Path:
        return self.root / "trials" / trial_id

    def finished(self, trial_id: str) -> TrialResult | None:
        path = self.trial_dir(trial_id) / "trial.json"
        if not path.exists():
            return None
        return TrialResult.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def begin(self, trial_id: str) -> Path:
        """The records file of a trial about to run; partial records of a killed run move aside."""
        folder = self.trial_dir(trial_id)
        folder.mkdir(parents=True, exist_ok=True)
        records = folder / "records.jsonl"
        if records.exists():
            n = len(list(folder.glob("records.interrupted-*.jsonl"))) + 1
            records.rename(folder / f"records.interrupted-{n}.jsonl")
        return records

    def save(self, result: TrialResult) -> None:
        folder = self.trial_dir(result.trial_id)
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(result.to_dict(), indent=2)
        _write_atomic(folder / "trial.json", text)
        with (self.root / "results.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps(result.to_dict(), separators=(",", ":")) + "\n")

    def write_report(self, name: str, text: str) -> Path:
        path = self.root / name
        _write_atomic(path, text)
        return path
