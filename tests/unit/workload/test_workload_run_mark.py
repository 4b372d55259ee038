"""The run's mark: prompts a run reads (files, request logs) start with it, so a second run
against an engine that kept the first one's prefix cache computes its prompts again."""

from __future__ import annotations

import json
from pathlib import Path

from ttft.load.workload_cells import build_cells
from ttft.workload.conversations import Conversation, marked_conversation
from ttft.workload.run_mark import mark_start, marked_body, run_mark
from ttft.workload.spec import WorkloadSpec


def test_the_same_seed_gives_the_same_mark_and_two_seeds_part_at_the_first_character() -> None:
    assert run_mark("ttft-0a1b2c3d") == run_mark("ttft-0a1b2c3d")
    first, second = run_mark("ttft-0a1b2c3d"), run_mark("ttft-0a1b2c3e")
    assert first.startswith("[") and first.endswith("] ")
    assert first[1] != second[1]  # a digest first, not the "ttft-" every default seed starts with


def test_a_mark_goes_before_the_first_text_of_any_body_shape_and_copies() -> None:
    chat = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}
    out = marked_body(chat, "[m] ")
    assert out["messages"][0]["content"] == "[m] S" and out["messages"][1]["content"] == "U"
    assert chat["messages"][0]["content"] == "S"  # the caller's body is not changed
    parts = [{"role": "user", "content": [{"type": "text", "text": "U"}]}]
    assert mark_start(parts, "[m] ")[0]["content"][0] == {"type": "text", "text": "[m] "}
    tool = [{"role": "assistant", "content": None, "tool_calls": []}]
    assert mark_start(tool, "[m] ")[0] == {"role": "system", "content": "[m] "}
    assert marked_body({"prompt": "P"}, "[m] ") == {"prompt": "[m] P"}
    assert marked_body({"input": "x"}, "[m] ") == {"input": "x"}


def test_prompt_file_runs_with_two_seeds_share_no_prefix_but_a_run_keeps_its_own(
    tmp_path: Path,
) -> None:
    """Two requests of the file share a system prompt: within a run they still do (the mark is
    the run's), across two runs nothing is shared from the first character."""
    path = tmp_path / "prompts.jsonl"
    system = {"role": "system", "content": "You are a support bot for ACME."}
    lines = [{"messages": [system, {"role": "user", "content": q}]} for q in ("Hi", "Help")]
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")

    def first_texts(seed: str) -> list[str]:
        spec = WorkloadSpec(prompt_file=path, requests=2, warmup=0, seed=seed)
        cells, _ = build_cells(spec, None)
        return [item.body["messages"][0]["content"] for item in cells[0].items]

    one, two = first_texts("ttft-11111111"), first_texts("ttft-22222222")
    assert one[0] == one[1] and two[0] == two[1]
    assert one[0].endswith(system["content"]) and one[0][1] != two[0][1]
    assert one == first_texts("ttft-11111111")  # --seed given back: the same prompts


def test_a_conversation_is_marked_at_its_system_prompt_or_else_its_first_user_turn() -> None:
    with_system = Conversation(({"role": "system", "content": "S"},), ("U1", "U2"))
    marked = marked_conversation(with_system, "[m] ")
    assert marked.prefix == ({"role": "system", "content": "[m] S"},)
    assert marked.users == ("U1", "U2")
    assert marked_conversation(Conversation((), ("U1", "U2")), "[m] ").users == ("[m] U1", "U2")
