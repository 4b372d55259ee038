"""The text edits that fix what the nginx rules find, and one Change that combines them.

Lint only writes ``TextEdit``s against the files as parsed; applying them (``apply_edits``) and
running nginx on the result live in ``ttft.proxy``. The edits keep to what is safe to do without a
person looking:

- a directive is set in the streaming location itself: the one the location has is replaced,
  else a new line goes in (inserting a second ``proxy_buffering`` would be nginx's "directive is
  duplicate" error). A directive that comes from a file included in the location is edited in
  that file, which nginx reads as part of the location;
- settings at ``server`` or ``http`` level are left alone, since other routes use them;
- a list-like directive (``add_header``, ``proxy_set_header``, ``proxy_ignore_headers``) is only
  removed where that does not bring back inherited ones: nginx uses the outer level's list when a
  level has none of its own, so removing the last one would silently change other headers.

Rules whose fix is not of this kind (a ``proxy_set_header`` in a location replaces every inherited
header; an ``upstream`` block needs ``keepalive``) carry no edits.
"""

from __future__ import annotations

from collections.abc import Iterable

from ttft.core.changes import Change
from ttft.core.findings import CostTier, Finding
from ttft.core.text_edits import TextEdit
from ttft.lint.nginx.config import Directive, Route
from ttft.lint.nginx.rulekit import first_arg, ignores_x_accel

__all__ = [
    "buffering_off_edits",
    "change_for",
    "drop_edits",
    "gzip_off_edits",
    "nginx_change",
    "set_in_location",
]


def nginx_change(findings: Iterable[Finding]) -> Change | None:
    """Every finding's edits as one Change (shared edits once), or None when none has any."""
    edits: dict[TextEdit, None] = {}
    rules: dict[str, None] = {}
    for finding in findings:
        if finding.change is not None and finding.change.edits:
            edits.update(dict.fromkeys(finding.change.edits))
            rules[finding.code] = None
    if not edits:
        return None
    noun = "edit" if len(edits) == 1 else "edits"
    return Change(
        f"nginx: stream unbuffered ({len(edits)} {noun}: {', '.join(rules)})",
        edits=tuple(edits),
        tier=CostTier.TRANSPORT,
    )


def change_for(rule: str, edits: tuple[TextEdit, ...]) -> Change | None:
    """The Change of one finding: its edits, labelled by what they write."""
    if not edits:
        return None
    parts = dict.fromkeys(e.new.rstrip(";") if e.new else f"remove `{e.old}`" for e in edits)
    return Change("nginx: " + "; ".join(parts), edits=edits, rule=rule, tier=CostTier.TRANSPORT)


def set_in_location(route: Route, name: str, value: str) -> tuple[TextEdit, ...]:
    """``name value;`` in the route's own location: its directive replaced, else a new line."""
    location = route.location
    new = f"{name} {value};"
    existing = location.children(name)
    if existing:
        return tuple(_replace(d, new) for d in existing if d.args != (value,))
    return (TextEdit(location.file, location.line, "insert", location.text(), new),)


def buffering_off_edits(route: Route) -> tuple[TextEdit, ...]:
    """``proxy_buffering off`` in the location, and X-Accel-Buffering no longer ignored there."""
    edits = list(set_in_location(route, "proxy_buffering", "off"))
    ignored = ignores_x_accel(route)
    for d in ignored.directives if ignored is not None else ():
        if not _own(route.location, d):
            continue  # at server or http level: other routes share it; buffering off suffices
        rest = [a for a in d.args if a.lower() != "x-accel-buffering"]
        if len(rest) == len(d.args):
            continue
        if rest:
            edits.append(_replace(d, f"proxy_ignore_headers {' '.join(rest)};"))
        else:
            edits.extend(drop_edits(route, d))
    return tuple(edits)


def gzip_off_edits(route: Route) -> tuple[TextEdit, ...]:
    """gzip off for this location: ``gzip on`` in its ``if`` blocks replaced, and in itself.

    ``gzip_types`` is left as it is: it is usually set once at http level for every route.
    """
    edits: list[TextEdit] = []
    for cond in route.conditional:
        edits.extend(_replace(d, "gzip off;") for d in cond.children("gzip") if _on(d))
    if first_arg(route.setting("gzip")) == "on":
        edits.extend(set_in_location(route, "gzip", "off"))
    return tuple(edits)


def drop_edits(route: Route, d: Directive) -> tuple[TextEdit, ...]:
    """Delete ``d``, unless removing it would bring inherited directives of its kind back."""
    blocks = (*route.chain, *route.conditional)
    for index, block in enumerate(blocks):
        same = block.children(d.name)
        if not any(x is d for x in same):
            continue
        if len(same) > 1:
            return (TextEdit(d.file, d.line, "delete", d.text()),)
        # The last of its kind at this level: the outer levels' ones would apply instead.
        outer = route.chain[:index] if index < len(route.chain) else route.chain
        if any(b.children(d.name) for b in outer):
            return ()
        return (TextEdit(d.file, d.line, "delete", d.text()),)
    return ()


def _replace(d: Directive, new: str) -> TextEdit:
    return TextEdit(d.file, d.line, "replace", d.text(), new)


def _own(block: Directive, d: Directive) -> bool:
    return any(x is d for x in block.block or ())


def _on(d: Directive) -> bool:
    return bool(d.args) and d.args[0].lower() == "on"
