"""The viewer's pages, rendered on the server as HTML strings.

Everything that comes from a run (answers, prompts, item keys, model labels, file names, judge
text, error messages) goes through :func:`esc`; navigation is ``<a href>`` links and GET forms
whose query strings reproduce the view. No inline script or style: the page's
Content-Security-Policy (``icl.view.server``) allows only the viewer's own files.
"""

from __future__ import annotations

import heapq
import html
import json
import math
import time
from typing import Any, Iterable, Mapping, Optional, Sequence
from urllib.parse import urlencode

from icl.view.index import OUTCOMES, PAGE_SIZE, TEXT_CHARS, RunIndex, text_of
from icl.view.runs import Run, comparable_key, fingerprint_difference, shots_text

#: rows shown in each of compare's "where A wins / loses" lists
WINS_SHOWN = 20


def esc(value: Any) -> str:
    """``value`` as HTML text (lone surrogates become U+FFFD)."""
    text = value if isinstance(value, str) else str(value)
    return html.escape(text.encode("utf-8", "replace").decode("utf-8"), quote=True)


def url(path: str, /, **params: Any) -> str:
    """``path?query`` with the parameters that are set (lists repeat their key)."""
    pairs = []
    for k, v in params.items():
        for item in (v if isinstance(v, (list, tuple)) else [v]):
            if item is not None and item != "":
                pairs.append((k, str(item)))
    return path + ("?" + urlencode(pairs) if pairs else "")


def link(text: Any, href: str, cls: str = "") -> str:
    return f'<a href="{esc(href)}"{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}>{esc(text)}</a>'


def page(title: str, body: str, *, live: bool = False) -> str:
    script = '<script src="/static/live.js" defer></script>' if live else ""
    nav = " · ".join([link("runs", "/"), link("leaderboard", "/leaderboard")])
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)} · icl view</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="stylesheet" href="/static/view.css">{script}</head>'
            f'<body><header><strong>icl view</strong> <nav>{nav}</nav></header><main><h1>{esc(title)}</h1>'
            f'{body}</main></body></html>')


def fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "∞" if v > 0 else "-∞"
        return f"{v:.{digits}g}"
    return str(v)


def duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "–"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def shorten(text: str, limit: int = TEXT_CHARS) -> str:
    """``text`` escaped, cut to ``limit`` characters with one line saying how long it was."""
    if len(text) <= limit:
        return f"<pre class=text>{esc(text)}</pre>"
    return (f"<pre class=text>{esc(text[:limit])}</pre><p class=note>shortened: {len(text):,} characters, "
            f"the first {limit:,} shown</p>")


# -- runs -------------------------------------------------------------------------------------
def progress(run: Run) -> dict[str, Any]:
    """What the runs page shows of a run's progress, also served as JSON for live updates."""
    planned = run.planned
    done = run.done + run.failed
    text = f"{done:,}/{planned:,}" if planned else f"{done:,} scores"
    if run.status == "running":
        if run.rate:
            text += f" · {run.rate:.1f}/s"
        text += f" · ETA {duration(run.eta_s)}" if run.eta_s is not None else \
            " · ETA unknown (plan known when it ends, or from its --check)"
    return {"key": run.key, "status": run.status, "done": done, "planned": planned, "failed": run.failed,
            "rate": run.rate, "eta_s": run.eta_s, "text": text, "synthetic": run.synthetic,
            "percent": None if not planned else min(100.0, 100.0 * done / planned), **run_facts(run)}


def run_facts(run: Run) -> dict[str, str]:
    """The runs table's descriptive cells of ``run`` (also in /api/runs, for rows added live)."""
    judges = [j.get("label") for j in run.results.get("judges") or [] if isinstance(j, dict)]
    labels = set((run.results.get("models") or {}).keys()) or set(run.models.values()) - set(judges)
    origin = "synthetic (built-in)" if run.synthetic else ", ".join(sorted(set(map(str, (run.results.get("data")
                                                                                       or {}).values()))))
    return {"benchmark": run.benchmark, "protocol": run.protocol, "models": ", ".join(sorted(map(str, labels))),
            "origin": origin or "–", "created": str(run.results.get("created") or ""),
            "icl": f'{run.results.get("icl_version") or "–"} {str(run.results.get("git_revision") or "")[:10]}'}


def runs_page(runs: Sequence[Run]) -> str:
    rows = []
    for run in runs:
        p, f = progress(run), run_facts(run)
        bar = f'<progress max="100" value="{p["percent"]:.1f}"></progress>' if p["percent"] is not None else ""
        rows.append(
            f'<tr data-run="{esc(run.key)}"><td>{link(run.key, url("/run", run=run.key))}</td>'
            f'<td>{esc(f["benchmark"])}</td><td>{esc(f["protocol"])}</td><td>{esc(f["models"])}</td>'
            f'<td class="{"synthetic" if run.synthetic else ""}">{esc(f["origin"])}</td>'
            f'<td class=status>{esc(run.status)}</td>'
            f'<td class=progress><span class=bar>{bar}</span> <span class=ptext>{esc(p["text"])}</span></td>'
            f'<td>{esc(run.failed)}</td><td>{esc(f["created"])}</td><td>{esc(f["icl"])}</td></tr>')
    body = ("<p>Every run folder under the folders named; a running one updates itself.</p>"
            "<table id=runs><thead><tr><th>run</th><th>benchmark</th><th>protocol</th><th>models</th>"
            "<th>data</th><th>status</th><th>progress</th><th>failed</th><th>created</th><th>icl</th></tr></thead>"
            f"<tbody>{''.join(rows) or '<tr><td colspan=10>no runs found</td></tr>'}</tbody></table>")
    return page("Runs", body, live=True)


def run_page(run: Run) -> str:
    ix = run.index
    r = run.results
    p = progress(run)
    facts = [("benchmark", run.benchmark), ("protocol", run.protocol), ("status", run.status),
             ("progress", p["text"]), ("data", "built-in synthetic: not the benchmark's data" if run.synthetic
                                       else ", ".join(map(str, (r.get("data") or {}).values())) or "–"),
             ("created", r.get("created") or "–"), ("icl", f'{r.get("icl_version") or "–"} '
                                                           f'{r.get("git_revision") or ""}'),
             ("command", " ".join(map(str, r.get("command") or [])) or "–")]
    if run.problem:
        facts.append(("problem", run.problem))
    body = "<dl class=facts>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts) + "</dl>"
    body += "<p class=links>" + " · ".join([
        link("samples", url("/samples", run=run.key)), link("failures", url("/failures", run=run.key)),
        link("compare models", url("/compare", run=run.key)),
        link("leaderboard", url("/leaderboard", benchmark=run.benchmark, protocol=run.protocol))]) + "</p>"
    if ix is not None and not ix.built:
        body += ("<p class=note id=indexing>Indexing this run's scores for the first time (once; kept in "
                 "$ICL_CACHE/view): the samples, compare and failures pages open when it is done.</p>")
    elif ix is not None:
        counts = ix.counts()
        rows = "".join(f"<tr><td>{link(run.label(m), url('/samples', run=run.key, model=run.label(m)))}</td>"
                       + "".join(f"<td>{c.get(o, 0):,}</td>" for o in OUTCOMES[:3]) + "</tr>"
                       for m, c in sorted(counts.items(), key=lambda kv: run.label(kv[0])))
        body += ("<h2>Scores per model and judge</h2><table><thead><tr><th>model</th><th>ok</th><th>failed</th>"
                 f"<th>overflow</th></tr></thead><tbody>{rows}</tbody></table>")
        na = r.get("not_applicable") or {}
        if na:
            body += "<p>Not applicable (asked nothing): " + esc(", ".join(f"{k}: {v if isinstance(v, int) else len(v)}"
                                                                     for k, v in na.items())) + "</p>"
    results = run.results_rows()
    if results:
        metric = results[0].get("metric")
        head = [x for x in results if x.get("metric") == metric]
        rows = "".join(f"<tr><td>{esc(x.get('model'))}</td><td>{esc(x.get('task'))}</td><td>{esc(x.get('subset'))}</td>"
                       f"<td>{esc(x.get('shots'))}</td><td>{esc(fmt(_float(x.get('value'))))}</td>"
                       f"<td>[{esc(fmt(_float(x.get('ci_low'))))}, {esc(fmt(_float(x.get('ci_high'))))}]</td>"
                       f"<td>{esc(x.get('n'))}</td></tr>" for x in head[:400])
        body += (f"<h2>Results: {esc(metric)}</h2><table><thead><tr><th>model</th><th>task</th><th>subset</th>"
                 f"<th>shots</th><th>value</th><th>95% interval</th><th>n</th></tr></thead><tbody>{rows}</tbody></table>")
    if run.results:  # a finished run: the source paper's numbers beside its own, as its reports show them
        body += against_paper(run)
    return page(f"Run {run.key}", body)


def against_paper(run: Run) -> str:
    """The run's reproduction.csv: the reports' own note (why there is nothing to compare, or how
    many cells lie inside the run's 95% intervals), their figure and one row per cell."""
    import re

    from icl.report import reproduction

    cells = run.reproduction_rows()
    note = re.sub(r"`([^`]*)`", r"<code>\1</code>", esc(reproduction.note(cells, run.synthetic)))
    out = f"<h2 id=paper>Against the paper</h2><p id=paper-note>{note}</p>"
    if not cells:
        return out
    try:
        out += f"<figure>{reproduction.figure_svg(cells)}</figure>"
    except (KeyError, TypeError, ValueError):  # a hand-edited file: the table still shows what it holds
        pass

    def difference(d: Any) -> str:  # yours minus published, or "not comparable: <why>"
        value = _float(d)
        return fmt(value) if value is not None else (str(d) if d else "–")

    def published(c: Mapping[str, Any]) -> str:
        std = c.get("published_std") or ""
        return fmt(_float(c.get("published"))) + (f" ± {fmt(_float(std))}" if std else "")

    rows = "".join(
        f"<tr><td>{esc(c.get('task'))}</td><td>{esc(c.get('subset'))}</td><td>{esc(c.get('shots'))}</td>"
        f"<td>{esc(c.get('model'))}</td><td>{esc(c.get('source'))}</td>"
        f"<td>{esc(published(c))}</td><td>{esc(fmt(_float(c.get('yours'))))} "
        f"[{esc(fmt(_float(c.get('ci_low'))))}, {esc(fmt(_float(c.get('ci_high'))))}]</td>"
        f"<td>{esc(difference(c.get('difference')))}</td>"
        f"<td class=inside>{esc(c.get('inside_interval') or '–')}</td><td>{esc(c.get('test') or '–')}</td></tr>"
        for c in cells)
    return out + ("<table id=paper-cells><thead><tr><th>task</th><th>subset</th><th>shots</th><th>model</th>"
                  "<th>paper</th><th>published</th><th>yours [95% interval]</th><th>difference</th><th>inside</th>"
                  f"<th>test</th></tr></thead><tbody>{rows}</tbody></table>")


# -- samples ----------------------------------------------------------------------------------
FILTER_KEYS = ("task", "dataset", "shots", "model", "outcome", "lo", "hi", "q", "metric", "sort")


def _select(name: str, options: Iterable[Any], chosen: Any, blank: str = "any") -> str:
    opts = [f'<option value="">{esc(blank)}</option>']
    for o in options:
        sel = " selected" if str(o) == str(chosen or "") else ""
        opts.append(f'<option value="{esc(o)}"{sel}>{esc(o)}</option>')
    return f'<label>{esc(name)} <select name="{esc(name)}" id="f-{esc(name)}">{"".join(opts)}</select></label>'


def samples_page(run: Run, params: Mapping[str, str], rows: list[dict], total: int, page_no: int) -> str:
    ix = run.index
    assert ix is not None
    choices = ix.choices()
    metric = params.get("metric") or ix.headline
    form = (f'<form method=get action="/samples" class=filters><input type=hidden name=run value="{esc(run.key)}">'
            + _select("task", choices["task"], params.get("task"))
            + _select("dataset", choices["dataset"], params.get("dataset"))
            + _select("shots", choices["shots"], params.get("shots"))
            + _select("model", [run.label(m) for m in choices["model"]], params.get("model"))
            + _select("outcome", OUTCOMES, params.get("outcome"))
            + _select("metric", choices["metric"], params.get("metric"), blank=f"headline ({ix.headline})")
            + f'<label>score from <input name=lo id=f-lo size=6 value="{esc(params.get("lo", ""))}"></label>'
            f'<label>to <input name=hi id=f-hi size=6 value="{esc(params.get("hi", ""))}"></label>'
            f'<label>text <input name=q id=f-q value="{esc(params.get("q", ""))}"></label>'
            + _select("sort", ["score", "-score", "spread", "key"], params.get("sort"), blank="item key")
            + '<button type=submit id=apply>apply</button></form>')
    if not choices["task"]:
        form += ("<p class=note>This run has no samples.jsonl (still running, or over 100,000 items x models "
                 "without --log-samples): filters by task, dataset and shots need it "
                 "(python -m icl.run export RUN_DIR writes it).</p>")
    if params.get("outcome") == "not applicable":
        form += ("<p class=note>Not applicable: items some model has a score of and this one has none; in a finished "
                 "run, the items it was not asked (it serves another request type)"
                 + ("; this run is still going, so some are only not yet scored" if run.status == "running" else "")
                 + ".</p>")
    base = {k: params.get(k) for k in FILTER_KEYS}
    # the generic sorts, then every other metric the run's scores hold (a benchmark's diagnostics
    # among them: vibe's copy_ssim, handthrough_ssim), highest first
    sorts = [("lowest score", "score"), ("highest score", "-score"), ("models disagree most", "spread")]
    sorts += [(m, m) for m in choices["metric"] if m != base.get("metric")]
    sort_links = " · ".join(link(label, url("/samples", run=run.key, **{**base, "sort": s, "page": None}))
                            for label, s in sorts)
    out = [form, f"<p>sort: {sort_links}</p>", f'<p id=count>{total:,} rows match; page {page_no + 1} of '
                                                 f'{max(1, math.ceil(total / PAGE_SIZE)):,}</p>']
    trs = []
    for r in rows:
        label = run.label(r["model_id"])
        value = _metric(r["metrics"], metric)  # from the JSON: an infinite PSNR shows as such
        answer = _answer_cell(run, r)
        item_link = link(r["item_key"], url("/item", run=run.key, key=r["item_key"]), "item")
        trs.append(f'<tr class="outcome-{esc(r["outcome"])}"><td>{item_link}</td><td>{esc(r["task"] or "–")}</td>'
                   f'<td>{esc(r["dataset"] or "–")}</td><td>{esc(fmt(r["shots"]))}</td><td>{esc(label)}</td>'
                   f'<td>{esc(run.label(r["judge_id"])) if r["judge_id"] else "–"}</td>'
                   f'<td class=outcome>{esc(r["outcome"])}</td><td class=score>{esc(fmt(value))}</td>'
                   f'<td>{esc(fmt(r["spread"])) if r["spread"] is not None else ""}</td><td>{answer}</td></tr>')
    out.append(f"<table id=samples><thead><tr><th>item</th><th>task</th><th>dataset</th><th>shots</th><th>model</th>"
               f"<th>judge</th><th>outcome</th><th>{esc(metric or 'score')}</th><th>spread</th><th>answer</th></tr>"
               f"</thead><tbody>{''.join(trs)}</tbody></table>")
    nav = []
    if page_no > 0:
        nav.append(link("previous", url("/samples", run=run.key, **base, page=page_no - 1), "prev"))
    if (page_no + 1) * PAGE_SIZE < total:
        nav.append(link("next", url("/samples", run=run.key, **base, page=page_no + 1), "next"))
    out.append(f"<p class=pager>{' · '.join(nav)}</p>")
    return page(f"Samples of {run.key}", "".join(out))


def _metric(metrics_text: str, metric: Optional[str]) -> Optional[float]:
    try:
        v = json.loads(metrics_text).get(metric)
    except (ValueError, AttributeError):
        return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(v: Any) -> Optional[float]:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def image_url(run: Run, model_id: str, request_hash: str, full: bool = False) -> str:
    return url("/img", run=run.key, model=model_id, hash=request_hash, full=1 if full else None)


def _answer_cell(run: Run, r: Mapping[str, Any]) -> str:
    if r["answer_kind"] == "png" and r["answer_hash"]:
        return (f'<a href="{esc(image_url(run, r["model_id"], r["answer_hash"], True))}">'
                f'<img class=thumb loading=lazy alt="answer" src="{esc(image_url(run, r["model_id"], r["answer_hash"]))}">'
                f'</a>')
    if r["answer_kind"] == "text":
        text = r["answer_text"] or ""
        return f'<span class=answer>{esc(text[:160])}{"…" if len(text) > 160 else ""}</span>'
    return f'<span class=note>{esc((r.get("error") or "no answer")[:160])}</span>'


def _seen_part(part: Mapping[str, Any]) -> str:
    if isinstance(part.get("src"), str):
        src = url("/seen", name=part["src"])
        return (f'<figure class=seen><a href="{esc(src)}"><img class=thumb alt="{esc(part.get("label", "image"))}" '
                f'src="{esc(src)}"></a><figcaption>{esc(part.get("label", ""))}</figcaption></figure>')
    return f"<span class=ptext>{esc(text_of(part.get('text', ''), TEXT_CHARS))}</span>"


def item_page(run: Run, key: str, rows: list[dict], answers: Mapping[str, Any], verdicts: Mapping[tuple, list],
              gallery: Optional[Mapping[str, Any]], seen: Optional[Mapping[str, Any]] = None) -> str:
    """One item: what the model saw (``seen``: its request rebuilt by :mod:`icl.view.requests`,
    with the target; else the gallery's record of it, else the prompt text), each model's answer,
    every score and each judge's verdict and raw text. ``answers``: {model id: Response};
    ``verdicts``: {(model id, judge id): [Response or None]}."""
    out = []
    if rows:
        r0 = rows[0]
        out.append(f"<p>task {esc(r0['task'] or '–')} · dataset {esc(r0['dataset'] or '–')} · shots "
                   f"{esc(fmt(r0['shots']))}</p>")
    out.append("<h2>What the model saw</h2>")
    if seen and isinstance(seen.get("parts"), list):
        out.append(f"<div class=prompt id=seen>{''.join(_seen_part(p) for p in seen['parts'] if isinstance(p, dict))}</div>")
        target = seen.get("target")
        if isinstance(target, dict):
            out.append(f"<h2>Target</h2><div class=prompt id=target>{_seen_part(target)}</div>")
    elif gallery and gallery.get("prompt"):
        parts = []
        for part in gallery["prompt"]:
            if isinstance(part, dict) and "text" in part:
                parts.append(f"<span class=ptext>{esc(text_of(part['text']))}</span>")
            elif isinstance(part, dict) and isinstance(part.get("src"), str):
                parts.append(f'<img class=thumb alt="support image" src="{esc(url("/file", run=run.key, path=part["src"]))}">')
        out.append(f"<div class=prompt>{''.join(parts)}</div>")
    elif rows and rows[0].get("prompt"):
        out.append(shorten(rows[0]["prompt"]))
    else:
        out.append("<p class=note>The run recorded no prompt for this item (its gallery shows a sample of items; "
                   "requests.jsonl the text of each request).</p>")
    if seen and seen.get("error"):
        out.append(f"<p class=note id=seen-error>The request could not be rebuilt: {esc(text_of(seen['error'], 500))}</p>")
    shown: set[str] = set()
    for r in rows:
        label = run.label(r["model_id"])
        if r["model_id"] not in shown:
            shown.add(r["model_id"])
            out.append(f"<section class=model><h2>{esc(label)}</h2>")
            resp = answers.get(r["model_id"])
            if resp is None:
                out.append(f"<p class=note>no answer stored ({esc(r['outcome'])}: {esc(r['error'] or '')})</p>")
            elif resp.kind == "png":
                out.append(f'<a href="{esc(image_url(run, r["model_id"], resp.request_hash, True))}">'
                           f'<img class=answer alt="answer of {esc(label)}" '
                           f'src="{esc(image_url(run, r["model_id"], resp.request_hash))}"></a>')
            elif resp.kind == "text":
                out.append(shorten(text_of(resp.body, 10 ** 9)))
            else:
                out.append(f"<p class=note>failed ({esc(resp.reason)}): {esc(text_of(resp.error))}</p>")
            out.append("</section>")
        metrics = json.loads(r["metrics"]) if r["metrics"] else {}
        cells = "".join(f"<tr><td>{esc(k)}</td><td>{esc(fmt(v if not isinstance(v, bool) else int(v)))}</td></tr>"
                        for k, v in sorted(metrics.items()))
        judge = run.label(r["judge_id"]) if r["judge_id"] else None
        out.append(f"<h3>scores{(' by judge ' + esc(judge)) if judge else ''} ({esc(r['outcome'])})</h3>"
                   f"<table class=metrics><tbody>{cells}</tbody></table>")
        if r["error"]:
            out.append(f"<p class=error>{esc(r['error'])}</p>")
        for n, v in enumerate(verdicts.get((r["model_id"], r["judge_id"]), [])):
            if v is None:
                continue
            raw = text_of(v.body, 10 ** 9) if v.kind == "text" else f"({v.kind}: {text_of(v.error)})"
            out.append(f"<h4>{esc(judge)}: verdict {n}</h4>{shorten(raw)}")
    return page(f"Item {key}", "".join(out) or "<p>no scores stored for this item</p>")


# -- compare ----------------------------------------------------------------------------------
Pair = tuple[str, str, list, float]  # item key, judge id, each side's value, A - B


def pair_up(values: list[dict], lower_better: bool, shown: int = WINS_SHOWN
            ) -> tuple[dict[str, Any], list[Pair], list[Pair]]:
    """The paired comparison of the first two sides over the items every side scored:
    ``({n, mean, wins, losses}, wins, losses)``, largest differences first, ``shown`` of each.
    ``values``: per side ``{(item, judge): value}`` (:meth:`icl.view.index.RunIndex.values`, the
    one reading of a model's values; the compare page's only pairing, one run or several)."""
    shared = set(values[0]).intersection(*values[1:])
    sign = -1.0 if lower_better else 1.0
    diffs = []
    for k, j in sorted(shared):
        vals = [v[(k, j)] for v in values]
        if None not in vals:
            diffs.append((k, j, vals, vals[0] - vals[1]))
    wins = [d for d in diffs if sign * d[3] > 0]
    losses = [d for d in diffs if sign * d[3] < 0]
    mean = math.fsum(d[3] for d in diffs) / len(diffs) if diffs else None
    # largest differences first; equal ones in item order (nsmallest and nlargest are stable)
    return ({"n": len(diffs), "mean": mean, "wins": len(wins), "losses": len(losses)},
            heapq.nsmallest(shown, wins, key=lambda d: -sign * d[3]),
            heapq.nsmallest(shown, losses, key=lambda d: sign * d[3]))


def compare_page(run: Run, sides: list[tuple[Run, str]], specs: Sequence[str], metric: Optional[str],
                 lower_better: bool, summary: Optional[Mapping[str, Any]], wins: Sequence[Pair],
                 losses: Sequence[Pair], choices: Mapping[str, list]) -> str:
    """``sides``: (run, model id) per column, as the query named them (``specs``); ``summary``,
    ``wins``, ``losses``: :func:`pair_up`'s (None: fewer than two sides)."""
    form = (f'<form method=get action="/compare" class=filters><input type=hidden name=run value="{esc(run.key)}">'
            + "".join(_select("m", choices["m"], specs[i] if i < len(specs) else "", blank="choose a model")
                      .replace('id="f-m"', f'id="f-m{i}"') for i in range(max(2, len(sides))))
            + _select("metric", choices["metric"], metric) + '<button type=submit id=apply>compare</button></form>')
    out = [form, "<p class=note>Models are given as LABEL (this run) or RUN|LABEL (another run's model); "
                 "items are paired by item key and judge.</p>"]
    if summary is None or len(sides) < 2:
        return page("Compare", "".join(out))
    names = [f"{s.key}|{s.label(m)}" if s is not run else s.label(m) for s, m in sides]
    n = summary["n"]
    out.append(f"<p id=summary>{n:,} items scored by all; mean paired difference "
               f"{esc(names[0])} − {esc(names[1])}: {esc(fmt(summary['mean']))} "
               f"({'lower' if lower_better else 'higher'} is better); {esc(names[0])} wins {summary['wins']:,}, "
               f"loses {summary['losses']:,}, ties {n - summary['wins'] - summary['losses']:,}</p>")

    def rows_of(items: Sequence[Pair]) -> str:
        trs = []
        for key, judge, vals, d in items:
            cells = "".join(f"<td>{esc(fmt(v))}{_thumb(s, m, key)}</td>" for (s, m), v in zip(sides, vals))
            trs.append(f"<tr><td>{link(key, url('/item', run=sides[0][0].key, key=key), 'item')}</td>{cells}"
                       f"<td class=diff>{esc(fmt(d))}</td></tr>")
        head = "".join(f"<th>{esc(n)}</th>" for n in names)
        return (f"<table><thead><tr><th>item</th>{head}<th>difference (A − B)</th></tr></thead>"
                f"<tbody>{''.join(trs)}</tbody></table>")

    out.append(f"<h2 id=wins>Where {esc(names[0])} wins ({summary['wins']:,})</h2>{rows_of(wins)}")
    out.append(f"<h2 id=losses>Where {esc(names[0])} loses ({summary['losses']:,})</h2>{rows_of(losses)}")
    return page("Compare", "".join(out))


def _thumb(run: Run, model_id: str, key: str) -> str:
    if run.index is None:
        return ""
    row = run.index.answer_of(key, model_id)
    if row and row[0] == "png" and row[1]:
        return f' <img class=thumb loading=lazy alt="answer" src="{esc(image_url(run, model_id, row[1]))}">'
    if row and row[0] == "text":
        return f' <span class=answer>{esc((row[2] or "")[:80])}</span>'
    return ""


# -- failures ---------------------------------------------------------------------------------
def failures_page(run: Run, rows: list[dict], events: list) -> str:
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["error"] or r["reason"] or r["outcome"], []).append(r)
    out = [f"<p>{len(rows):,} failed or overflowing scores in {len(groups):,} groups (by message).</p>"]
    for message, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        items = "".join(f"<li>{link(m['item_key'], url('/item', run=run.key, key=m['item_key']), 'item')} "
                        f"({esc(run.label(m['model_id']))})</li>" for m in members[:200])
        more = f"<p class=note>and {len(members) - 200:,} more</p>" if len(members) > 200 else ""
        out.append(f"<section class=failure-group><h2>{len(members):,} × {esc(text_of(message, 500))}</h2>"
                   f"<ul>{items}</ul>{more}</section>")
    if events:
        trs = "".join(f"<tr><td>{esc(f.stage)}</td><td>{esc(f.model or '')}</td><td>{esc(f.item or '')}</td>"
                      f"<td>{esc(text_of(f.message, 500))}</td></tr>" for f in events[:500])
        out.append(f"<h2>Failure events</h2><table><thead><tr><th>stage</th><th>model</th><th>item</th><th>message</th>"
                   f"</tr></thead><tbody>{trs}</tbody></table>")
    return page(f"Failures of {run.key}", "".join(out))


# -- leaderboard ------------------------------------------------------------------------------
def rank_intervals(entries: list[tuple[str, float, float, float]], lower_better: bool) -> dict[str, tuple[int, int]]:
    """Rank intervals from 95% intervals: a model ranks at best 1 + the models whose interval lies
    wholly better than its own, at worst the number of models less those wholly worse."""
    out = {}
    for name, _, lo, hi in entries:
        better = sum(1 for n, _, l2, h2 in entries if n != name and (h2 < lo if lower_better else l2 > hi))
        worse = sum(1 for n, _, l2, h2 in entries if n != name and (l2 > hi if lower_better else h2 < lo))
        out[name] = (1 + better, len(entries) - worse)
    return out


def leaderboard_page(runs: Sequence[Run], params: Mapping[str, str]) -> str:
    by_bench: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        if run.results:
            by_bench.setdefault((run.benchmark, run.protocol), []).append(run)
    benches = sorted(by_bench)
    want = (params.get("benchmark"), params.get("protocol"))
    if want not in by_bench:
        want = next((b for b in benches if b[0] == want[0]), benches[0] if benches else ("", ""))
    links = " · ".join(link(f"{b} ({p})", url("/leaderboard", benchmark=b, protocol=p)) for b, p in benches)
    out = [f"<p>benchmarks: {links or 'none with results yet'}</p>"]
    group = by_bench.get(want, [])
    if not group:
        return page("Leaderboard", "".join(out))
    # the largest set of runs agreeing on protocol and data fingerprints makes the table
    sets: dict[tuple, list[Run]] = {}
    for run in group:
        sets.setdefault(comparable_key(run), []).append(run)
    chosen_key = params.get("data")
    keys = sorted(sets, key=lambda k: (-len(sets[k]), k))
    chosen = next((k for k in keys if k[2] == chosen_key), keys[0])
    members = sets[chosen]
    # a model label found in several runs of the table gets its run's name: each run's row stays its own
    per_run = [(run, run.results_rows()) for run in members]
    seen: dict[str, set[str]] = {}
    for run, found in per_run:
        for row in found:
            seen.setdefault(str(row.get("model")), set()).add(run.key)
    rows = [{**row, "model": row.get("model") if len(seen[str(row.get("model"))]) == 1 else
             f"{row.get('model')} ({run.key})", "label": str(row.get("model")), "run": run}
            for run, found in per_run for row in found if row.get("protocol", run.protocol) == run.protocol]
    metrics = list(dict.fromkeys(r.get("metric") for r in rows if r.get("metric")))
    metric = params.get("metric") if params.get("metric") in metrics else (metrics[0] if metrics else None)
    shots_all = sorted({r.get("shots", "") for r in rows}, key=lambda s: (len(s), s))
    shots = params.get("shots") if params.get("shots") in shots_all else None
    out.append(f"<h2>{esc(want[0])} · {esc(want[1])}</h2><p>runs in this table: "
               + ", ".join(link(r.key, url("/run", run=r.key)) for r in members) + "</p>")
    out.append("<p>metric: " + " · ".join(
        f"<strong>{esc(m)}</strong>" if m == metric else link(m, url("/leaderboard", benchmark=want[0], protocol=want[1],
                                                                      data=chosen[2] if len(keys) > 1 else None,
                                                                      metric=m, shots=shots))
        for m in metrics) + "</p>")
    out.append("<p>shots: " + " · ".join(
        [link("all", url("/leaderboard", benchmark=want[0], protocol=want[1], metric=metric))] +
        [link(s, url("/leaderboard", benchmark=want[0], protocol=want[1], metric=metric, shots=s)) for s in shots_all
         if s]) + "</p>")
    cells: dict[tuple[str, str], tuple[float, float, float]] = {}
    origin: dict[tuple[str, str], tuple[Run, str]] = {}  # the run and model label of a cell
    groups: dict[str, tuple[str, str]] = {}  # column -> (task, shots)
    subsets: dict[tuple[str, str, str], set[str]] = {}  # (run, task, shots) -> the subsets of the metric
    lower = False
    for r in rows:
        if r.get("metric") != metric or (shots and r.get("shots") != shots):
            continue
        lower = r.get("direction") == "lower"
        col = f"{r.get('task')}{'/' + r['subset'] if r.get('subset') else ''} k={r.get('shots')}"
        v, lo, hi = _float(r.get("value")), _float(r.get("ci_low")), _float(r.get("ci_high"))
        if v is not None:
            cells[(str(r.get("model")), col)] = (v, lo if lo is not None else v, hi if hi is not None else v)
            origin[(str(r.get("model")), col)] = (r["run"], r["label"])
            groups[col] = (str(r.get("task")), shots_text(r.get("shots")))
            subsets.setdefault((r["run"].key, *groups[col]), set()).add(str(r.get("subset") or ""))
    models = sorted({m for m, _ in cells})
    cols = sorted({c for _, c in cells})
    # per column: the run's own rank intervals (ranks.csv) when one run holds every model of it and
    # ranked some; else (models of several runs together) ranks from the overlap of the intervals
    run_ranks: dict[str, Any] = {}
    for run in members:
        run_ranks[run.key] = run.rank_intervals(str(metric)) if metric else {}
    ranks: dict[str, dict[str, Optional[tuple[float, float]]]] = {}
    source: dict[str, str] = {}
    for c in cols:
        here = [m for m in models if (m, c) in cells]
        owners = {origin[(m, c)][0].key for m in here}
        own = run_ranks.get(next(iter(owners)), {}) if len(owners) == 1 else {}
        task, k = groups[c]
        theirs = {m: own.get((k, task, origin[(m, c)][1])) for m in here}
        if any(v is not None for v in theirs.values()):
            ranks[c] = theirs
            n = len(subsets[(next(iter(owners)), task, k)])
            source[c] = "the run's ranks.csv" + (f" (the task over {n} subsets)" if n > 1 else "")
        else:
            overlap = rank_intervals([(m, *cells[(m, c)]) for m in here], lower)
            ranks[c] = {m: (float(a), float(b)) for m, (a, b) in overlap.items()}
            source[c] = "overlap of the 95% intervals"
    head = "".join(f"<th>{esc(c)}<br><span class=rank-source>rank: {esc(source[c])}</span></th>" for c in cols)
    trs = []
    for m in models:
        tds = []
        for c in cols:
            if (m, c) not in cells:
                tds.append("<td>–</td>")
                continue
            v, lo, hi = cells[(m, c)]
            interval = ranks[c][m]
            if interval is None:
                rank = "<span class=rank>not ranked by the run</span>"
            else:
                best, worst = interval
                rank = f"<span class=rank>rank {esc(fmt(best) if best == worst else f'{fmt(best)}–{fmt(worst)}')}</span>"
            tds.append(f"<td>{esc(fmt(v))} <span class=ci>[{esc(fmt(lo))}, {esc(fmt(hi))}]</span> {rank}</td>")
        trs.append(f"<tr><th>{esc(m)}</th>{''.join(tds)}</tr>")
    out.append(f"<table id=leaderboard><thead><tr><th>model</th>{head}</tr></thead><tbody>{''.join(trs)}</tbody></table>"
               f"<p class=note id=rank-note>{esc(metric)}: {'lower' if lower else 'higher'} is better; 95% bootstrap "
               f"intervals from each run's results.csv. Rank intervals, as each column says: the run's ranks.csv "
               f"where one run holds every model of the column and ranked them (its own 95% bootstrap rank "
               f"intervals: its ranking rules applied to every resample; where the run ranks a task over several "
               f"subsets, the task's; 'not ranked by the run' for a model it left out of its ranking, a reference); "
               f"else, for models of several runs together, from the overlap of the 95% intervals (best: 1 + the "
               f"models wholly better, worst: the models less those wholly worse).</p>")
    others = [run for k in keys if k != chosen for run in sets[k]]
    if others:
        lis = "".join(f"<li>{link(run.key, url('/run', run=run.key))}: {esc(fingerprint_difference(members[0], run))} "
                      f"({link('its table', url('/leaderboard', benchmark=want[0], protocol=want[1], data=comparable_key(run)[2]))})</li>"
                      for run in others)
        out.append(f"<h2>Not comparable with this table</h2><ul id=not-comparable>{lis}</ul>")
    return page("Leaderboard", "".join(out))


def error_page(status: int, message: str) -> str:
    return page(f"{status}", f"<p class=error>{esc(message)}</p>")


def now() -> float:
    return time.time()
