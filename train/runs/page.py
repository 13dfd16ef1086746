"""The report's HTML page and figure plumbing, shared by the run report and the ablation report
(``scripts/report.py``): sections with an embedded PNG and/or a table, no pyplot, nothing fetched."""

from __future__ import annotations

import base64
import html
import io
import time
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


@dataclass
class Section:
    title: str
    png: str | None = None  # file name next to the HTML; None: nothing drawn
    data: bytes = b""
    notes: list[str] = field(default_factory=list)
    table: list[list[str]] = field(default_factory=list)  # header row first; drawn as an HTML table


# ---- figures: matplotlib Figure objects on the Agg canvas (no pyplot, no display) -------------
def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def save_png(fig: Figure, path: Path, dpi: int = 110) -> bytes:
    data = png_bytes(fig, dpi)
    path.write_bytes(data)
    return data


_CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 10px;text-align:left;font-size:14px}
img{max-width:100%;border:1px solid #eee}.note{color:#8a5a00;font-size:14px}pre{background:#f6f6f6;padding:1em;overflow-x:auto}"""


def render_html(title: str, header: list[tuple[str, str]], sections: list[Section], notes: list[str], code: str | None) -> str:
    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{e(title)}</h1><table>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in header]
    parts.append("</table>")
    parts += [f"<p class='note'>Note: {e(n)}</p>" for n in notes]
    for s in sections:
        parts.append(f"<h2>{e(s.title)}</h2>")
        if s.png:
            parts.append(f"<img alt='{e(s.title)}' src='data:image/png;base64,{base64.b64encode(s.data).decode()}'>"
                         f"<p><small>{e(s.png)}</small></p>")
        if s.table:
            parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in s.table[0]) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in s.table[1:]]
            parts.append("</table>")
        parts += [f"<p class='note'>Note: {e(n)}</p>" for n in s.notes]
    if code is not None:
        parts.append(f"<h2>Best program</h2><details><summary>show code</summary><pre>{e(code)}</pre></details>")
    parts.append(f"<p><small>generated {e(time.strftime('%Y-%m-%d %H:%M:%S'))} by scripts/report.py</small></p></body></html>")
    return "\n".join(parts)
