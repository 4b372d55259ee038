"""``apply_edits``: edits located on the original text by line and directive, applied together."""

from __future__ import annotations

import pytest

from ttft.core.errors import TtftError
from ttft.core.text_edits import TextEdit
from ttft.proxy.nginx_edit import apply_edits, unified_diff

MAIN = "nginx.conf"
SITE = """server {
    listen 80;
    location /v1/ {
        proxy_pass http://llm;
        proxy_buffering on;
        gzip on;
    }
}
"""


def edit(line: int, action: str, old: str, new: str = "", file: str = MAIN) -> TextEdit:
    return TextEdit(file, line, action, old, new)  # type: ignore[arg-type]


def test_replace_keeps_the_rest_of_the_file_byte_for_byte() -> None:
    out = apply_edits(
        {MAIN: SITE}, [edit(5, "replace", "proxy_buffering on", "proxy_buffering off;")]
    )
    assert out[MAIN] == SITE.replace("proxy_buffering on;", "proxy_buffering off;")


def test_delete_removes_the_line_when_nothing_else_is_on_it() -> None:
    out = apply_edits({MAIN: SITE}, [edit(6, "delete", "gzip on;")])
    assert out[MAIN] == SITE.replace("        gzip on;\n", "")


def test_insert_goes_below_the_opening_brace_at_the_childrens_indent() -> None:
    out = apply_edits(
        {MAIN: SITE}, [edit(3, "insert", "location /v1/ {", "proxy_read_timeout 300s")]
    )
    lines = out[MAIN].splitlines()
    assert lines[2] == "    location /v1/ {"
    assert lines[3] == "        proxy_read_timeout 300s;"
    assert lines[4] == "        proxy_pass http://llm;"


def test_insert_into_a_one_line_block() -> None:
    text = "http {\n  server {\n    location / { proxy_pass http://x; }\n  }\n}\n"
    out = apply_edits({MAIN: text}, [edit(3, "insert", "location /", "proxy_buffering off;")])
    assert out[MAIN] == (
        "http {\n  server {\n    location / {\n        proxy_buffering off;\n"
        "        proxy_pass http://x; }\n  }\n}\n"
    )


def test_several_directives_on_one_line_are_told_apart_by_their_text() -> None:
    text = "location / { proxy_pass http://x; proxy_buffering on; gzip on; }\n"
    out = apply_edits(
        {MAIN: text},
        [
            edit(1, "replace", "proxy_buffering on", "proxy_buffering off;"),
            edit(1, "delete", "gzip on"),
        ],
    )
    assert out[MAIN] == "location / { proxy_pass http://x; proxy_buffering off;  }\n"


def test_quotes_and_comments_holding_semicolons_and_braces_do_not_end_a_directive() -> None:
    text = (
        "location /v1/ { # a comment with ; and {\n"
        '    add_header X-Note "a;b{c}" always; # trailing ; {\n'
        "    return 200 '${host};';\n"
        "    proxy_pass http://x;\n"
        "}\n"
    )
    out = apply_edits(
        {MAIN: text},
        [
            edit(2, "delete", "add_header X-Note 'a;b{c}' always"),  # other quotes: same words
            edit(3, "replace", 'return   200 "${host};"', "return 204;"),
            edit(1, "insert", "location /v1/", "proxy_buffering off;"),
        ],
    )
    assert out[MAIN] == (
        "location /v1/ { # a comment with ; and {\n"
        "    proxy_buffering off;\n"
        "     # trailing ; {\n"
        "    return 204;\n"
        "    proxy_pass http://x;\n"
        "}\n"
    )


def test_a_multi_line_directive_is_replaced_whole() -> None:
    text = "http {\n    gzip_types text/plain\n               text/event-stream;\n    gzip on;\n}\n"
    out = apply_edits(
        {MAIN: text},
        [edit(2, "replace", "gzip_types text/plain text/event-stream", "gzip_types text/plain;")],
    )
    assert out[MAIN] == "http {\n    gzip_types text/plain;\n    gzip on;\n}\n"


def test_replacing_a_whole_block_spans_to_its_matching_brace() -> None:
    text = (
        "server {\n    location /a/ {\n        if ($x) { return 404; }\n    }\n    listen 80;\n}\n"
    )
    out = apply_edits({MAIN: text}, [edit(2, "delete", "location /a/")])
    assert out[MAIN] == "server {\n    listen 80;\n}\n"


def test_edits_of_an_included_file_touch_only_that_file() -> None:
    snippet = "proxy_set_header Host $host;\nproxy_read_timeout 30s;\n"
    texts = {MAIN: SITE, "snippets/proxy.conf": snippet}
    out = apply_edits(
        texts,
        [
            edit(
                2,
                "replace",
                "proxy_read_timeout 30s",
                "proxy_read_timeout 300s;",
                "snippets/proxy.conf",
            )
        ],
    )
    assert out[MAIN] == SITE
    assert out["snippets/proxy.conf"] == "proxy_set_header Host $host;\nproxy_read_timeout 300s;\n"


def test_edits_of_two_plan_steps_combine_and_shared_ones_count_once() -> None:
    step1 = [
        edit(5, "replace", "proxy_buffering on", "proxy_buffering off;"),
        edit(3, "insert", "location /v1/", "proxy_request_buffering off;"),
    ]
    step2 = [
        edit(6, "replace", "gzip on", "gzip off;"),
        edit(3, "insert", "location /v1/", "proxy_read_timeout 300s;"),
        edit(5, "replace", "proxy_buffering on", "proxy_buffering off;"),  # also in step 1
    ]
    out = apply_edits({MAIN: SITE}, [*step1, *step2])
    assert out[MAIN] == (
        "server {\n    listen 80;\n    location /v1/ {\n"
        "        proxy_request_buffering off;\n        proxy_read_timeout 300s;\n"
        "        proxy_pass http://llm;\n        proxy_buffering off;\n        gzip off;\n"
        "    }\n}\n"
    )
    # The same result whichever step comes first, since every edit points at the original text.
    swapped = apply_edits({MAIN: SITE}, [*step2, *step1])
    assert sorted(swapped[MAIN].splitlines()) == sorted(out[MAIN].splitlines())


def test_a_wrong_old_names_the_file_line_and_what_is_there() -> None:
    with pytest.raises(TtftError) as err:
        apply_edits(
            {MAIN: SITE}, [edit(4, "replace", "proxy_buffering on", "proxy_buffering off;")]
        )
    assert "nginx.conf:4" in str(err.value)
    assert "proxy_pass http://llm" in str(err.value)


def test_a_line_past_the_end_or_another_file_is_an_error() -> None:
    with pytest.raises(TtftError, match=r"nginx\.conf:99: .*the file has 8 lines"):
        apply_edits({MAIN: SITE}, [edit(99, "delete", "gzip on")])
    with pytest.raises(TtftError, match=r"other\.conf"):
        apply_edits({MAIN: SITE}, [edit(1, "delete", "gzip on", file="other.conf")])


def test_inserting_into_a_simple_directive_is_an_error() -> None:
    with pytest.raises(TtftError, match="not a block"):
        apply_edits({MAIN: SITE}, [edit(6, "insert", "gzip on", "gzip_vary on;")])


def test_overlapping_edits_are_an_error() -> None:
    with pytest.raises(TtftError, match=r"nginx\.conf:5: edits overlap"):
        apply_edits(
            {MAIN: SITE},
            [
                edit(5, "replace", "proxy_buffering on", "proxy_buffering off;"),
                edit(5, "delete", "proxy_buffering on"),
            ],
        )
    with pytest.raises(TtftError, match="edits overlap"):  # an insert into a deleted block
        apply_edits(
            {MAIN: SITE},
            [edit(3, "delete", "location /v1/"), edit(3, "insert", "location /v1/", "gzip off;")],
        )


def test_unreadable_text_is_an_error_not_a_crash() -> None:
    with pytest.raises(TtftError, match=r"nginx\.conf:1: .*never closed"):
        apply_edits({MAIN: "server {\n  listen 80;\n"}, [edit(2, "delete", "listen 80")])
    with pytest.raises(TtftError, match="unterminated quote"):
        apply_edits({MAIN: 'return 200 "oops;\n'}, [edit(1, "delete", "return 200")])


def test_unified_diff_lists_changed_files_only_with_a_and_b_labels() -> None:
    snippet = "gzip on;"  # no newline at the end of the file
    texts = {MAIN: SITE, "conf.d/llm.conf": snippet}
    out = apply_edits(
        texts,
        [
            edit(5, "replace", "proxy_buffering on", "proxy_buffering off;"),
            edit(1, "replace", "gzip on", "gzip off;", "conf.d/llm.conf"),
        ],
    )
    diff = unified_diff(texts, out)
    assert diff.count("--- a/") == 2
    assert "--- a/nginx.conf\n+++ b/nginx.conf\n" in diff
    assert "-        proxy_buffering on;\n+        proxy_buffering off;\n" in diff
    assert "-gzip on;\n\\ No newline at end of file\n+gzip off;\n" in diff
    assert unified_diff(texts, texts) == ""
