"""A Plan: the service to measure and an ordered list of Changes, written as editable TOML.

``ttft doctor --plan`` writes one from its findings, cheapest first; a person reads it, switches
steps off (``enabled = false``), reorders or edits them; ``ttft tune ab --plan`` runs it as an
Experiment, applying the enabled steps cumulatively in the order written. The file is the
contract between the two, so reading it is strict: any key, type or value the runner would
not understand is an error naming the line and the fix, never silently ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ttft.core import toml_text as tt
from ttft.core.changes import Change
from ttft.core.errors import TtftError
from ttft.core.findings import CostTier, Finding
from ttft.core.slo import parse_slo
from ttft.core.text_edits import ACTIONS, TextEdit
from ttft.core.toml_check import TablePath, TomlChecker, shown

SCHEMA = "ttft.plan/1"
APPLY_MODES = ("auto", "manual")
KNOWN_TRANSFORMS: tuple[str, ...] = ("move-dynamic", "pre-render")


@dataclass(frozen=True)
class ServiceSpec:
    """How the service is built and measured."""

    url: str | None = None  # as clients reach it (through the proxy, if there is one)
    engine: str | None = None  # llamacpp, vllm, sglang, tgi
    direct_url: str | None = None  # the engine itself, behind the proxy
    launch: str | None = None  # the engine's launch command line, a shell string
    # For an engine ttft does not start: a shell command that restarts it with a run's flags
    # ({launch}: the launch command with them set; {args}: the flags alone).
    restart: str | None = None
    nginx_conf: str | None = None  # the proxy's configuration file
    requests_log: str | None = None  # JSONL of chat bodies to replay
    concurrency: int = 4
    max_tokens: int = 64
    requests: int = 16  # measured requests per run
    repeats: int = 2
    apply: str = "auto"  # "manual": every step that is not request-side pauses for the user
    slos: tuple[str, ...] = ()
    # What the service's clients ask for: browsers, httpx, aiohttp and the OpenAI SDKs send gzip,
    # and a proxy that compresses event streams only holds them back for such clients.
    accept_encoding: str = "gzip"


@dataclass(frozen=True)
class PlanStep:
    change: Change
    why: str = ""  # the finding's symptom and cause, one line
    expected_gain_ms: float | None = None
    enabled: bool = True  # a person can switch a step off without deleting it


@dataclass(frozen=True)
class Plan:
    service: ServiceSpec
    steps: tuple[PlanStep, ...] = ()
    unapplied: tuple[str, ...] = ()  # per finding with no automatic change: rule, what to do
    source: str | None = None  # what the plan was written from (informational)
    created: str = ""  # wall-clock ISO stamp (informational)

    def enabled_steps(self) -> tuple[PlanStep, ...]:
        return tuple(s for s in self.steps if s.enabled)


def plan_from_findings(
    findings: Iterable[Finding],
    service: ServiceSpec,
    *,
    created: str = "",
    source: str | None = None,
) -> Plan:
    """A step per finding that carries a change, cheapest first; the rest as lines to do by hand."""
    steps: list[PlanStep] = []
    unapplied: list[str] = []
    for f in findings:
        if f.change is None:
            unapplied.append(f"{f.rule}: {_one_line(f.action or f.title)}")
            continue
        change = f.change if f.change.rule else replace(f.change, rule=f.rule)
        steps.append(PlanStep(change, _one_line(f"{f.title}: {f.message}"), f.expected_gain_ms))
    # Stable: findings of equal cost keep the order they were given in (order_by_cost's rule).
    steps.sort(key=lambda s: s.change.cost_key())
    return Plan(service, tuple(steps), tuple(unapplied), source, created)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- writing -------------------------------------------------------------------------------------

_HEADER = """\
# A ttft plan: the service to measure and the changes to try on it, one [[step]] each.
# `ttft tune ab --plan plan.toml` runs it as an experiment: a baseline, then the enabled steps
# applied cumulatively in the order written here (ttft doctor writes them cheapest first).
# Edit freely: reorder steps, change values, or switch a step off with `enabled = false`.
# Strings are TOML basic strings: write \\" for a quote, \\\\ for a backslash, \\n for a newline.
"""

_SERVICE_COMMENTS = {
    "concurrency": "requests in flight",
    "requests": "measured requests per run",
    "repeats": "runs per arm",
    "apply": 'or "manual": pause for you at each step that is not request-side',
    "accept_encoding": "what your clients send (gzip: browsers, httpx, OpenAI SDKs)",
}


def plan_to_toml(plan: Plan) -> str:
    """The plan as a readable, editable TOML file that ``parse_plan`` reads back as ``plan``."""
    out = [_HEADER, f"schema = {tt.string(SCHEMA)}"]
    if plan.created:
        out.append(f"created = {tt.string(plan.created)}")
    if plan.source is not None:
        out.append(f"source = {tt.string(plan.source)}")
    if plan.unapplied:
        out.append("unapplied = [  # findings with no automatic change; listed again at the end")
        out.extend(f"  {tt.string(line)}," for line in plan.unapplied)
        out.append("]")
    out += ["", "[service]"]
    spec = plan.service
    for name in ("url", "engine", "direct_url", "launch", "restart", "nginx_conf", "requests_log"):
        text = getattr(spec, name)
        if text is not None:
            out.append(f"{name} = {tt.string(text)}")
    for name in ("concurrency", "max_tokens", "requests", "repeats", "apply", "accept_encoding"):
        line = f"{name} = {tt.value(getattr(spec, name))}"
        note = _SERVICE_COMMENTS.get(name)
        out.append(f"{line}  # {note}" if note else line)
    if spec.slos:
        out.append(f"slos = {tt.value(spec.slos)}")
    for number, step in enumerate(plan.steps, start=1):
        out += ["", *_step_lines(number, step)]
    if plan.unapplied:
        out += ["", "# Not applied automatically (do these by hand, then measure again):"]
        out.extend(f"#   {tt.comment(line)}" for line in plan.unapplied)
    return "\n".join(out) + "\n"


def _step_lines(number: int, step: PlanStep) -> list[str]:
    change = step.change
    out = [f"# step {number}: {tt.comment(change.summary())}", "[[step]]"]
    out.append(f"label = {tt.string(change.label)}")
    if change.rule:
        out.append(f"rule = {tt.string(change.rule)}")
    if change.tier is not None:
        out.append(f"tier = {change.tier.value}  # {change.tier.label}")
    if step.why:
        out.append(f"why = {tt.string(step.why)}")
    if step.expected_gain_ms is not None:
        out.append(f"expected_gain_ms = {tt.value(float(step.expected_gain_ms))}")
    out.append(f"enabled = {tt.value(step.enabled)}")
    if change.flags:  # flag names always quoted: a bare -np reads like arithmetic
        out.append(f"flags = {tt.value(change.flags, quote_keys=True)}")
    if change.unset:
        out.append(f"unset = {tt.value(change.unset)}")
    if change.transforms:
        out.append(f"transforms = {tt.value(change.transforms)}")
    if change.url is not None:
        out.append(f"url = {tt.string(change.url)}")
    if change.engine is not None:
        out.append(f"engine = {tt.string(change.engine)}")
    if change.gateway is not None:  # {} is meaningful: the gateway with its defaults
        out.append(f"gateway = {tt.value(change.gateway)}")
    if change.client:
        out.append(f"client = {tt.value(change.client)}")
    for edit in change.edits:  # sub-tables last: TOML puts every key after them in the edit
        out += ["[[step.edit]]", f"file = {tt.string(edit.file)}", f"line = {edit.line}"]
        out += [f"action = {tt.string(edit.action)}", f"old = {tt.string(edit.old)}"]
        if edit.new:
            out.append(f"new = {tt.string(edit.new)}")
    return out


# --- reading -------------------------------------------------------------------------------------

_TOP_KEYS = ("schema", "created", "source", "unapplied", "service", "step")
_SERVICE_KEYS = tuple(ServiceSpec.__dataclass_fields__)
_STEP_KEYS = (
    "label", "rule", "tier", "why", "expected_gain_ms", "enabled", "flags", "unset",
    "transforms", "url", "engine", "gateway", "client", "edit",
)  # fmt: skip
_EDIT_KEYS = ("file", "line", "action", "old", "new")
_POSITIVE = ("concurrency", "max_tokens", "requests", "repeats")


def load_plan(
    path: str | os.PathLike[str], *, known_transforms: Collection[str] = KNOWN_TRANSFORMS
) -> Plan:
    """Read a plan file; a file that cannot be read is a TtftError naming it."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8-sig") as handle:  # -sig: an editor may add a BOM
            text = handle.read()
    except FileNotFoundError:
        raise TtftError(
            f"plan file {name} not found", "write one with `ttft doctor --plan plan.toml`"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"cannot read plan file {name}: {exc}", "check the path") from None
    return parse_plan(text, name, known_transforms=known_transforms)


def parse_plan(
    text: str, source: str = "plan.toml", *, known_transforms: Collection[str] = KNOWN_TRANSFORMS
) -> Plan:
    """A plan from TOML text; every problem is a TtftError naming ``source:LINE`` and the fix."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, message = tt.decode_error(exc, text)
        raise TtftError(
            f"{source}:{line}: not valid TOML: {message}",
            "fix the syntax on that line (strings in double quotes; see docs/plan.md)",
        ) from None
    return _Reader(text, source, known_transforms).plan(raw)


class _Reader(TomlChecker):
    """Checks the parsed tables of a plan, naming the line of anything the runner cannot use."""

    def __init__(self, text: str, source: str, known_transforms: Collection[str]) -> None:
        super().__init__(text, source)
        self.transforms = tuple(known_transforms)

    def where(self, path: TablePath) -> str:
        if not path:
            return "the plan"
        if path[0] == "service":
            return "[service]"
        return f"step {path[1]}" + (f" edit {path[3]}" if len(path) > 2 else "")

    def plan(self, raw: Mapping[str, Any]) -> Plan:
        self.keys(raw, (), _TOP_KEYS)
        schema = raw.get("schema")
        if schema != SCHEMA:
            problem = "no schema" if schema is None else f"schema {shown(schema)} is not {SCHEMA}"
            raise self.fail(
                (), "schema", f"{problem}: this is not a ttft plan", f'schema = "{SCHEMA}"'
            )
        created = raw.get("created", "")
        if hasattr(created, "isoformat"):  # an unquoted TOML date-time: keep it, as text
            created = created.isoformat()
        else:
            created = self.typed(raw, (), "created", "string") or ""
        source = self.typed(raw, (), "source", "string")
        unapplied = tuple(self.typed(raw, (), "unapplied", "list of strings") or ())
        service = raw.get("service", {})
        if not isinstance(service, dict):
            raise self.fail((), "service", "service must be a table", "write it as [service]")
        steps = raw.get("step", [])
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            raise self.fail((), "step", "step must be tables", "write each step as [[step]]")
        return Plan(
            service=self.service(service),
            steps=tuple(self.step(s, number) for number, s in enumerate(steps, start=1)),
            unapplied=unapplied,
            source=source,
            created=created,
        )

    def service(self, table: Mapping[str, Any]) -> ServiceSpec:
        path: TablePath = ("service",)
        self.keys(table, path, _SERVICE_KEYS)
        values: dict[str, Any] = {}
        for name in ("url", "engine", "direct_url", "launch", "restart", "nginx_conf"):
            values[name] = self.typed(table, path, name, "string")
        values["requests_log"] = self.typed(table, path, "requests_log", "string")
        encoding = self.typed(table, path, "accept_encoding", "string")
        if encoding is not None:
            values["accept_encoding"] = encoding
        for name in _POSITIVE:
            number = self.typed(table, path, name, "integer")
            if number is not None and number < 1:
                raise self.fail(path, name, f"[service]: {name} must be at least 1", f"{name} = 1")
            if number is not None:
                values[name] = number
        apply = self.typed(table, path, "apply", "string")
        if apply is not None and apply not in APPLY_MODES:
            raise self.fail(
                path,
                "apply",
                f"[service]: apply {apply!r} is not one of {', '.join(APPLY_MODES)}",
                'apply = "auto" (ttft applies the changes) or "manual" (it pauses for you)',
            )
        if apply is not None:
            values["apply"] = apply
        slos = tuple(self.typed(table, path, "slos", "list of strings") or ())
        for slo in slos:
            try:
                parse_slo(slo)
            except TtftError as exc:
                raise self.fail(path, "slos", f"[service]: {exc.problem}", exc.fix or "") from None
        return ServiceSpec(**values, slos=slos)

    def step(self, table: Mapping[str, Any], number: int) -> PlanStep:
        path: TablePath = ("step", number)
        self.keys(table, path, _STEP_KEYS)
        label = self.typed(table, path, "label", "string")
        if not label:
            raise self.fail(
                path,
                "label" if "label" in table else None,
                f"step {number} has no label",
                'name what it changes, e.g. label = "4 parallel slots"',
            )
        tier = self.typed(table, path, "tier", "integer")
        if tier is not None and tier not in {t.value for t in CostTier}:
            tiers = ", ".join(f"{t.value} {t.label}" for t in CostTier)
            raise self.fail(
                path, "tier", f"step {number}: tier {tier} is not 1..4", f"use one of: {tiers}"
            )
        transforms = tuple(self.typed(table, path, "transforms", "list of strings") or ())
        for name in transforms:
            if name not in self.transforms:
                raise self.fail(
                    path,
                    "transforms",
                    f"step {number}: unknown transform {name!r}",
                    f"use one of: {', '.join(self.transforms) or '(none known)'}",
                )
        edits = table.get("edit", [])
        if not isinstance(edits, list) or not all(isinstance(e, dict) for e in edits):
            raise self.fail(
                path, "edit", f"step {number}: edit must be tables", "write [[step.edit]]"
            )
        gateway = self.typed(table, path, "gateway", "table of strings")
        gain = self.typed(table, path, "expected_gain_ms", "number")
        change = Change(
            label=label,
            flags=_strings(self.typed(table, path, "flags", "table of strings")),
            unset=tuple(self.typed(table, path, "unset", "list of strings") or ()),
            edits=tuple(self.edit(e, number, i) for i, e in enumerate(edits, start=1)),
            transforms=transforms,
            url=self.typed(table, path, "url", "string"),
            gateway=None if gateway is None else _strings(gateway),
            client=_strings(self.typed(table, path, "client", "table of strings")),
            tier=None if tier is None else CostTier(tier),
            rule=self.typed(table, path, "rule", "string") or "",
            engine=self.typed(table, path, "engine", "string"),
        )
        enabled = self.typed(table, path, "enabled", "boolean")
        return PlanStep(
            change=change,
            why=self.typed(table, path, "why", "string") or "",
            expected_gain_ms=None if gain is None else float(gain),
            enabled=True if enabled is None else enabled,
        )

    def edit(self, table: Mapping[str, Any], step: int, number: int) -> TextEdit:
        path: TablePath = ("step", step, "edit", number)
        self.keys(table, path, _EDIT_KEYS)
        where = self.where(path)
        for name in ("file", "line", "action", "old"):
            if name not in table:
                raise self.fail(path, None, f"{where} has no {name}", _EDIT_EXAMPLES[name])
        action = self.typed(table, path, "action", "string")
        if action not in ACTIONS:
            raise self.fail(
                path,
                "action",
                f"{where}: action {action!r} is not one of {', '.join(ACTIONS)}",
                "replace the directive on that line, delete it, or insert a line after it",
            )
        line = self.typed(table, path, "line", "integer")
        if line < 1:
            raise self.fail(
                path, "line", f"{where}: line {line} is before the file", "lines count from 1"
            )
        return TextEdit(
            file=self.typed(table, path, "file", "string"),
            line=line,
            action=action,
            old=self.typed(table, path, "old", "string"),
            new=self.typed(table, path, "new", "string") or "",
        )


def _strings(table: Mapping[str, Any] | None) -> dict[str, str]:
    return {} if table is None else {k: str(v) for k, v in table.items()}


_EDIT_EXAMPLES = {
    "file": 'file = "/etc/nginx/nginx.conf"',
    "line": "line = 12 (the directive's line, from 1)",
    "action": 'action = "replace" (or "delete", "insert")',
    "old": 'old = "the text the edit expects on that line"',
}
