"""The nginx findings' automatic changes: which rules carry edits, what they write, and that the
patched configuration no longer has the problem (applied with ``ttft.proxy.nginx_edit``)."""

from __future__ import annotations

from pathlib import Path

from nginx_testkit import CLEAN, NGINX_DATA, by_rule, lint_file, route_config

from ttft.core.findings import CostTier, Finding, Severity
from ttft.core.text_edits import TextEdit
from ttft.lint.nginx.config import load
from ttft.lint.nginx.fixes import nginx_change
from ttft.proxy.nginx_edit import apply_edits
from ttft.report.findings import json_document

# CLEAN minus the line a test wants to get wrong.
NO_BUFFERING_LINE = CLEAN.replace("proxy_buffering off;", "")


def edits_of(findings: list[Finding], rule: str) -> tuple[TextEdit, ...]:
    found = by_rule(findings, rule)
    assert found, f"no {rule} finding"
    change = found[0].change
    assert change is not None, f"{rule} carries no change"
    assert change.rule == rule and change.tier is CostTier.TRANSPORT
    return change.edits


def patched(main: Path) -> Path:
    """Apply every automatic change in place (the files are the test's own copies)."""
    config = load(main)
    change = nginx_change(lint_file(main))
    assert change is not None
    texts = {f: Path(f).read_text() for f in config.files}
    for file, text in apply_edits(texts, change.edits).items():
        Path(file).write_text(text)
    return main


def test_default_buffering_gets_a_line_in_the_location(tmp_path: Path) -> None:
    main = route_config(tmp_path, NO_BUFFERING_LINE)
    edits = edits_of(lint_file(main), "nginx/proxy-buffering")
    assert [(e.action, e.old, e.new) for e in edits] == [
        ("insert", "location /v1/", "proxy_buffering off;")
    ]
    assert edits[0].file == str(main)
    assert by_rule(lint_file(patched(main)), "nginx/proxy-buffering") == []


def test_buffering_on_in_the_location_is_replaced_not_duplicated(tmp_path: Path) -> None:
    main = route_config(tmp_path, NO_BUFFERING_LINE + "proxy_buffering on;")
    edits = edits_of(lint_file(main), "nginx/proxy-buffering")
    assert [(e.action, e.old, e.new) for e in edits] == [
        ("replace", "proxy_buffering on", "proxy_buffering off;")
    ]
    text = patched(main).read_text()
    assert text.count("proxy_buffering") == 1


def test_buffering_on_at_server_level_is_left_and_the_location_overrides_it(
    tmp_path: Path,
) -> None:
    main = route_config(tmp_path, NO_BUFFERING_LINE, server="proxy_buffering on;")
    edits = edits_of(lint_file(main), "nginx/proxy-buffering")
    assert [e.action for e in edits] == ["insert"]
    assert "proxy_buffering on;" in patched(main).read_text()  # other routes may rely on it


def test_x_accel_buffering_is_no_longer_ignored_in_the_location(tmp_path: Path) -> None:
    body = NO_BUFFERING_LINE + "proxy_ignore_headers X-Accel-Buffering Expires;"
    main = route_config(tmp_path, body)
    edits = edits_of(lint_file(main, upstream_engine="llamacpp"), "nginx/proxy-buffering")
    assert ("replace", "proxy_ignore_headers Expires;") in [(e.action, e.new) for e in edits]


def test_x_accel_buffering_ignored_at_server_level_is_left_alone(tmp_path: Path) -> None:
    main = route_config(
        tmp_path, NO_BUFFERING_LINE, server="proxy_ignore_headers X-Accel-Buffering;"
    )
    edits = edits_of(lint_file(main, upstream_engine="llamacpp"), "nginx/proxy-buffering")
    assert [e.action for e in edits] == ["insert"]  # buffering off is enough for this route


def test_the_last_ignored_header_goes_with_its_directive(tmp_path: Path) -> None:
    main = route_config(tmp_path, NO_BUFFERING_LINE + "proxy_ignore_headers X-Accel-Buffering;")
    edits = edits_of(lint_file(main), "nginx/proxy-buffering")
    assert ("delete", "proxy_ignore_headers X-Accel-Buffering") in [
        (e.action, e.old) for e in edits
    ]
    assert "proxy_ignore_headers" not in patched(main).read_text()


def test_gzip_holding_the_stream_is_turned_off_in_the_location_only(tmp_path: Path) -> None:
    http = "    gzip on;\n    gzip_types text/event-stream;\n"
    main = route_config(tmp_path, NO_BUFFERING_LINE, http=http)
    findings = lint_file(main)
    assert by_rule(findings, "nginx/gzip-event-stream")[0].severity is Severity.ERROR
    edits = edits_of(findings, "nginx/gzip-event-stream")
    assert [(e.action, e.old, e.new) for e in edits] == [("insert", "location /v1/", "gzip off;")]
    after = lint_file(patched(main))
    assert by_rule(after, "nginx/gzip-event-stream") == []
    assert "gzip_types text/event-stream;" in main.read_text()  # http level untouched


def test_gzip_on_inside_the_location_and_its_if_is_replaced(tmp_path: Path) -> None:
    body = NO_BUFFERING_LINE + "gzip on;\n if ($arg_z) { gzip on; }\n"
    main = route_config(tmp_path, body, http="    gzip_types *;\n")
    edits = edits_of(lint_file(main), "nginx/gzip-event-stream")
    assert sorted(e.action for e in edits) == ["replace", "replace"]
    text = patched(main).read_text()
    assert "gzip on" not in text and text.count("gzip off;") == 2
    assert by_rule(lint_file(main), "nginx/gzip-event-stream") == []


def test_gzip_on_an_unbuffered_stream_is_only_info_and_gets_no_edit(tmp_path: Path) -> None:
    main = route_config(tmp_path, CLEAN, http="    gzip on;\n    gzip_types text/event-stream;\n")
    (finding,) = by_rule(lint_file(main), "nginx/gzip-event-stream")
    assert finding.severity is Severity.INFO and finding.change is None


def test_timeout_and_request_buffering_are_set_in_the_location(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_read_timeout 600s;", "proxy_read_timeout 30s;").replace(
        "proxy_request_buffering off;", ""
    )
    main = route_config(tmp_path, body)
    findings = lint_file(main, min_read_timeout_s=450.0)
    timeout = edits_of(findings, "nginx/proxy-read-timeout")
    assert [(e.action, e.new) for e in timeout] == [("replace", "proxy_read_timeout 450s;")]
    request = edits_of(findings, "nginx/proxy-request-buffering")
    assert [(e.action, e.new) for e in request] == [("insert", "proxy_request_buffering off;")]


def test_misplaced_header_is_removed_unless_that_brings_inherited_ones_back(
    tmp_path: Path,
) -> None:
    main = route_config(tmp_path, NO_BUFFERING_LINE + "add_header X-Accel-Buffering no;")
    edits = edits_of(lint_file(main), "nginx/x-accel-buffering-misplaced")
    assert ("delete", "add_header X-Accel-Buffering no") in [(e.action, e.old) for e in edits]
    assert ("insert", "proxy_buffering off;") in [(e.action, e.new) for e in edits]

    # The server adds a header: without a line of its own the location would inherit it.
    main = route_config(
        tmp_path,
        NO_BUFFERING_LINE + "add_header X-Accel-Buffering no;",
        server="add_header X-Frame-Options DENY;",
    )
    edits = edits_of(lint_file(main), "nginx/x-accel-buffering-misplaced")
    assert [e.action for e in edits] == ["insert"]


def test_rules_without_a_safe_edit_carry_no_change() -> None:
    findings = lint_file(NGINX_DATA / "bad" / "nginx.conf")
    for rule in ("nginx/proxy-http-version", "nginx/proxy-cache"):
        assert by_rule(findings, rule) and all(f.change is None for f in by_rule(findings, rule))
        assert all(f.action and not f.action.startswith("(") for f in by_rule(findings, rule))


def test_a_finding_for_several_locations_carries_every_locations_edit(tmp_path: Path) -> None:
    body = (
        "    gzip on;\n    gzip_types text/event-stream;\n"
        "    server {\n        listen 8080;\n"
        "        location /a/ { proxy_pass http://127.0.0.1:1; }\n"
        "        location /b/ { proxy_pass http://127.0.0.1:1; }\n"
        "    }\n"
    )
    main = tmp_path / "nginx.conf"
    main.write_text("events {}\nhttp {\n" + body + "}\n")
    (finding,) = by_rule(lint_file(main), "nginx/gzip-event-stream")
    assert finding.change is not None
    assert sorted(e.old for e in finding.change.edits) == ["location /a/", "location /b/"]


def test_nginx_change_combines_findings_and_counts_shared_edits_once() -> None:
    findings = lint_file(NGINX_DATA / "bad" / "nginx.conf")
    change = nginx_change(findings)
    assert change is not None and change.tier is CostTier.TRANSPORT
    every = [e for f in findings if f.change is not None for e in f.change.edits]
    assert len(change.edits) == len(set(every)) < len(every)  # x-accel shares buffering's edit
    assert change.label.startswith(f"nginx: stream unbuffered ({len(change.edits)} edits")
    assert nginx_change([f for f in findings if f.change is None]) is None


def test_the_bad_fixture_patched_has_no_streaming_warning_left(tmp_path: Path) -> None:
    root = NGINX_DATA / "bad"
    for path in root.rglob("*"):
        if path.is_file():
            target = tmp_path / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    after = lint_file(patched(tmp_path / "nginx.conf"))
    streaming = ("nginx/proxy-buffering", "nginx/gzip-event-stream", "nginx/proxy-read-timeout")
    assert [f for f in after if f.rule in streaming and f.severity >= Severity.WARNING] == []


def test_json_findings_carry_their_change_and_the_others_none() -> None:
    doc = json_document(lint_file(NGINX_DATA / "bad" / "nginx.conf"))
    by_id = {(f["rule"], f["location"]["line"]): f for f in doc["findings"]}
    buffering = by_id[("nginx/proxy-buffering", 12)]["change"]
    assert buffering["rule"] == "nginx/proxy-buffering" and buffering["kinds"] == ["proxy"]
    assert {"action": "insert", "new": "proxy_buffering off;"}.items() <= buffering["edits"][
        0
    ].items()
    assert "change" not in by_id[("nginx/proxy-cache", 20)]
