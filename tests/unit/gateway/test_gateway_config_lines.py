"""A gateway TOML file's errors name the file, the line and the fix, as a plan's do."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttft.core.errors import TtftError
from ttft.gateway.config import from_mapping, load

HEAD = '[[model]]\nname = "a"\nupstreams = ["http://127.0.0.1:8080"]\n'


def _error(tmp_path: Path, text: str) -> TtftError:
    path = tmp_path / "g.toml"
    path.write_text(text)
    with pytest.raises(TtftError) as info:
        load(path)
    return info.value


def test_an_unknown_key_in_a_table_names_its_line_and_the_keys_that_exist(tmp_path: Path) -> None:
    err = _error(tmp_path, HEAD + "\n[admission]\nqueue_size = 8\nquue_size = 3\n")
    assert err.problem == f"{tmp_path / 'g.toml'}:7: admission: unknown key 'quue_size'"
    assert err.fix is not None and "queue_size" in err.fix


def test_a_value_of_the_wrong_type_names_its_line_and_how_to_write_it(tmp_path: Path) -> None:
    text = HEAD + '\n[[model]]\nname = "b"\nupstreams = ["http://h:1"]\nprerender = "yes"\n'
    err = _error(tmp_path, text)
    assert err.problem.startswith(f"{tmp_path / 'g.toml'}:8: model[1].prerender: expected true")
    assert err.fix == "write prerender = true (or false)"
    err = _error(tmp_path, HEAD + "[routing]\nload_factor = 0.5\n")
    assert ":5: routing.load_factor: must be at least 1.0" in err.problem


def test_an_unknown_top_level_key_names_its_line(tmp_path: Path) -> None:
    err = _error(tmp_path, 'listen = "127.0.0.1:9000"\nlisen = "x"\n' + HEAD)
    assert err.problem == f"{tmp_path / 'g.toml'}:2: unknown key(s) lisen"
    assert err.fix is not None and "listen" in err.fix


def test_an_inline_upstream_points_at_its_upstreams_line(tmp_path: Path) -> None:
    text = (
        '[[model]]\nname = "a"\n\nupstreams = [\n  "http://h:1",\n'
        '  { url = "http://h:2", max_in_flight = "2" },\n]\n'
    )
    err = _error(tmp_path, text)
    assert ":4: model[0].upstreams[1].max_in_flight: expected a whole number" in err.problem
    assert err.fix == "write max_in_flight = 4"


def test_an_upstream_table_points_at_its_own_key(tmp_path: Path) -> None:
    text = (
        '[[model]]\nname = "a"\n\n[[model.upstreams]]\nurl = "http://h:1"\n\n'
        '[[model.upstreams]]\nurl = "http://h:2"\nprerender = 1\n'
    )
    err = _error(tmp_path, text)
    assert ":9: model[0].upstreams[1].prerender: expected true or false" in err.problem


def test_a_duplicate_model_name_points_at_the_second(tmp_path: Path) -> None:
    err = _error(tmp_path, HEAD + "\n" + HEAD)
    assert ":6: model[1].name: two [[model]] tables have the same name" in err.problem


def test_a_syntax_error_names_its_line(tmp_path: Path) -> None:
    err = _error(tmp_path, HEAD + "[admission]\nqueue_size = \n")
    assert err.problem.startswith(f"{tmp_path / 'g.toml'}:5: not valid TOML")
    assert err.fix is not None and "that line" in err.fix


def test_a_mapping_without_text_has_no_line_numbers() -> None:
    raw = {"model": [{"name": "a", "upstreams": ["http://h:1"]}], "admission": {"quue_size": 1}}
    with pytest.raises(TtftError) as info:
        from_mapping(raw)
    assert info.value.problem == "config: admission: unknown key 'quue_size'"
