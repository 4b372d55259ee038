"""TomlLines: where a table's header is, and whether it has one at all."""

from __future__ import annotations

from ttft.core.toml_text import TomlLines

TEXT = """\
top = 1
inline = { a = 1 }

[[model]]
name = "a"

[[model]]
name = "b"
upstreams = [{ url = "x" }]

[[model.upstreams]]
url = "y"
"""


def test_a_table_has_a_header_only_where_one_is_written() -> None:
    lines = TomlLines(TEXT)
    assert lines.has_table(())
    assert lines.has_table(("model", 1)) and lines.has_table(("model", 2))
    assert not lines.has_table(("model", 3))
    assert not lines.has_table(("inline",))
    assert lines.has_table(("model", 2, "upstreams", 1))
    assert not lines.has_table(("model", 1, "upstreams", 1))


def test_lines_of_tables_and_keys() -> None:
    lines = TomlLines(TEXT)
    assert lines.table_line(("model", 2)) == 7
    assert lines.key_line(("model", 2), "upstreams") == 9
    assert lines.key_line(("model", 2, "upstreams", 1), "url") == 12
    assert lines.key_line((), "inline") == 2
