"""What a trial sends: shared-prefix prompts, prompts with a timestamp first, or a request log.

Prompts are sized in words of deterministic filler text (about 1.3 tokens per word with common
tokenizers), so a tune run needs no tokenizer; the records carry the prompt tokens the server
counted. Every request gets its own user message, and every call of ``items`` its own seed tag, so
warm-up prompts never hand the measured ones a prefix-cache hit beyond the shared part.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ttft.core.errors import TtftError
from ttft.prompts.log_analysis import analyse_bodies, analyse_log
from ttft.workload.request_log import load_request_log
from ttft.workload.requests import WorkItem, chat_body
from ttft.workload.run_mark import mark_start
from ttft.workload.text_source import sentence_text

# unique: every request its own prompt of prefix_words (the prompt-length axis, no cache hits)
Shape = Literal["shared-prefix", "timestamp-first", "unique", "log"]
# Request transforms an A/B step can apply; the same move the gateway's hygiene makes.
TRANSFORMS = ("move-dynamic", "pre-render")

_CLOCK_START = dt.datetime(2026, 1, 5, 9, 0, 0, tzinfo=dt.UTC)


@dataclass(frozen=True)
class TuneWorkload:
    shape: Shape = "shared-prefix"
    prefix_words: int = 120
    suffix_words: int = 12
    max_tokens: int = 8
    requests: int = 8  # at least this many per load level (and at least 2 rounds of the load)
    log_path: Path | None = None
    transforms: tuple[str, ...] = ()
    seed: str = "tune"
    # For "pre-render": the engine's chat template as a function (set by the runner, which can
    # ask the engine for it); not part of what identifies the workload.
    render: Callable[[list[dict[str, Any]]], str] | None = field(
        default=None, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        unknown = [t for t in self.transforms if t not in TRANSFORMS]
        if unknown:
            raise TtftError(f"unknown request transform {unknown[0]!r}", f"use {TRANSFORMS}")
        if self.shape == "log" and self.log_path is None:
            raise TtftError("a request-log workload needs the log's path")

    def with_transforms(self, transforms: Sequence[str]) -> TuneWorkload:
        return replace(self, transforms=tuple(transforms))

    def describe(self) -> dict[str, Any]:
        """What identifies the workload in an experiment's spec (and in trial ids)."""
        data = asdict(self)
        data.pop("render", None)
        data["log_path"] = None if self.log_path is None else str(self.log_path)
        data["transforms"] = list(self.transforms)
        return data

    def items(self, count: int, tag: str, *, run: str = "") -> list[WorkItem]:
        """``count`` requests for the cell ``tag``. ``run`` is the trial's own mark: a service
        that is not restarted between trials keeps a trial's prompts in its prefix cache, and a
        repeat that sent them again would read as cached what the first computed (the baseline
        of an A/B chain came out as fast as its fix). With it, every prompt starts with the mark,
        after the transforms that read the batch (move-dynamic)."""
        if self.shape == "log":
            assert self.log_path is not None
            log = load_request_log(self.log_path)
            if not log:
                raise TtftError(f"{self.log_path} holds no requests")
            if "move-dynamic" in self.transforms:
                # The spans the log analysis finds over the whole log: the same ones lint and
                # doctor name, moved the same way in every request.
                log = analyse_log(log).moved_all()
            bodies = [chat_body(log[i % len(log)].messages, self.max_tokens) for i in range(count)]
            return [self._transformed(body, run) for body in bodies]
        system = sentence_text(f"{self.seed}/system", self.prefix_words)
        bodies = []
        for i in range(count):
            user = sentence_text(f"{self.seed}/{tag}/user/{i}", self.suffix_words)
            text = system
            if self.shape == "unique":
                text = sentence_text(f"{self.seed}/{tag}/system/{i}", self.prefix_words)
            if self.shape == "timestamp-first":
                # A clock that moves per request, as an application's "now" would.
                stamp = _CLOCK_START + dt.timedelta(seconds=37 * i + 3 * len(tag))
                text = f"Current time: {stamp:%Y-%m-%dT%H:%M:%SZ}\n{system}"
            messages = [
                {"role": "system", "content": text},
                {"role": "user", "content": user},
            ]
            bodies.append(chat_body(messages, self.max_tokens))
        if "move-dynamic" in self.transforms:
            moved = analyse_bodies(bodies).moved_all()
            bodies = [{**b, "messages": m.messages} for b, m in zip(bodies, moved, strict=True)]
        return [self._transformed(body, run) for body in bodies]

    def _transformed(self, body: dict[str, Any], run: str) -> WorkItem:
        """``body`` as the step sends it, with the trial's mark (move-dynamic is applied before:
        it reads the batch)."""
        if run:
            body = {**body, "messages": mark_start(body["messages"], f"[{run}] ")}
        if "pre-render" in self.transforms:
            if self.render is None:
                raise TtftError(
                    "the pre-render transform needs the engine's chat template",
                    "run it in a plan (tune ab --plan), where ttft reads the template from /props",
                )
            prompt = self.render(body["messages"])
            rest = {k: v for k, v in body.items() if k != "messages"}
            return WorkItem({**rest, "prompt": prompt}, "completions", self.shape)
        return WorkItem(body, "chat", self.shape)
