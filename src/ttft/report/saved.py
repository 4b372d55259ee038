"""Render any saved result again, without measuring: find what a path holds, pick its page.

A path may be a bench results directory (``summary.json`` + ``records.jsonl``), a bare
``records.jsonl`` (summarized here), a ``summary.json`` of bench, ``tune sweep`` or ``tune ab``, a
doctor ``report.json``, or an experiment directory. The command that measured calls the same
function on what it just wrote, so the two pages are the same byte for byte but for the
generation time. ``save_summary`` writes a bench run's summary files beside its records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.core.summary import SCHEMA as BENCH_SCHEMA
from ttft.core.summary import BenchSummary, summarize_run
from ttft.load.sink import read_results

DOCTOR_SCHEMA = "ttft.doctor/1"
SWEEP_SCHEMA = "ttft.tune.sweep/1"
AB_SCHEMA = "ttft.tune.ab/1"
RESULTS_FILE = "records.jsonl"
SUMMARY_FILE = "summary.json"
DOCTOR_FILE = "report.json"
PAGE_FILE = "report.html"


def generated_now() -> str:
    """The generation time line: UTC, to the second (the only part two renders may differ in)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def read_records(path: Path) -> list[RequestRecord]:
    """The request lines of a results file (``type: request``); a torn last line is skipped."""
    return read_results(path).records


def save_summary(summary: BenchSummary, out_dir: Path) -> None:
    """A bench run's summary.json, summary.csv and summary.md in its results folder."""
    from ttft.report.csv import summary_to_csv
    from ttft.report.markdown import summary_to_markdown

    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary.to_dict(), indent=2))
    (out_dir / "summary.csv").write_text(summary_to_csv(summary))
    (out_dir / "summary.md").write_text(summary_to_markdown(summary))


def read_bench_summary(path: Path) -> Any:
    """A summary.json that ttft bench wrote (``ttft bench compare``'s two sides)."""
    return _load_json(path, "summary file", "give the summary.json that ttft bench wrote")


def records_beside(path: Path) -> list[RequestRecord] | None:
    """The records.jsonl beside a summary file (or in a results folder), when there is one."""
    beside = path.parent / RESULTS_FILE if path.is_file() else path / RESULTS_FILE
    return read_records(beside) if beside.is_file() else None


def _load_json(path: Path, what: str, hint: str) -> Any:
    """A JSON file; a missing or unreadable one is an input error naming ``what`` it was."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TtftError(f"{what} not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise TtftError(f"{path} is not JSON ({exc.msg}, line {exc.lineno})", hint) from None


def _read_json(path: Path) -> dict[str, Any]:
    data = _load_json(
        path, "file", "give a summary.json, report.json or records.jsonl that ttft wrote"
    )
    if not isinstance(data, dict):
        raise TtftError(f"{path} is not a ttft result (a JSON object was expected)")
    return data


def _document_for(path: Path) -> tuple[Path, dict[str, Any] | None]:
    """The JSON document a path stands for (``None`` for a bare records file)."""
    if path.is_dir():
        for name in (SUMMARY_FILE, DOCTOR_FILE):
            if (path / name).is_file():
                return path / name, _read_json(path / name)
        if (path / RESULTS_FILE).is_file():
            return path / RESULTS_FILE, None
        raise TtftError(
            f"{path} holds no ttft result ({SUMMARY_FILE}, {DOCTOR_FILE} or {RESULTS_FILE})",
            "give the --out directory of ttft bench, doctor or tune",
        )
    if not path.exists():
        raise TtftError(f"file not found: {path}")
    if path.suffix == ".jsonl":
        return path, None
    return path, _read_json(path)


def render_document(
    document: Mapping[str, Any],
    *,
    records: list[RequestRecord] | None = None,
    generated: str,
    source: str = "",
) -> str:
    """The page of one parsed JSON result, by its schema."""
    schema = document.get("schema")
    if schema == BENCH_SCHEMA:
        from ttft.report.html_bench import bench_page

        return bench_page(document, records, generated=generated, source=source)
    if schema == DOCTOR_SCHEMA:
        from ttft.report.html_doctor import doctor_page

        return doctor_page(document, generated=generated, source=source)
    if schema in (SWEEP_SCHEMA, AB_SCHEMA):
        from ttft.report.html_tune import tune_page

        return tune_page(document, generated=generated, source=source)
    raise TtftError(
        f"{source or 'this file'} is not a result this version renders (schema {schema!r})",
        f"give a file of schema {BENCH_SCHEMA}, {DOCTOR_SCHEMA}, {SWEEP_SCHEMA} or {AB_SCHEMA}",
    )


def render_saved(path: Path, *, generated: str | None = None) -> str:
    """The HTML page of whatever ttft result ``path`` is (see the module's docstring)."""
    file, document = _document_for(path)
    stamp = generated or generated_now()
    records: list[RequestRecord] | None = None
    if document is None:
        records = read_records(file)
        if not records:
            raise TtftError(f"{file} holds no request records")
        # The summary bench would have written, at its default settings.
        document = json.loads(json.dumps(summarize_run(records).to_dict()))
    elif document.get("schema") == BENCH_SCHEMA and (file.parent / RESULTS_FILE).is_file():
        records = read_records(file.parent / RESULTS_FILE)
    assert document is not None
    return render_document(document, records=records, generated=stamp, source=file.name)
