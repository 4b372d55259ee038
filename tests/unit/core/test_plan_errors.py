"""Reading a plan (ttft.core.plan): every problem names ``source:LINE`` and the fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ttft.core.changes import Change
from ttft.core.errors import TtftError
from ttft.core.plan import Plan, PlanStep, ServiceSpec, load_plan, parse_plan, plan_to_toml
from ttft.core.text_edits import TextEdit


def _error(text: str, **kwargs: object) -> TtftError:
    with pytest.raises(TtftError) as caught:
        parse_plan(text, **kwargs)  # type: ignore[arg-type]
    return caught.value


# --- a hand-written plan -----------------------------------------------------------------------

GOOD = """\
schema = "ttft.plan/1"

[service]
url = "http://127.0.0.1:8080"
concurrency = 4

[[step]]
label = "first"
enabled = true

[[step]]
label = "second"
rule = "nginx/proxy-buffering"
flags = { "-np" = "4" }
transforms = ["move-dynamic"]
[[step.edit]]
file = "nginx.conf"
line = 3
action = "replace"
old = "proxy_buffering on;"
new = "proxy_buffering off;"
"""


def _swap(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


def test_the_hand_written_example_reads() -> None:
    plan = parse_plan(GOOD)
    assert [s.change.label for s in plan.steps] == ["first", "second"]
    assert plan.steps[1].change.edits[0].line == 3


def test_a_syntax_error_names_the_file_and_line() -> None:
    error = _error(_swap('label = "second"', "label = second"), source="my.toml")
    assert str(error).startswith("my.toml:12: not valid TOML")
    assert "column" in error.problem and error.fix


def test_an_unknown_step_key_names_its_line_the_step_and_the_known_keys() -> None:
    error = _error(_swap('rule = "nginx', 'flagz = "x"\nrule = "nginx'))
    assert error.problem.startswith("plan.toml:13: step 2 has unknown key 'flagz' (known: label,")
    assert error.fix


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        (
            'schema = "ttft.plan/1"',
            'schema = "ttft.plan/1"\nplan_version = 2',
            "plan.toml:2: the plan",
        ),
        ("concurrency = 4", "concurrency = 4\nconcurency = 5", "plan.toml:6: [service]"),
        ("line = 3", "line = 3\nlines = 4", "plan.toml:19: step 2 edit 1"),
        ('schema = "ttft.plan/1"', 'schema = "ttft.plan/1"\n[steps]', "plan.toml:2: the plan"),
    ],
)
def test_an_unknown_key_anywhere_names_its_line(old: str, new: str, where: str) -> None:
    assert _error(_swap(old, new)).problem.startswith(where + " has unknown key")


@pytest.mark.parametrize(
    ("old", "new", "line", "expected"),
    [
        ("concurrency = 4", 'concurrency = "four"', 5, "[service]: concurrency must be an integer"),
        ("concurrency = 4", "concurrency = true", 5, "[service]: concurrency must be an integer"),
        ("enabled = true", 'enabled = "no"', 9, "step 1: enabled must be a boolean"),
        ('{ "-np" = "4" }', '["-np", "4"]', 14, "step 2: flags must be a table of strings"),
        ('["move-dynamic"]', '"move-dynamic"', 15, "step 2: transforms must be a list of strings"),
        ("line = 3", 'line = "3"', 18, "step 2 edit 1: line must be an integer"),
        ('label = "first"', 'label = "first"\nwhy = 3', 9, "step 1: why must be a string"),
        ('label = "first"', 'label = "first"\nexpected_gain_ms = "lots"', 9, "step 1: expected_"),
    ],
)
def test_a_wrong_type_names_the_line_and_the_type_wanted(
    old: str, new: str, line: int, expected: str
) -> None:
    error = _error(_swap(old, new))
    assert error.problem.startswith(f"plan.toml:{line}: {expected}")
    assert error.fix and error.fix.startswith("write ")


def test_a_count_below_one_is_refused() -> None:
    error = _error(_swap("concurrency = 4", "concurrency = 0"))
    assert error.problem == "plan.toml:5: [service]: concurrency must be at least 1"


def test_an_unknown_transform_is_an_error_and_the_known_set_is_a_parameter() -> None:
    text = _swap('["move-dynamic"]', '["move-dynamik"]')
    error = _error(text)
    assert error.problem == "plan.toml:15: step 2: unknown transform 'move-dynamik'"
    assert error.fix == "use one of: move-dynamic, pre-render"
    assert parse_plan(text, known_transforms={"move-dynamik"}).steps[1].change.transforms
    assert "unknown transform" in _error(GOOD, known_transforms=()).problem


def test_an_edit_action_must_be_replace_delete_or_insert() -> None:
    error = _error(_swap('action = "replace"', 'action = "append"'))
    assert error.problem.startswith("plan.toml:19: step 2 edit 1: action 'append' is not one of")


def test_an_edit_without_its_anchor_names_the_edit_header() -> None:
    error = _error(_swap('old = "proxy_buffering on;"\n', ""))
    assert error.problem == "plan.toml:16: step 2 edit 1 has no old"


@pytest.mark.parametrize("tier", ["0", "5", "-1"])
def test_a_tier_outside_one_to_four_is_an_error_listing_the_tiers(tier: str) -> None:
    error = _error(_swap('label = "first"', f'label = "first"\ntier = {tier}'))
    assert error.problem == f"plan.toml:9: step 1: tier {tier} is not 1..4"
    assert error.fix and "2 scheduling" in error.fix


def test_a_step_without_a_label_names_its_header() -> None:
    error = _error(_swap('label = "second"\n', ""))
    assert error.problem == "plan.toml:11: step 2 has no label"
    assert _error(_swap('label = "first"', 'label = ""')).problem.startswith("plan.toml:8:")


@pytest.mark.parametrize(
    ("schema", "problem"),
    [('"ttft.plan/2"', "schema 'ttft.plan/2' is not ttft.plan/1"), ("1", "schema 1 is not")],
)
def test_a_schema_other_than_ttft_plan_1_is_refused(schema: str, problem: str) -> None:
    error = _error(_swap('"ttft.plan/1"', schema))
    assert error.problem.startswith(f"plan.toml:1: {problem}")
    assert error.fix == 'schema = "ttft.plan/1"'


def test_a_file_without_a_schema_is_not_a_plan() -> None:
    error = _error("[tool.ruff]\nline-length = 100\n", source="pyproject.toml")
    assert error.problem.startswith("pyproject.toml:1: the plan has unknown key 'tool'")
    assert _error("").problem.startswith("plan.toml:1: no schema")


def test_apply_must_be_auto_or_manual_and_slos_must_parse() -> None:
    error = _error(_swap("concurrency = 4", 'apply = "sometimes"'))
    assert error.problem.startswith("plan.toml:5: [service]: apply 'sometimes' is not one of")
    error = _error(_swap("concurrency = 4", 'slos = ["ttft:p99<600"]'))
    assert error.problem.startswith("plan.toml:5: [service]: SLO")


def test_a_number_is_accepted_as_a_flag_value() -> None:
    plan = parse_plan(_swap('"-np" = "4"', '"-np" = 4'))
    assert plan.steps[1].change.flags == {"-np": "4"}


# --- files ---------------------------------------------------------------------------------------


def test_load_plan_reads_a_file_and_names_it_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    edit = TextEdit("nginx.conf", 3, "replace", "proxy_buffering on;", "proxy_buffering off;")
    steps = (PlanStep(Change("off", edits=(edit,))), PlanStep(Change("np", flags={"-np": "4"})))
    plan = Plan(ServiceSpec(url="http://127.0.0.1:8080"), steps, created="2026-12-01")
    path.write_text(plan_to_toml(plan), encoding="utf-8")
    assert load_plan(path) == plan
    path.write_text(_swap("concurrency = 4", "concurrency = []"), encoding="utf-8")
    with pytest.raises(TtftError, match="^" + re.escape(f"{path}:5: ")):
        load_plan(path)


def test_a_missing_plan_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(TtftError) as caught:
        load_plan(missing)
    assert str(missing) in caught.value.problem and "not found" in caught.value.problem
    assert caught.value.fix


def test_a_syntax_error_at_the_end_of_the_file_names_its_last_line() -> None:
    error = _error('schema = "ttft.plan/1"\n\nunapplied = [')
    assert error.problem.startswith("plan.toml:3: not valid TOML: ")
    assert "end of the file" in error.problem


def test_lines_are_found_under_spaced_and_quoted_headers() -> None:
    text = 'schema = "ttft.plan/1"\n[ service ]\n\n[[ "step" ]]\nlabel = "a"\n  "enabled" = 1\n'
    error = _error(text)
    assert error.problem.startswith("plan.toml:6: step 1: enabled must be a boolean, not 1")
