"""The papers' numbers beside a run's: matching, the interval check, the two-sample test,
``reproduction.csv`` and the report's "Against the paper" section.

A benchmark package may ship ``published.json`` (written by ``tools/published_tables.py`` from
the source documents): every value a paper printed, with its table, row label, column label, the
value and its ± as printed, and the cell of icl's long table it corresponds to (task, subset
pattern, shots, metric). A run's model is matched to a paper row only explicitly
(:func:`paper_row`): the ``published_as=ROW`` model argument, or the file's ``official`` map
for a family run with ``weights=hf:default`` (a weight-free baseline by its name alone). Rows
of synthetic data are never compared. Where a subset part differs from the paper's setting
(the file's ``differences``), the cell reads "not comparable: <the difference>".
"""

from __future__ import annotations

import fnmatch
import functools
import html
import importlib.resources
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from icl.report import schema

#: extra columns of results.csv (empty on rows without a published value)
RESULT_COLUMNS = ("published_value", "published_std", "published_source")
COLUMNS = ("benchmark", "task", "subset", "shots", "model", "metric", "paper_row", "source", "published",
           "published_std", "yours", "ci_low", "ci_high", "n", "difference", "inside_interval", "test", "p_value")
FILE = "published.json"


@dataclass(frozen=True)
class Value:
    """One printed number: ``value``/``std`` in the units of icl's table (times the table's
    scale); ``cell``: task, subset (a pattern), shots, metric and the paper's model row, or None
    when it is no cell of icl's (a rank, a fine-tuned model, an unmapped column)."""

    table: str
    row: str
    column: str
    printed: str
    std_printed: str
    value: float
    std: Optional[float]
    cell: Optional[dict[str, Any]]


@dataclass
class Published:
    benchmark: str
    paper: str
    short: str
    tables: dict[str, dict[str, Any]]
    values: list[Value]
    official: dict[str, str] = field(default_factory=dict)
    row_aliases: dict[str, str] = field(default_factory=dict)
    differences: list[dict[str, Any]] = field(default_factory=list)

    def rows(self) -> list[str]:
        """Every model row the cells name, in the papers' order (one spelling per row: the
        first printed; tables that print a row in another case or by an alias are the same row)."""
        out: dict[str, str] = {}
        for v in self.values:
            if v.cell is not None:
                name = self._unalias(v.cell["model"])
                out.setdefault(name.casefold(), name)
        return list(out.values())

    def row_name(self, name: str) -> Optional[str]:
        """The row ``name`` stands for (case and an alias ignored); None when none."""
        want = self._unalias(name).casefold()
        return next((r for r in self.rows() if r.casefold() == want), None)

    def _unalias(self, name: str) -> str:
        return next((r for a, r in self.row_aliases.items() if a.casefold() == name.casefold()), name)

    def same_row(self, printed: str, row: str) -> bool:
        return self._unalias(printed).casefold() == row.casefold()

    def source(self, v: Value) -> str:
        return f"{self.short} {v.table}"


def _float(text: str) -> float:
    return float(text)


def parse(data: Mapping[str, Any]) -> Published:
    """A ``published.json`` document as :class:`Published` (cells resolved: the table's cell,
    then the column's, then the value's own; a table or column with ``unmatched`` has none)."""
    tables = dict(data["tables"])
    values = []
    for v in data["values"]:
        t = tables[v["table"]]
        col = (t.get("columns") or {}).get(v["column"]) or {}
        scale = float(t.get("scale") or 1.0)
        cell: Optional[dict[str, Any]] = None
        if t.get("cell") is not None and not t.get("unmatched") and not col.get("unmatched") \
                and ("cell" not in v or v["cell"] is not None):
            cell = {**t["cell"], **{k: c for k, c in col.items() if k != "unmatched"}, **(v.get("cell") or {})}
            cell.setdefault("model", v["row"])
            cell.setdefault("subset", "*")
        std = _float(v["std_printed"]) * scale if v.get("std_printed") else None
        values.append(Value(v["table"], v["row"], v["column"], v["printed"], v.get("std_printed", ""),
                            _float(v["printed"]) * scale, std, cell))
    return Published(data["benchmark"], data["paper"], data["short"], tables, values, dict(data.get("official") or {}),
                     dict(data.get("row_aliases") or {}), list(data.get("differences") or []))


def load(bench: Any) -> Optional[Published]:
    """The published numbers shipped beside benchmark ``bench`` (an instance or class: the file
    ``published.json`` of its package); None when it ships none."""
    cls = bench if isinstance(bench, type) else type(bench)
    return _load_package(cls.__module__.rsplit(".", 1)[0])


@functools.lru_cache(maxsize=None)
def _load_package(package: str) -> Optional[Published]:
    """A package's published numbers, read and parsed once a process (package data does not change;
    a run asks once per model, the report again)."""
    try:
        text = importlib.resources.files(package).joinpath(FILE).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError, TypeError):
        return None
    return parse(json.loads(text))


def paper_row(published: Optional[Published], family: str, args: Mapping[str, Any],
              official_families: Sequence[str] = ()) -> Optional[dict[str, str]]:
    """The paper row a model stands for, only when said explicitly: ``published_as`` (an
    unknown row raises ValueError naming the known ones), else the ``official`` map for a
    family with ``weights=hf:default`` (``official_families``: the families the official
    checkpoint table lists; a family outside it, a weight-free baseline, matches with no
    arguments). None otherwise: never guessed from a name or a folder."""
    name = args.get("published_as")
    if name is not None:
        if published is None:
            raise ValueError(f"published_as={name!r}: this benchmark ships no published numbers")
        if not isinstance(name, str):
            raise ValueError(f"published_as must be a row name (text), got {name!r}")
        row = published.row_name(name)
        if row is None:
            raise ValueError(f"published_as={name!r}: no such row in {published.short}'s tables; rows: "
                             + ", ".join(published.rows()))
        return {"row": row, "by": "published_as", "paper": published.short}
    if published is None or family not in published.official:
        return None
    if family in official_families:
        if args.get("weights") != "hf:default":
            return None
        by = "official checkpoint (weights=hf:default)"
    elif args:
        return None
    else:
        by = "weight-free baseline"
    return {"row": published.official[family], "by": by, "paper": published.short}


def _shots_equal(a: Any, b: Any) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _difference(published: Published, subset: str) -> str:
    parts = subset.split("/")
    for d in published.differences:
        i = int(d["part"])
        if i < len(parts) and not fnmatch.fnmatchcase(parts[i], str(d["expected"])):
            return "not comparable: " + str(d["text"]).format(value=parts[i])
    return ""


def synthetic_origin(origin: Any) -> bool:
    """Whether a data origin (``Benchmark.data_origin()``'s text, or results.csv's ``data``
    cell, which may join several: ``"task: built-in synthetic (...); ..."``) names the built-in
    synthetic data. The one test of it for the reports: such data is never compared."""
    return "built-in synthetic" in str(origin)


def synthetic(row: Mapping[str, Any]) -> bool:
    """Whether a results.csv row was computed on built-in synthetic data (in part)."""
    return synthetic_origin(row.get("data", ""))


def matches(published: Published, rows: Mapping[str, Mapping[str, Any]], result: Mapping[str, Any]) -> list[Value]:
    """The published values of one results.csv row (``rows``: model label -> :func:`paper_row`)."""
    mapped = rows.get(str(result.get("model")))
    if mapped is None or synthetic(result):
        return []
    out = []
    for v in published.values:
        c = v.cell
        if c is None or not published.same_row(c["model"], mapped["row"]) or c.get("metric") != result.get("metric"):
            continue
        if c.get("task") is not None and str(c["task"]) != str(result.get("task")):
            continue
        if c.get("shots") is not None and not _shots_equal(c["shots"], result.get("shots")):
            continue
        if not fnmatch.fnmatchcase(str(result.get("subset", "")), str(c["subset"])):
            continue
        out.append(v)
    return out


def annotate(published: Optional[Published], rows: Mapping[str, Mapping[str, Any]],
             results: list[dict[str, Any]]) -> None:
    """Fill results.csv's :data:`RESULT_COLUMNS` in place (the first table's value where
    several print the same cell; empty where none)."""
    for r in results:
        found = matches(published, rows, r) if published is not None else []
        v = found[0] if found else None
        r["published_value"] = v.value if v else ""
        r["published_std"] = v.std if v and v.std is not None else ""
        r["published_source"] = published.source(v) if v and published else ""


def welch(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int) -> tuple[float, float, float]:
    """Welch's two-sample t-test from summary statistics (sample variances): t, degrees of
    freedom, two-sided p. Both variances 0: p is 1 for equal means, else 0."""
    se2 = var_a / n_a + var_b / n_b
    if se2 == 0:
        return (0.0 if mean_a == mean_b else math.copysign(math.inf, mean_a - mean_b), math.inf,
                1.0 if mean_a == mean_b else 0.0)
    t = (mean_a - mean_b) / math.sqrt(se2)
    den = (var_a / n_a) ** 2 / (n_a - 1) + (var_b / n_b) ** 2 / (n_b - 1)
    df = se2 ** 2 / den if den > 0 else math.inf
    return t, df, student_two_sided(t, df)


def student_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    if math.isinf(df):
        return math.erfc(abs(t) / math.sqrt(2))
    return _betainc(df / 2, 0.5, df / (df + t * t))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (continued fraction, modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + num * d
        d = tiny if abs(d) < tiny else d
        d = 1 / d
        c = 1 + num / c
        c = tiny if abs(c) < tiny else c
        f *= c * d
        if abs(1 - c * d) < 1e-14:
            break
    return front * (f - 1)


def reproduction_rows(published: Optional[Published], rows: Mapping[str, Mapping[str, Any]],
                      results: Sequence[Mapping[str, Any]], score_rows: Sequence[Mapping[str, Any]] = (),
                      spec: Any = None) -> list[dict[str, Any]]:
    """One row per (results.csv row, published value it matches): :data:`COLUMNS`. ``difference``
    is yours minus published, or "not comparable: ..." where the run's setting deliberately
    differs; ``test``/``p_value``: Welch's two-sample test where the paper prints a std and a
    count (of the table's ``std_over`` units, e.g. seeds) and the run has two or more of them."""
    if published is None:
        return []
    out = []
    # results.csv's grouping of the score rows and its metrics, made once when a test needs them
    groups: Optional[dict[tuple[str, str, str, str], list]] = None
    metrics: dict[str, Any] = {}
    for r in results:
        for v in matches(published, rows, r):
            table = published.tables[v.table]
            why = _difference(published, str(r.get("subset", "")))
            yours, lo, hi = (float(r[k]) for k in ("value", "ci_low", "ci_high"))
            row = dict(benchmark=r["benchmark"], task=r["task"], subset=r["subset"], shots=r["shots"],
                       model=r["model"], metric=r["metric"], paper_row=v.row,
                       source=f"{published.short} {v.table}, row {v.row}, column {v.column}", published=v.value,
                       published_std="" if v.std is None else v.std, yours=yours, ci_low=lo, ci_high=hi, n=r.get("n", ""),
                       difference=why or yours - v.value,
                       inside_interval="" if why else ("yes" if lo <= v.value <= hi else "no"), test="", p_value="")
            if not why and any(math.isnan(x) for x in (yours, lo, hi)):  # no value to judge: no verdict
                row.update(difference="", inside_interval="")
                out.append(row)
                continue
            count, unit = table.get("count"), table.get("std_over")
            if not why and v.std is not None and count and unit and spec is not None and int(count) > 1:
                if groups is None:
                    groups = schema.grouped(score_rows, spec)
                    metrics = {m.name: m for m in schema.metrics_of(score_rows, spec)}
                group = groups.get(schema.group_key(r["task"], r["subset"], r["shots"], r["model"]), [])
                metric = metrics.get(str(r["metric"]))
                # the cell's value per unit (seed): results.csv's own reduction of the cell, split by unit
                split = schema.values_by(group, spec, metric, unit) if metric is not None else {}
                mine = [x for x in split.values() if not math.isnan(x)]
                if len(mine) > 1:
                    m = sum(mine) / len(mine)
                    var = sum((x - m) ** 2 for x in mine) / (len(mine) - 1)
                    n_p = int(count)
                    var_p = v.std ** 2 * n_p / (n_p - 1)  # the paper's std is the population one (ddof 0)
                    t, df, p = welch(m, var, len(mine), v.value, var_p, n_p)
                    row["test"] = f"Welch t={t:.3g}, df={df:.3g} ({len(mine)} vs {n_p} {unit}s)"
                    row["p_value"] = p
            out.append(row)
    return out


def figure_svg(rows: Sequence[Mapping[str, Any]], size: int = 420) -> str:
    """Yours (with its 95% interval) against published, one point per comparable cell, and the
    identity line; "" when no cell is comparable."""
    pts = [r for r in rows if r.get("inside_interval") in ("yes", "no")]
    if not pts:
        return ""
    vals = [float(r[k]) for r in pts for k in ("published", "ci_low", "ci_high", "yours")]
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    m = 48

    def x(v: float) -> float:
        return m + (v - lo) / (hi - lo) * (size - 2 * m)

    def y(v: float) -> float:
        return size - m - (v - lo) / (hi - lo) * (size - 2 * m)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" viewBox="0 0 {size} {size}" '
             f'role="img" aria-label="yours against published">',
             f'<rect x="{m}" y="{m}" width="{size - 2 * m}" height="{size - 2 * m}" fill="none" stroke="#999"/>',
             f'<line x1="{x(lo):.1f}" y1="{y(lo):.1f}" x2="{x(hi):.1f}" y2="{y(hi):.1f}" stroke="#888" '
             f'stroke-dasharray="4 3"><title>identity</title></line>']
    for r in pts:
        px, py = x(float(r["published"])), y(float(r["yours"]))
        colour = "#1a7f37" if r["inside_interval"] == "yes" else "#cf222e"
        tip = html.escape(f"{r['model']} {r['task']} {r['subset']} shots {r['shots']} {r['metric']}: "
                          f"yours {float(r['yours']):.4g} [{float(r['ci_low']):.4g}, {float(r['ci_high']):.4g}], "
                          f"published {float(r['published']):.4g} ({r['source']})")
        parts.append(f'<line x1="{px:.1f}" y1="{y(float(r["ci_low"])):.1f}" x2="{px:.1f}" '
                     f'y2="{y(float(r["ci_high"])):.1f}" stroke="{colour}"/>')
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"><title>{tip}</title></circle>')
    parts.append(f'<text x="{size / 2:.0f}" y="{size - 12}" text-anchor="middle" font-size="12">published</text>')
    parts.append(f'<text x="14" y="{size / 2:.0f}" text-anchor="middle" font-size="12" '
                 f'transform="rotate(-90 14 {size / 2:.0f})">yours (95% interval)</text>')
    for v in (lo + pad, hi - pad):
        parts.append(f'<text x="{x(v):.1f}" y="{size - m + 14}" text-anchor="middle" font-size="10">{v:.3g}</text>')
        parts.append(f'<text x="{m - 4}" y="{y(v) + 3:.1f}" text-anchor="end" font-size="10">{v:.3g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def summary_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """``N cells against the paper: I inside your 95% interval, O outside, X not comparable``."""
    inside = sum(r.get("inside_interval") == "yes" for r in rows)
    outside = sum(r.get("inside_interval") == "no" for r in rows)
    return (f"{len(rows)} cells against the paper: {inside} inside your 95% interval, {outside} outside, "
            f"{len(rows) - inside - outside} not comparable")


def note(rows: Sequence[Mapping[str, Any]], synthetic_data: bool) -> str:
    """What a report says above reproduction.csv's rows (report.md and report.html alike; code
    in backticks): why there are none (synthetic data is never compared; no model matched to a
    paper row), or :func:`summary_line`."""
    if synthetic_data and not rows:
        return "Not compared: synthetic data is never compared with the papers."
    if not rows:
        return ("No cell to compare: match a model to a paper row with the model argument `published_as=ROW`, "
                "or run an official checkpoint (`weights=hf:default`); docs/reproducing.md lists the rows.")
    return summary_line(rows)


def markdown(rows: Sequence[Mapping[str, Any]], synthetic_data: bool) -> str:
    """report.md's "Against the paper" section: :func:`note` and one line per cell."""
    def num(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["## Against the paper", "", note(rows, synthetic_data)]
    if rows:
        lines += ["", "| task | subset | shots | model | paper | published | yours [95% CI] | difference | inside |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            published = num(r["published"]) + (f" ± {num(r['published_std'])}" if r.get("published_std") != "" else "")
            lines.append(f"| {r['task']} | {r['subset']} | {r['shots']} | {r['model']} | {r['source']} | {published} | "
                         f"{num(r['yours'])} [{num(r['ci_low'])}, {num(r['ci_high'])}] | {num(r['difference'])} | "
                         f"{r['inside_interval'] or '-'} |")
    return "\n".join(lines)


@dataclass
class Grid:
    """What ``--reproduce "Table N"`` plans: the benchmark options (tasks, datasets, shots, ...),
    the models of the table's rows that icl can name (an official checkpoint by its Hub name,
    ``weights=hf:default``; a weight-free baseline by name), the rows it cannot (and why), and
    the table's other settings that need a run of their own."""

    table: str
    options: dict[str, Any]
    models: list[str]
    unplanned: list[tuple[str, str]]
    also: list[str]

    def describe(self, short: str, given: Optional[Mapping[str, str]] = None) -> str:
        """The plan in lines; ``given``: paper row -> the label of the user's model standing for
        it (``published_as``)."""
        opts = "; ".join(f"{k} {','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                         for k, v in self.options.items())
        lines = [f"--reproduce {self.table!r} ({short}): {opts}",
                 "  models: " + (", ".join(self.models) or "none with an official checkpoint")]
        lines += [f"  your models: {', '.join(f'{label} as {row}' for row, label in given.items())}"] if given else []
        by_why: dict[str, list[str]] = {}
        for row, why in self.unplanned:
            by_why.setdefault(why, []).append(row)
        lines += [f"  not planned ({why}): {', '.join(rows)}" for why, rows in by_why.items()]
        lines += [f"  also in the table: {a}" for a in self.also]
        return "\n".join(lines)


def grid(published: Published, table: str, official: Mapping[str, Optional[str]],
         variant: Optional[str] = None) -> Grid:
    """The grid of ``table`` (ValueError naming the known tables for an unknown one).
    ``official``: family -> its official checkpoint reference (None: not on the Hub, with where
    it lives instead) for the families icl's checkpoint table lists; ``variant``: the user's
    choice among the table's variants (default: the first)."""
    key = next((t for t in published.tables if t.casefold() == table.strip().casefold()), None)
    if key is None:
        raise ValueError(f"--reproduce {table!r}: {published.benchmark} knows "
                         + ", ".join(sorted(published.tables, key=lambda t: (len(t), t))) + " (docs/reproducing.md)")
    spec = published.tables[key].get("reproduce") or {}
    options = {k: (tuple(v) if isinstance(v, list) else v) for k, v in (spec.get("options") or {}).items()}
    if spec.get("shots"):
        options["shots"] = tuple(spec["shots"])
    also = []
    variants = list(spec.get("variants") or ())
    if variants:
        chosen = variant if variant in variants else variants[0]
        options["variant"] = chosen
        also = [f"rows with --variant {v} (run again with it)" for v in variants if v != chosen]
    by_row = {row: family for family, row in published.official.items()}
    models, unplanned = [], []
    for row in spec.get("rows") or ():
        family = by_row.get(published._unalias(row)) or by_row.get(row)
        if family is None:
            unplanned.append((row, "no official checkpoint in icl: give --models NAME:...,published_as=ROW"))
        elif family not in official:
            models.append(family)  # a weight-free baseline
        elif official[family]:
            models.append(f"{family}:weights=hf:default")
        else:
            unplanned.append((row, f"weights not on the Hub: give --models {family}:weights=PATH, "
                                   f"docs/models.md 'Official weights'"))
    return Grid(key, options, models, unplanned, also)
