"""The multi-turn loop: each session sends its whole history again, with the model's real answers.

Sessions run concurrently (N sessions, N requests in flight at most). A session's turn ``t``:
think (a pause drawn from ``--think-time``; none before the first turn), append the next user
turn, send the whole history on the chat API, stream the answer, append it as the assistant
turn. Records are labelled per turn (``sessions=4 turn 2``), so the summary has a cell per turn
index and the prefix cache's work over a conversation shows turn by turn.

A turn that fails ends its session (there is no answer to carry on with); an answer that is
empty carries on with an empty assistant turn, as a chat client would.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ttft.core.errors import TtftError
from ttft.core.records import ErrorInfo, RequestRecord
from ttft.load.runner import CellPlan, Runner
from ttft.workload.conversations import Conversation, SessionsSpec
from ttft.workload.requests import WorkItem, chat_body


@runtime_checkable
class TextSender(Protocol):
    """A sender that also returns the answer's text (``load.bench.ClientSender`` is one)."""

    async def send_collecting(self, item: WorkItem, record: RequestRecord) -> str: ...


def turn_label(cell: str, turn: int) -> str:
    return f"{cell} turn {turn}"


@dataclass
class SessionLoop:
    """Run ``conversations`` concurrently, ``max_tokens`` per answer, think times seeded."""

    conversations: Sequence[Conversation]
    spec: SessionsSpec
    max_tokens: int
    seed: str = "ttft"

    async def run(self, runner: Runner, plan: CellPlan) -> list[RequestRecord]:
        sender = runner.sender
        if not isinstance(sender, TextSender):
            raise TtftError("multi-turn sessions need a sender that returns the answer's text")
        results: list[RequestRecord] = []

        async def send(item: WorkItem, record: RequestRecord) -> str:
            try:
                text = await sender.send_collecting(item, record)
            except asyncio.CancelledError:
                record.error = ErrorInfo("cancelled", "the run stopped before this turn finished")
                runner.on_record(record)
                raise
            runner.on_record(record)
            return text

        async def session(index: int, conversation: Conversation) -> None:
            rng = random.Random(f"{self.seed}/think/{index}")
            history: list[dict[str, Any]] = [dict(m) for m in conversation.prefix]
            for turn, user in enumerate(conversation.users, start=1):
                if turn > 1:
                    await asyncio.sleep(self.spec.think_time(rng))
                history.append({"role": "user", "content": user})
                item = WorkItem(
                    chat_body(list(history), self.max_tokens),
                    "chat",
                    plan.cell,
                    None,
                    {"session": index, "turn": turn},
                )
                record = runner.new_record(plan)
                record.cell = turn_label(plan.cell, turn)
                record.session, record.turn = index, turn
                record.scheduled_ns = runner.now()
                answer = await send(item, record)
                results.append(record)
                if record.error is not None:
                    return
                history.append({"role": "assistant", "content": answer})

        await asyncio.gather(*(session(i, c) for i, c in enumerate(self.conversations)))
        return results
