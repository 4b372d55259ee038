"""The page around the charts: one self-contained HTML file, its tables, and a little script.

Nothing is fetched when the page opens (no CDN, no web font, no image file): the CSS and the
script are inline and the charts are inline SVG, so the file works offline from a CI artifact
store. Table cells that show a number carry the exact JSON value in ``data-value`` (and the
JSON path it came from in ``data-key``), so a test can compare the page with the data it was
rendered from and the two cannot drift.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

GENERATOR = "ttft"

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1100px;
color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}.meta{color:#666;font-size:12px}
table{border-collapse:collapse;margin:8px 0;font-size:12px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left}td.n{text-align:right}
th{background:#f4f4f4}.charts{display:flex;flex-wrap:wrap;gap:12px}
figure{margin:0}figcaption{font-size:12px;color:#555;max-width:640px}
.bad{color:#b00}.good{color:#070}.note{color:#555;font-size:12px}
.finding{border-left:4px solid #e69500;padding:4px 12px;margin:12px 0;background:#fffaf0}
button{font-size:12px;margin:4px 0}
"""

# Log-x toggles flip between two pre-rendered SVGs, so a chart never needs a re-layout in JS.
# Script errors (counted on <html> by a watcher in <head>, so it sees errors of any later script)
# and how many charts have visible marks (a bounding box) are written into the DOM, where a
# headless browser test reads them from the dumped page.
_WATCH = """
window.addEventListener('error',function(){var e=document.documentElement;
e.setAttribute('data-js-errors',String(Number(e.getAttribute('data-js-errors')||0)+1));});
"""
_SCRIPT = """
(function(){
document.querySelectorAll('button[data-toggle]').forEach(function(btn){
btn.addEventListener('click',function(){var box=document.getElementById(btn.dataset.toggle);
box.querySelectorAll('.view').forEach(function(v){v.hidden=!v.hidden;});});});
var drawn=0,folded=0,all=document.querySelectorAll('svg.chart');
all.forEach(function(svg){if(svg.closest('[hidden]')){folded++;return;}
var marks=svg.querySelectorAll('.mark'),seen=false;
marks.forEach(function(m){var b=m.getBBox();if(b.width>0||b.height>0){seen=true;}});
if(seen){drawn++;}});
document.body.setAttribute('data-charts',String(all.length));
document.body.setAttribute('data-charts-drawn',String(drawn));
document.body.setAttribute('data-charts-folded',String(folded));
document.body.setAttribute('data-ready','1');
})();
"""


@dataclass(frozen=True, slots=True)
class Cell:
    """A table cell: the text shown, and the exact JSON value (and its path) behind a number."""

    text: str
    value: Any = None
    key: str = ""

    def html(self) -> str:
        if self.value is None and not self.key:
            return f"<td>{escape(self.text)}</td>"
        raw = escape(json.dumps(self.value), quote=True)
        key = f' data-key="{escape(self.key, quote=True)}"' if self.key else ""
        return f'<td class="n" data-value="{raw}"{key}>{escape(self.text)}</td>'


def table(name: str, columns: Sequence[str], rows: Sequence[Sequence[Cell | str]]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = [c.html() if isinstance(c, Cell) else f"<td>{escape(c)}</td>" for c in row]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<table data-table="{escape(name, quote=True)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def toggled_figure(box_id: str, linear: str, log: str, caption: str) -> str:
    """Two views of one chart (linear and log x) and a button that flips between them."""
    return (
        f'<figure id="{escape(box_id, quote=True)}"><div class="view">{linear}</div>'
        f'<div class="view" hidden>{log}</div>'
        f'<button type="button" data-toggle="{escape(box_id, quote=True)}">linear / log x</button>'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


def charts(*figures: str) -> str:
    return '<div class="charts">' + "".join(figures) + "</div>"


def section(title: str, *body: str, level: int = 2) -> str:
    return f"<h{level}>{escape(title)}</h{level}>" + "".join(body)


def paragraph(text: str, css: str = "") -> str:
    klass = f' class="{css}"' if css else ""
    return f"<p{klass}>{escape(text)}</p>"


def page(title: str, subtitle: str, body: Sequence[str], *, kind: str, generated: str) -> str:
    """The whole document. ``generated`` is the one line that may differ between two renders
    of the same data (the acceptance test compares pages with it masked)."""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="generator" content="{GENERATOR}"><style>{_CSS}</style>'
        f"<script>{_WATCH}</script></head>\n"
        f'<body data-report="{escape(kind, quote=True)}"><h1>{escape(title)}</h1>'
        f'<p class="meta">{escape(subtitle)}</p>\n'
        + "\n".join(body)
        + f'\n<p class="meta" id="generated">generated {escape(generated)}</p>\n'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
