"""The plan file (ttft.core.plan): written readable, read back exactly, checked line by line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ttft.core import toml_text
from ttft.core.changes import Change
from ttft.core.findings import CostTier, Finding, Severity
from ttft.core.plan import (
    Plan,
    PlanStep,
    ServiceSpec,
    parse_plan,
    plan_from_findings,
    plan_to_toml,
)
from ttft.core.text_edits import TextEdit

CONF = "/etc/nginx/conf.d/llm.conf"

PROXY = Change(
    "proxy buffering off",
    edits=(
        TextEdit(CONF, 14, "replace", "proxy_buffering on;", "proxy_buffering off;"),
        TextEdit(CONF, 9, "insert", "location /v1/ {", "proxy_http_version 1.1;"),
        TextEdit(CONF, 20, "delete", "gzip on;"),
    ),
    tier=CostTier.TRANSPORT,
    rule="nginx/proxy-buffering",
)
MOVE = Change("dynamic text last", transforms=("move-dynamic",), tier=CostTier.CACHE)
FLAGS = Change(
    "4 slots, continuous batching",
    flags={"-np": "4", "--cont-batching": ""},
    unset=("--no-cont-batching", "-ub"),
    tier=CostTier.SCHEDULING,
    rule="llamacpp/one-slot",
    engine="llamacpp",
)
CLIENT = Change("cap concurrency", client={"concurrency": "8"})
GATEWAY = Change("gateway in front", gateway={"max-queue": "64", "route": "least-loaded"})
GATEWAY_DEFAULTS = Change("gateway with defaults", gateway={})
DIRECT = Change("skip the proxy", url="http://127.0.0.1:8081", tier=CostTier.PRECISION)

SERVICE = ServiceSpec(
    url="http://127.0.0.1:8080",
    engine="llamacpp",
    direct_url="http://127.0.0.1:8081",
    launch="llama-server -m 'model.gguf' -np 1 --port 8081",
    nginx_conf=CONF,
    requests_log="requests.jsonl",
    concurrency=8,
    max_tokens=32,
    requests=40,
    repeats=3,
    apply="manual",
    slos=("ttft:p99<600ms", "tpot:p95<50ms"),
)


def _plan(*changes: Change) -> Plan:
    steps = tuple(PlanStep(c, why=f"because {c.label}", expected_gain_ms=12.5) for c in changes)
    return Plan(service=SERVICE, steps=steps, created="2026-12-01T21:55:00+00:00")


# --- round trip ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [PROXY, MOVE, FLAGS, CLIENT, GATEWAY, GATEWAY_DEFAULTS, DIRECT, Change("nothing yet")],
    ids=lambda c: c.label,
)
def test_every_kind_of_change_reads_back_as_written(change: Change) -> None:
    plan = _plan(change)
    assert parse_plan(plan_to_toml(plan)) == plan


def test_a_plan_of_every_kind_keeps_its_step_order_and_switches() -> None:
    steps = (
        PlanStep(PROXY, why="buffered", expected_gain_ms=120.0),
        PlanStep(MOVE),
        PlanStep(FLAGS, enabled=False, expected_gain_ms=0.0),
        PlanStep(CLIENT, expected_gain_ms=1e-05),
        PlanStep(GATEWAY, expected_gain_ms=1e16),
        PlanStep(DIRECT, expected_gain_ms=-3.0),
    )
    plan = Plan(
        SERVICE, steps, unapplied=("weights/quant: requantise by hand",), source="ttft doctor"
    )
    back = parse_plan(plan_to_toml(plan))
    assert back == plan
    assert [s.change.label for s in back.enabled_steps()] == [
        c.label for c in (PROXY, MOVE, CLIENT, GATEWAY, DIRECT)
    ]


def test_a_bare_plan_reads_back_with_the_service_defaults() -> None:
    plan = Plan(ServiceSpec())
    text = plan_to_toml(plan)
    assert parse_plan(text) == plan
    assert "\n[[step]]\n" not in text and "\nunapplied" not in text


TRICKY = [
    "",
    '"',
    "\\",
    '\\"',
    'say "hi"',
    "a\nb",
    "windows\r\nline",
    "tab\there",
    "nul\x00byte",
    "bell\x07 esc\x1b del\x7f",
    "\x1f\b\f",
    "c1 \x85 control",
    "é ü ß",
    "日本語のテキスト",
    "emoji 🙂 and 👩‍👩‍👧",
    "\u2028 line separator \u2029",
    "\ufeff bom inside",
    "# not a comment",
    "value # with a hash",
    "'single quotes'",
    '"""triple"""',
    "'''literal'''",
    "\\u0041 literal backslash-u",
    "\\n literal backslash-n",
    "trailing backslash \\",
    "[[step]]",
    '\n[[step]]\nlabel = "injected"',
    'key = "value"',
    "{ inline = table }",
    "  leading and trailing spaces  ",
    "$(rm -rf /) ${HOME} `id`",
]


@pytest.mark.parametrize("text", TRICKY, ids=range(len(TRICKY)))
def test_tricky_strings_read_back_exactly_in_every_string_field(text: str) -> None:
    change = Change(
        label="label " + text,
        flags={text: text, "-x" + text: ""},
        unset=(text, "--other"),
        edits=(TextEdit(text or "f", 3, "replace", text, text),),
        url=text,
        gateway={text: text},
        client={"concurrency": text},
        rule=text,
        engine=text,
    )
    service = ServiceSpec(
        url=text, engine=text, direct_url=text, launch=text, nginx_conf=text, requests_log=text
    )
    plan = Plan(
        service,
        (PlanStep(change, why=text),),
        unapplied=(text, f"rule/x: {text}"),
        source=text,
        created=text,
    )
    written = plan_to_toml(plan)
    assert parse_plan(written) == plan
    # Nothing a string holds can start a line of its own (a header, a key) in the file.
    assert sum(line == "[[step]]" for line in written.splitlines()) == 1


def test_string_escapes_keep_non_ascii_readable_and_controls_visible() -> None:
    assert toml_text.string('a"b\\c\nd\te\x01é🙂') == '"a\\"b\\\\c\\nd\\te\\u0001é🙂"'
    assert toml_text.comment("one\ntwo\tthree") == "one\\ntwo\tthree"


# --- the written file ----------------------------------------------------------------------------


def test_the_written_file_says_what_it_is_how_to_switch_a_step_off_and_how_to_run_it() -> None:
    text = plan_to_toml(_plan(PROXY))
    header = text.split("schema")[0]
    assert all(line.startswith("#") for line in header.strip().splitlines())
    assert "enabled = false" in header
    assert "ttft tune ab --plan plan.toml" in header
    assert "order written" in header and "cheapest first" in header
    assert 'schema = "ttft.plan/1"' in text


def test_flags_are_an_inline_table_with_quoted_names_and_tier_has_its_name_beside_it() -> None:
    text = plan_to_toml(_plan(FLAGS))
    assert 'flags = { "-np" = "4", "--cont-batching" = "" }' in text
    assert "tier = 2  # scheduling" in text
    assert 'unset = ["--no-cont-batching", "-ub"]' in text
    assert 'client = { concurrency = "8" }' in plan_to_toml(_plan(CLIENT))


def test_proxy_edits_are_step_edit_sub_tables_after_the_step_keys() -> None:
    text = plan_to_toml(_plan(PROXY))
    assert text.count("[[step.edit]]") == 3
    step = text[text.index("[[step]]") :]
    assert step.index("enabled = true") < step.index("[[step.edit]]")
    edits = tomllib.loads(text)["step"][0]["edit"]
    assert edits[2] == {"file": CONF, "line": 20, "action": "delete", "old": "gzip on;"}


def test_empty_and_absent_values_are_left_out() -> None:
    text = plan_to_toml(Plan(ServiceSpec(url="http://x"), (PlanStep(Change("bare")),)))
    step = tomllib.loads(text)["step"][0]
    assert step == {"label": "bare", "enabled": True}
    assert set(tomllib.loads(text)["service"]) == {
        "url", "concurrency", "max_tokens", "requests", "repeats", "apply", "accept_encoding",
    }  # fmt: skip


def test_findings_without_a_change_are_listed_at_the_top_and_as_comments_at_the_end() -> None:
    plan = Plan(SERVICE, unapplied=("weights/quant: requantise\nby hand",))
    text = plan_to_toml(plan)
    assert tomllib.loads(text)["unapplied"] == ["weights/quant: requantise\nby hand"]
    tail = text.rstrip().splitlines()[-2:]
    assert tail[0].startswith("# Not applied automatically")
    assert tail[1] == "#   weights/quant: requantise\\nby hand"


# --- from findings -------------------------------------------------------------------------------


def test_a_plan_from_findings_orders_changes_cheapest_first_and_lists_the_rest() -> None:
    def finding(rule: str, change: Change | None, action: str = "") -> Finding:
        return Finding(rule, Severity.WARNING, f"{rule} title", "the\n cause", action=action,
                       change=change, expected_gain_ms=5.0)  # fmt: skip

    plan = plan_from_findings(
        [
            finding("llamacpp/one-slot", FLAGS),
            finding("weights/quant", None, "requantise to Q4_K_M"),
            finding("nginx/proxy-buffering", PROXY),
            finding("client/concurrency", CLIENT),
        ],
        SERVICE,
        created="now",
    )
    assert [s.change.label for s in plan.steps] == [CLIENT.label, PROXY.label, FLAGS.label]
    assert plan.steps[0].change.rule == "client/concurrency"  # filled from the finding
    assert plan.steps[0].why == "client/concurrency title: the cause"
    assert plan.unapplied == ("weights/quant: requantise to Q4_K_M",)
    assert parse_plan(plan_to_toml(plan)) == plan


def test_the_example_in_the_docs_is_what_the_writer_writes() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "plan.md").read_text(encoding="utf-8")
    example = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    plan = parse_plan(example, "docs/plan.md")
    assert plan_to_toml(plan) == example
    kinds = [s.change.kinds for s in plan.steps]
    assert kinds == [("client",), ("proxy",), ("engine",), ("request",)]
    costs = [s.change.cost_key() for s in plan.steps]
    assert costs == sorted(costs)  # cheapest first, as doctor writes it
