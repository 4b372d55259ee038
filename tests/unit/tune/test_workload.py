from __future__ import annotations

import json
from dataclasses import replace
from os.path import commonprefix
from pathlib import Path
from typing import Any

import pytest

from ttft.core.errors import TtftError
from ttft.tune.runner import llama_settings
from ttft.tune.workload import TuneWorkload


def system_and_user(item: object) -> tuple[str, str]:
    messages = item.body["messages"]  # type: ignore[attr-defined]
    return messages[0]["content"], messages[-1]["content"]


def test_shared_prefix_items_share_the_system_prompt_only() -> None:
    items = TuneWorkload(prefix_words=50, suffix_words=5).items(3, "c=1")
    systems = {system_and_user(i)[0] for i in items}
    users = {system_and_user(i)[1] for i in items}
    assert len(systems) == 1 and len(users) == 3
    assert items[0].body["max_tokens"] == 8
    # Another tag (warm-up, another level) gives other user messages, the same prefix.
    other = TuneWorkload(prefix_words=50, suffix_words=5).items(1, "warmup/c=1")
    assert system_and_user(other[0])[0] in systems
    assert system_and_user(other[0])[1] not in users


def test_timestamp_first_breaks_the_prefix_and_moving_it_restores_it() -> None:
    workload = TuneWorkload(shape="timestamp-first", prefix_words=50)
    items = workload.items(3, "c=4")
    systems = [system_and_user(i)[0] for i in items]
    assert all(s.startswith("Current time: ") for s in systems) and len(set(systems)) == 3
    moved = workload.with_transforms(["move-dynamic"]).items(3, "c=4")
    moved_systems = {system_and_user(i)[0] for i in moved}
    assert len(moved_systems) == 1 and "Current time" not in next(iter(moved_systems))
    for item in moved:
        assert system_and_user(item)[1].splitlines()[-1].startswith("Current time: ")


def test_request_log_workload_cycles_the_log(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    bodies = [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(2)]
    log.write_text("\n".join(json.dumps(b) for b in bodies) + "\n")
    items = TuneWorkload(shape="log", log_path=log, max_tokens=4).items(3, "c=1")
    assert [system_and_user(i)[1] for i in items] == ["q0", "q1", "q0"]
    with pytest.raises(TtftError, match="log's path"):
        TuneWorkload(shape="log")
    with pytest.raises(TtftError, match="unknown request transform"):
        TuneWorkload(transforms=("pre-rendered",))


def test_llama_settings_scale_the_context_with_the_slots() -> None:
    settings = llama_settings(
        {"-np": "4", "-ub": "128", "-fa": "off"}, per_slot_ctx=1024, threads=1
    )
    assert settings["parallel"] == 4 and settings["ctx_size"] == 4096
    assert settings["ubatch_size"] == 128 and settings["flash_attn"] == "off"
    assert settings["threads"] == 1 and settings["extra_args"] == ()
    other = llama_settings({"--swa-full": "", "-c": "8192"}, per_slot_ctx=1024, threads=None)
    assert other["ctx_size"] == 8192 and other["parallel"] == 1
    assert other["extra_args"] == ("--swa-full",)
    with pytest.raises(TtftError, match="takes a number"):
        llama_settings({"-np": "many"}, per_slot_ctx=1024, threads=None)


def test_pre_render_sends_the_rendered_conversation_to_completions() -> None:
    workload = TuneWorkload(shape="timestamp-first", requests=2, transforms=("pre-render",))
    with pytest.raises(TtftError, match="chat template"):
        workload.items(1, "c=1")

    def render(messages: list[dict[str, Any]]) -> str:
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    items = replace(workload, render=render).items(2, "c=1")
    assert [i.api for i in items] == ["completions", "completions"]
    assert items[0].body["prompt"].startswith("<system>Current time:")
    assert "messages" not in items[0].body and items[0].body["max_tokens"] == 8
    # The renderer is not part of what identifies the workload (trial ids stay stable).
    assert replace(workload, render=render).describe() == workload.describe()


@pytest.mark.parametrize("name", ["second-line", "mid-sentence", "few-shot", "first-line"])
def test_move_dynamic_on_a_log_moves_what_the_log_analysis_finds_wherever_it_sits(
    tmp_path: Path, name: str
) -> None:
    from ttft.testing.dynamic_logs import BUILDERS

    log = BUILDERS[name](count=4, words=60)
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(b) + "\n" for b in log.bodies))
    plain = TuneWorkload(shape="log", log_path=path).items(4, "c=1")
    moved = TuneWorkload(shape="log", log_path=path, transforms=("move-dynamic",)).items(4, "c=1")
    assert len({json.dumps(i.body["messages"][:-1]) for i in plain}) > 1
    assert len({json.dumps(i.body["messages"][:-1]) for i in moved}) == 1
    for item, values in zip(moved, log.expected, strict=True):
        assert all(v in item.body["messages"][-1]["content"] for v in values)


def _shared_start(a: str, b: str) -> int:
    return len(commonprefix([a, b]))  # noqa: RUF071 (characters, not path parts)


@pytest.mark.parametrize("shape", ["shared-prefix", "timestamp-first", "unique", "log"])
def test_two_trials_share_no_more_than_the_static_prefix_with_each_other(
    tmp_path: Path, shape: str
) -> None:
    """A service that is not restarted between trials keeps their prompts cached: a repeat of
    a trial that sent the same prompts again found them computed (the A/B baseline read as fast
    as its fix). With its own ``run`` mark, a trial's request shares with the other trial's at
    most what its own cell's requests share with each other."""
    from ttft.testing.dynamic_logs import BUILDERS

    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(b) + "\n" for b in BUILDERS["first-line"](count=3).bodies))
    workload = TuneWorkload(shape=shape, log_path=path if shape == "log" else None)  # type: ignore[arg-type]

    def prompts(run: str, tag: str = "c=2") -> list[str]:
        return [json.dumps(i.body["messages"]) for i in workload.items(3, tag, run=run)]

    first, second = prompts("aaaa1111"), prompts("bbbb2222")
    within = max(_shared_start(a, b) for a in first for b in first if a is not b)
    across = max(_shared_start(a, b) for a in first for b in second)
    assert across <= within
    assert all(a != b for a in first for b in second)
    # The warm-up and the measured cell of one trial share their start, as in service.
    warm = prompts("aaaa1111", "warmup/c=2")
    assert max(_shared_start(w, m) for w in warm for m in first) >= within
