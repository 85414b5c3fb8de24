"""One self-contained ``report.html`` per run (and an index over the runs of ``--fast``).

Nothing is fetched: figures are inline SVG, qualitative grids PNG data URIs, there is no script,
and a Content-Security-Policy forbids any external load, so the file reads the same offline and
in ten years. The one exception to self-containment is the gallery of a generating run
(:mod:`icl.report.gallery`): its thumbnails are files beside the page (``gallery/``), loaded
lazily from the page's own origin. Everything that came from the user (item keys, model labels, table cells, failure
messages) goes through :func:`html.escape`; inline SVGs are matplotlib's own output (text
escaped by its writer), with their ids prefixed so that several figures share one document.

The page is built generically from what the run lists: every table of ``results.json["tables"]``
(intervals shown where a table carries ``ci_low``/``ci_high`` or ``X_lo``/``X_hi`` columns),
every plot, ``samples.jsonl`` when the run wrote one, compute, failures and provenance.
"""

from __future__ import annotations

import base64
import json
import math
import re
from html import escape
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from icl.report import reproduction
from icl.report.gallery import gallery_html
from icl.report.plots import LOWER_IS_BETTER, METRIC_UNITS, metric_label

#: rows of one table shown in the page (the CSV beside it holds all)
MAX_ROWS = 500
#: a longer table is folded (``<details>``) under its heading
OPEN_ROWS = 40
#: failure messages listed
MAX_FAILURES = 1000
#: marks the pages icl writes: an index is only ever rewritten over one of these
GENERATOR = '<meta name="generator" content="icl report">'
#: images: data URIs (figures) and the page's own origin (the gallery's thumbnails beside it)
_CSP = "default-src 'none'; img-src data: 'self'; style-src 'unsafe-inline'"

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px 40px;color:#111}
h1{font-size:22px;margin:18px 0 6px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:28px}
h3{font-size:15px;margin:18px 0 6px}.origin{background:#f4f6fa;border-left:4px solid #36c;padding:6px 12px}
.synthetic{border-left-color:#c63;background:#fbf3ee}table{border-collapse:collapse;margin:6px 0 10px;font-size:12px}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}th{background:#f0f0f0}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}.scroll{overflow-x:auto}
figure{margin:10px 0 18px}figcaption{font-size:12px;color:#555}svg.fig{max-width:100%;height:auto}
img.grid{max-width:100%;image-rendering:pixelated}pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:11px}
nav a{margin-right:10px}.note{color:#555;font-size:12px}
table.gallery td{max-width:520px}img.thumb{margin:2px;border:1px solid #ccc;vertical-align:middle}
.ptext{display:inline-block;max-width:420px;margin:2px 4px;white-space:pre-wrap;font-size:12px}
.answer{display:inline-block;vertical-align:top;margin:2px 6px 6px 0;max-width:260px;font-size:12px}
.answer.bad{background:#fbeeee}.model{font-weight:600;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.verdict{color:#333;white-space:pre-wrap;word-break:break-word}.meaning{font-weight:600}.raw{color:#777;font-size:11px}
.ptext.instr{color:#555;font-style:italic}.query{margin:6px 0 2px;padding:3px 6px;border:2px solid #36c;
background:#eef3fc;border-radius:3px}.qlabel{font-weight:700;color:#36c;margin-right:6px;font-size:11px;
text-transform:uppercase}
"""


def synthetic_note(data: Mapping[str, Any]) -> str:
    """``built-in synthetic data, not the benchmark's datasets`` (or ``...: NAMES`` when only
    some are) for a run's data origins (``Benchmark.data_origin()``); "" when none is synthetic."""
    synthetic = sorted(n for n, origin in data.items() if reproduction.synthetic_origin(origin))
    if not synthetic:
        return ""
    return "built-in synthetic data" + (", not the benchmark's datasets" if len(synthetic) == len(data)
                                        else f": {', '.join(synthetic)}")


def report_title(benchmark: str, meta: Mapping[str, Any]) -> str:
    """The run's title, saying so when the data is the built-in synthetic set (never passed off
    as the benchmark): the same words in report.md, report.html and the terminal summary."""
    config = meta.get("config") or {}
    note = synthetic_note(meta.get("data") or {})
    return f"{benchmark} report: {config.get('name', '')}" + (f" ({note})" if note else "")


def report_html(benchmark: str, tables: Mapping[str, Sequence[Mapping[str, Any]]], meta: Mapping[str, Any],
                failures: Sequence[Any], plots: Sequence[Path], out: Path) -> str:
    """The page of one run: ``meta`` is results.json's content, ``plots`` the figure files (PNG,
    with an SVG beside it where the figure has one), ``out`` the run folder (for samples.jsonl)."""
    title = report_title(benchmark, meta)
    body = [f"<h1>{escape(title)}</h1>", _origin(meta)]
    sections: list[tuple[str, str, str]] = []  # id, heading, html
    info = metric_info(tables)
    table_names = list((meta.get("tables") or {}) or tables)
    names = [n for n in table_names if n in tables]
    main = [n for n in names if "diag" not in n.lower() and n != "reproduction"]
    diag = [n for n in names if "diag" in n.lower()]
    order = sorted(main, key=lambda n: (n != "results", "rank" not in n.lower(), main.index(n)))
    files = (meta.get("tables") or {})
    figures = _figures(plots, out)
    rank_figs = [f for f in figures if f[0].startswith("ranks")]
    shot_figs = [f for f in figures if "shots" in f[0]]
    qual_figs = [f for f in figures if f[0].startswith("qualitative")]
    other_figs = [f for f in figures if f not in rank_figs + shot_figs + qual_figs]
    if rank_figs:  # the headline first, then the tables behind it
        sections.append(("ranks", "Rank heatmaps", "".join(f[1] for f in rank_figs)))
    if order:
        sections.append(("tables", "Results", "".join(_table_section(n, tables[n], files.get(n), info)
                                                      for n in order)))
    if "reproduction" in tables:
        sections.append(("paper", "Against the paper", _against_paper(tables["reproduction"], meta, info,
                                                                      files.get("reproduction"))))
    if shot_figs:
        sections.append(("shots", "Metric against shots", "".join(f[1] for f in shot_figs)))
    if other_figs:
        sections.append(("figures", "Figures", "".join(f[1] for f in other_figs)))
    if qual_figs:
        sections.append(("qualitative", "Qualitative examples", "".join(f[1] for f in qual_figs)))
    gallery = gallery_html(out)
    if gallery:
        sections.append(("gallery", "Gallery", gallery))
    if diag:
        sections.append(("diagnostics", "Diagnostics", "".join(_table_section(n, tables[n], files.get(n), info)
                                                              for n in diag)))
    samples = _samples(out / "samples.jsonl")
    if samples:
        sections.append(("samples", "Per-sample log", samples))
    compute = _compute(meta.get("compute") or [])
    if compute:
        sections.append(("compute", "Compute per model", compute))
    sections.append(("failures", f"Failures ({len(failures)})", _failures(failures)))
    sections.append(("provenance", "Provenance", _provenance(meta)))
    body.append("<nav>" + "".join(f'<a href="#{i}">{escape(h)}</a>' for i, h, _ in sections) + "</nav>")
    body += [f'<section id="{i}"><h2>{escape(h)}</h2>{content}</section>' for i, h, content in sections]
    return _page(title, "\n".join(body))


def _against_paper(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any],
                   info: Mapping[str, tuple[Optional[str], bool]], file: Optional[str]) -> str:
    """The source papers' numbers beside the run's (reproduction.csv): a summary line, the figure
    (yours against published, identity line, 95% intervals) and the table."""
    text = escape(reproduction.note(rows, bool(synthetic_note(meta.get("data") or {}))))
    note = "<p>" + re.sub(r"`([^`]*)`", r"<code>\1</code>", text) + "</p>"
    figure = reproduction.figure_svg(rows) if rows else ""
    if figure:
        note += (f"<figure>{figure}<figcaption>yours against published: green inside your 95% interval, red "
                 f"outside; dashed: identity</figcaption></figure>")
    return note + _table_section("reproduction", rows, file, info)


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n{GENERATOR}\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")


def _origin(meta: Mapping[str, Any]) -> str:
    """The data origin first (synthetic data marked), then what identifies the run."""
    data = meta.get("data") or {}
    synthetic = any(reproduction.synthetic_origin(v) for v in data.values())
    items = [f"<li><b>data</b> <code>{escape(str(k))}</code>: {escape(str(v))}</li>" for k, v in data.items()]
    if not items:
        items.append("<li><b>data</b>: not recorded by this benchmark</li>")
    for key in ("protocol", "git_revision", "icl_version", "created", "device", "run_id", "schema_version"):
        if meta.get(key) is not None:
            items.append(f"<li><b>{escape(key)}</b>: <code>{escape(str(meta[key]))}</code></li>")
    if meta.get("command"):
        items.append(f"<li><b>command</b>: <code>{escape(' '.join(map(str, meta['command'])))}</code></li>")
    for label, m in (meta.get("models") or {}).items():
        ref = " (reference, not ranked)" if isinstance(m, Mapping) and m.get("reference") else ""
        mid = m.get("model_id") if isinstance(m, Mapping) else m
        items.append(f"<li><b>model</b> <code>{escape(str(label))}</code>: id <code>{escape(str(mid))}</code>"
                     f"{escape(ref)}</li>")
    for label, kinds in (meta.get("not_applicable") or {}).items():
        named = ", ".join(f"{k} {n} items" for k, n in sorted(kinds.items()))
        items.append(f"<li><b>not applicable</b> to <code>{escape(str(label))}</code> (it does not serve their "
                     f"request type; not scored): {escape(named)}</li>")
    for label, cells in (meta.get("refused") or {}).items():
        named = "; ".join(f"{c} {r['items']} items ({r['why']})" for c, r in sorted(cells.items()))
        items.append(f"<li><b>not applicable</b> to <code>{escape(str(label))}</code> (it refuses them; stored, not "
                     f"scored): {escape(named)}</li>")
    for label, why in (meta.get("stopped_models") or {}).items():
        items.append(f"<li><b>stopped</b> <code>{escape(str(label))}</code>: {escape(str(why))}</li>")
    if meta.get("judge_id"):
        items.append(f"<li><b>judge</b>: id <code>{escape(str(meta['judge_id']))}</code></li>")
    counts = meta.get("counts") or {}
    if counts:
        items.append("<li><b>counts</b>: " + escape(", ".join(f"{k} {v}" for k, v in counts.items())) + "</li>")
    cls = "origin synthetic" if synthetic else "origin"
    return f'<div class="{cls}"><ul>{"".join(items)}</ul></div>'


# -- tables ------------------------------------------------------------------------------------
def metric_info(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, tuple[Optional[str], bool]]:
    """metric -> (unit, lower is better) from every long table that says so (``metric`` with
    ``direction`` and optionally ``unit`` columns)."""
    info: dict[str, tuple[Optional[str], bool]] = {}
    for rows in tables.values():
        for r in rows[:100000]:
            if "metric" in r and "direction" in r and r["metric"] not in info:
                unit = r.get("unit")
                info[str(r["metric"])] = (None if unit in (None, "") else str(unit), _lower(r["direction"]))
    return info


def _lower(direction: Any) -> bool:
    text = str(direction).lower()
    return "low" in text or "\u2193" in text or text in ("-1", "min", "minimize")


def _header(col: str, info: Mapping[str, tuple[Optional[str], bool]]) -> str:
    if col in info:
        unit, lower = info[col]
        return metric_label(col, lower, unit)
    if col.lower() in METRIC_UNITS or col.lower() in LOWER_IS_BETTER:
        return metric_label(col)
    return col


def _intervals(cols: Sequence[str]) -> dict[str, tuple[str, str]]:
    """value column -> (low column, high column) for the intervals a table carries."""
    pairs: dict[str, tuple[str, str]] = {}
    if "ci_low" in cols and "ci_high" in cols:
        target = next((c for c in ("value", "mean", "accuracy") if c in cols), None)
        if target is None:  # the nearest column before the interval that is not a spread or a count
            before = cols[:cols.index("ci_low")]
            target = next((c for c in reversed(before) if c not in ("std", "n", "n_failed", "n_missing")), None)
        if target is not None:
            pairs[target] = ("ci_low", "ci_high")
    for c in cols:
        for lo, hi in (("_lo", "_hi"), ("_ci_low", "_ci_high")):
            if c.endswith(lo) and c[: -len(lo)] + hi in cols and c[: -len(lo)] in cols:
                pairs[c[: -len(lo)]] = (c, c[: -len(lo)] + hi)
    return pairs


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "" if v is None else str(v)
    if isinstance(v, float):
        return "missing" if math.isnan(v) else f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return " ".join(_fmt(x) for x in v)
    return str(v)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _table_section(name: str, rows: Sequence[Mapping[str, Any]], file: Optional[str],
                   info: Mapping[str, tuple[Optional[str], bool]]) -> str:
    link = f' (<a href="{escape(file)}">{escape(file)}</a>)' if file else ""
    head = f'<h3 id="table-{escape(name)}">{escape(name)}{link}</h3>'
    if len(rows) <= OPEN_ROWS:
        return head + html_table(rows, info)
    return head + f"<details><summary>{len(rows)} rows (click to show)</summary>{html_table(rows, info)}</details>"


def html_table(rows: Sequence[Mapping[str, Any]], info: Optional[Mapping[str, tuple[Optional[str], bool]]] = None) -> str:
    """One table: intervals folded into their value (``value [low, high]``), units and ↑/↓ in
    the headers of known metrics and in the ``metric`` cells of long tables, at most
    ``MAX_ROWS`` rows."""
    if not rows:
        return '<p class="note">(no rows)</p>'
    info = info or {}
    cols = list(dict.fromkeys(k for r in rows for k in r))
    pairs = _intervals(cols)
    hidden = {c for lo_hi in pairs.values() for c in lo_hi}
    shown = [c for c in cols if c not in hidden]
    long_form = "metric" in cols and "direction" in cols
    heads = [(_header(c, info) + (" [95% CI]" if c in pairs and pairs[c][0].endswith(("ci_low",)) else
                                  " [interval]" if c in pairs else "")) for c in shown]
    out = ['<div class="scroll"><table><thead><tr>', *(f"<th>{escape(h)}</th>" for h in heads), "</tr></thead><tbody>"]
    for r in rows[:MAX_ROWS]:
        out.append("<tr>")
        for c in shown:
            v = r.get(c)
            text = _fmt(v)
            if c in pairs and _is_num(v):
                lo: Any = r.get(pairs[c][0])
                hi: Any = r.get(pairs[c][1])
                if _is_num(lo) and _is_num(hi) and math.isfinite(float(lo)) and math.isfinite(float(hi)):
                    text += f" [{lo:.4g}, {hi:.4g}]"
            elif c == "metric" and long_form and v is not None:
                unit = r.get("unit")
                text = metric_label(str(v), _lower(r.get("direction")), None if unit in (None, "") else str(unit))
            elif c == "metric" and isinstance(v, str) and (v in info or v.lower() in METRIC_UNITS):
                text = _header(v, info)
            cls = ' class="n"' if _is_num(v) else ""
            out.append(f"<td{cls}>{escape(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    if len(rows) > MAX_ROWS:
        out.append(f'<p class="note">first {MAX_ROWS} of {len(rows)} rows; the CSV holds all</p>')
    return "".join(out)


# -- figures -----------------------------------------------------------------------------------
def _figures(plots: Sequence[Path], out: Path) -> list[tuple[str, str]]:
    """(stem, <figure>) per figure: its SVG inline where one was written, else the PNG as a
    data URI. Plot files outside ``out`` or unreadable are left out."""
    by_stem: dict[Path, list[Path]] = {}
    for p in plots:
        by_stem.setdefault(Path(p).with_suffix(""), []).append(Path(p))
    figures = []
    for n, (stem, paths) in enumerate(by_stem.items()):
        svg = next((p for p in paths if p.suffix == ".svg"), None)
        png = next((p for p in paths if p.suffix == ".png"), None)
        rel = escape((png or svg or stem).relative_to(out).as_posix() if (png or svg or stem).is_relative_to(out)
                     else (png or svg or stem).name)
        try:
            if svg is not None:
                content = inline_svg(svg.read_text(encoding="utf-8"), f"f{n}-")
            elif png is not None:
                data = base64.b64encode(png.read_bytes()).decode("ascii")
                content = f'<img class="grid" alt="{escape(stem.name)}" src="data:image/png;base64,{data}">'
            else:
                continue
        except (OSError, UnicodeDecodeError):
            continue
        figures.append((stem.name, f'<figure id="fig-{escape(stem.name)}">{content}'
                                   f"<figcaption>{escape(stem.name)} ({rel})</figcaption></figure>"))
    return figures


_SVG_ID = re.compile(r'(\bid="|href="#|url\(#)([^")]+)')


def inline_svg(text: str, prefix: str) -> str:
    """A matplotlib SVG ready to sit inline in HTML: no XML prolog or doctype, every id (and
    every reference to one) prefixed with ``prefix`` so figures never share ids, its size
    scaled to the page's width."""
    start = text.find("<svg")
    if start < 0:
        raise ValueError("not an SVG document")
    svg = _SVG_ID.sub(lambda m: m.group(1) + prefix + m.group(2), text[start:])
    svg = re.sub(r'<svg\b([^>]*?)\swidth="([^"]*)"\s+height="([^"]*)"',
                 lambda m: f'<svg class="fig"{m.group(1)} style="width:{m.group(2)}"', svg, count=1)
    return svg


# -- samples, compute, failures, provenance ------------------------------------------------------
def _samples(path: Path) -> str:
    """A link to the per-sample log and what it holds: lines, fields, samples per model and status."""
    if not path.is_file():
        return ""
    lines, bad = 0, 0
    fields: dict[str, None] = {}
    per_model: dict[str, int] = {}
    per_status: dict[str, int] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                lines += 1
                try:
                    rec = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                if not isinstance(rec, dict):
                    continue
                for k in rec:
                    fields[k] = None
                m, s = str(rec.get("model", "")), str(rec.get("status", ""))
                per_model[m] = per_model.get(m, 0) + 1
                per_status[s] = per_status.get(s, 0) + 1
    except OSError as exc:
        return f"<p>samples.jsonl unreadable: {escape(str(exc))}</p>"
    parts = [f'<p><a href="samples.jsonl">samples.jsonl</a>: {lines} samples'
             + (f", {bad} unreadable lines" if bad else "") + "</p>",
             f'<p class="note">fields: {escape(", ".join(fields))}</p>']
    if any(per_model):
        parts.append(html_table([{"model": m, "samples": n} for m, n in per_model.items()]))
    if any(per_status):
        parts.append(html_table([{"status": s, "samples": n} for s, n in per_status.items()]))
    return "".join(parts)


def _compute(compute: Iterable[Mapping[str, Any]]) -> str:
    rows = []
    for c in compute:
        mem = c.get("peak_memory_bytes")
        rows.append({"model": c.get("model"), "stage": c.get("stage"), "device": c.get("device"),
                     "samples": c.get("samples"), "wall (s) \u2193": c.get("wall_s"),
                     "throughput (samples/s) \u2191": c.get("samples_per_s"),
                     "peak memory (MiB) \u2193": None if mem is None else mem / 2 ** 20,
                     "memory kind": c.get("memory_kind"),
                     **{k: v for k, v in c.items() if k not in ("model", "stage", "device", "samples", "wall_s",
                                                                 "samples_per_s", "peak_memory_bytes", "memory_kind")}})
    return html_table(rows) if rows else ""


def _failures(failures: Sequence[Any]) -> str:
    if not failures:
        return "<p>none</p>"
    rows = [{"stage": getattr(f, "stage", ""), "model": getattr(f, "model", None), "item": getattr(f, "item", None),
             "message": getattr(f, "message", str(f))} for f in failures[:MAX_FAILURES]]
    note = (f'<p class="note">first {MAX_FAILURES} of {len(failures)}; the store\'s failures table holds all</p>'
            if len(failures) > MAX_FAILURES else "")
    return html_table(rows) + note


def _provenance(meta: Mapping[str, Any]) -> str:
    text = json.dumps(meta, indent=2, sort_keys=True, allow_nan=False, default=str)
    return f"<details><summary>results.json</summary><pre>{escape(text)}</pre></details>"


# -- the index of several runs ---------------------------------------------------------------------
def index_html(runs: Sequence[tuple[str, Path, int]], folder: Path) -> str:
    """The page over several runs (``--fast``): per run (benchmark, run folder, exit status) its
    title, data origin and counts from its results.json, and a link to its report.html."""
    rows = []
    for name, run_dir, code in runs:
        try:
            meta = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        rel = run_dir.relative_to(folder).as_posix() if run_dir.is_relative_to(folder) else run_dir.as_posix()
        data = meta.get("data") or {}
        counts = meta.get("counts") or {}
        rows.append(f'<tr><td><a href="{escape(rel)}/report.html">{escape(name)}</a></td>'
                    f"<td>{escape('ok' if code == 0 else 'FAILED (exit ' + str(code) + ')')}</td>"
                    f"<td>{escape(report_title(name, meta))}</td>"
                    f"<td>{escape('; '.join(f'{k}: {v}' for k, v in data.items()))}</td>"
                    f"<td>{escape(', '.join(f'{k} {v}' for k, v in counts.items()))}</td></tr>")
    body = ("<h1>icl runs</h1>"
            "<table><thead><tr><th>benchmark</th><th>status</th><th>report</th><th>data origin</th>"
            f"<th>counts</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return _page("icl runs", body)


def may_write_index(path: Path) -> bool:
    """Whether ``path`` is free for an index: absent, or a page icl wrote (never a user's file)."""
    if not path.exists():
        return True
    try:
        return path.is_file() and not path.is_symlink() and GENERATOR in path.read_text(encoding="utf-8")[:2000]
    except (OSError, UnicodeDecodeError):
        return False


def write_index(runs: Sequence[tuple[str, Path, int]]) -> Optional[Path]:
    """``report.html`` in the folder holding the runs' folders (when they share one), linking each
    run's report; None when they do not share a folder or a file of the user's holds the name."""
    from icl.store.atomic import write_text  # a unique temporary name, then a rename

    parents = {Path(run_dir).resolve().parent for _, run_dir, _ in runs}
    if len(parents) != 1:
        return None
    folder = parents.pop()
    path = folder / "report.html"
    if not may_write_index(path):
        return None
    write_text(path, index_html([(n, Path(d).resolve(), c) for n, d, c in runs], folder))
    return path
