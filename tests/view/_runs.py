"""Run folders for the viewer's tests and benchmark, written through the store's own API: a store
with image and text answers, judges' verdicts, failures and overflows, plus results.json,
results.csv, samples.jsonl and requests.jsonl as a run writes them."""

from __future__ import annotations

import csv
import hashlib
import json
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

import cv2
import numpy as np

from icl.report.aggregate import RankTable
from icl.report.tables import RANK_COLUMNS, csv_text, rank_rows
from icl.store.sqlite import Failure, Response, Score, ScoreKey, Store

#: answers that must stay text in every page: markup, a formula cell, a lone surrogate's bytes
HOSTILE = ["<script>document.title='pwned'</script>", "<img src=x onerror=\"document.title='pwned'\">",
           "=HYPERLINK(\"http://evil\",\"x\")"]
BENCHMARK, PROTOCOL, SCORER = "toy", "toy-1", "1"


def png(seed: int, size: int = 32) -> bytes:
    """A distinct image per ``seed``: a gradient in a seeded colour with a seeded square (small
    as PNG, as real answers of a generator are not noise)."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 1, size, dtype=np.float32)
    colour = rng.integers(0, 256, 3).astype(np.float32)
    image = (ramp[:, None, None] * colour).repeat(size, axis=1)
    x, y = rng.integers(0, size // 2, 2)
    image[y:y + size // 4, x:x + size // 4] = 255 - colour
    image = image.astype(np.uint8)
    ok, data = cv2.imencode(".png", image)
    assert ok
    return data.tobytes()


def key_of(i: int, task: str, shots: int) -> str:
    return f"d1/{task}/k{shots}/q{i:06d}"


def write_run(folder: Path, n: int = 24, models: Sequence[str] = ("alpha", "beta"), *, hostile: bool = True,
              huge: bool = False, fingerprint: str = "fp1", samples: bool = True, image_size: int = 32,
              batch: int = 5000, images: Optional[int] = None, judged: bool = True,
              not_asked: int = 0, ranks: Optional[Mapping[tuple[str, str], tuple[float, float]]] = None
              ) -> dict[str, str]:
    """A finished run of ``n`` items x ``models`` in ``folder``; returns ``{label: model_id}``.
    Item i: task t1 (even) or t2 (odd), shots 1 or 2 (i % 3 == 0), image answers, except the text
    task t3 of the hostile answers (``hostile``) and, with ``huge``, one 50 MB answer. The first
    model fails item 1 and overflows item 2. ``images``: distinct PNGs (default one per item);
    ``judged``: a judge's verdict on every answer; ``not_asked``: the last model is not asked the
    first ``not_asked`` items of task t2 (not applicable to it). ``ranks``: ``{(task, model):
    (rank_low, rank_high)}`` of metric acc, written as ranks.csv by the report's own writer."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = {m: hashlib.sha256(m.encode()).hexdigest()[:20] for m in models}
    judge = "j" + hashlib.sha256(b"judge").hexdigest()[:19] if judged else ""
    pngs = [png(s, image_size) for s in range(min(n, images or n))]
    lines, requests, rows_csv = [], {}, []
    with Store(folder / "store.sqlite") as store:
        run_id = store.start_run({"config": {"benchmark": BENCHMARK, "fast": True, "out": str(folder)},
                                  "protocol": PROTOCOL})
        for m, mid in ids.items():
            store.put_model(mid, m, {"adapter": m})
        if judged:
            store.put_model(judge, "toy-judge", {"adapter": "toy-judge"})
        specs = [(i, "t1" if i % 2 == 0 else "t2", 2 if i % 3 == 0 else 1, None) for i in range(n)]
        if hostile:
            specs += [(n + j, "t3", 1, text) for j, text in enumerate(HOSTILE + ["bad \udcff bytes"])]
            if huge:
                specs.append((n + len(HOSTILE) + 1, "t3", 1, "x" * (50 << 20)))
        for start in range(0, len(specs), batch):
            responses, links, scores, failures = [], [], [], []
            for i, task, shots, text in specs[start:start + batch]:
                key = key_of(i, task, shots)
                rhash = hashlib.sha256(key.encode()).hexdigest()
                prompt = f"prompt of {task} item {i}: copy the pattern"
                text_hash = hashlib.sha256(prompt.encode()).hexdigest()
                requests[text_hash] = {"text_sha256": text_hash, "type": "AnalogyRequest", "images": 3, "text": prompt}
                for mi, (m, mid) in enumerate(ids.items()):
                    if mi == len(ids) - 1 and task == "t2" and i < 2 * not_asked:
                        continue
                    status, reason, error = "ok", None, None
                    value = ((i * 7919 + mi * 104729) % 1000) / 1000.0
                    metrics = {"acc": value, "copy_ssim": ((i * 31 + mi) % 100) / 100.0, "failed": 0.0,
                               "overflow": 0.0}
                    if mi == 0 and i == 1:
                        status, reason, error, metrics = "failed", "error", "CUDA out of memory (toy)", {}
                    if mi == 0 and i == 2:
                        reason, metrics["overflow"] = "overflow", 1.0
                    if status == "failed":
                        responses.append(Response(rhash, mid, "failed", "none", None, error, reason, run_id=run_id))
                        failures.append(Failure("model", error, m, key, None, run_id))
                    elif text is None:
                        responses.append(Response(rhash, mid, "ok", "png", pngs[i % len(pngs)], run_id=run_id))
                    else:
                        body = text.encode("utf-8", "surrogateescape")  # the lone surrogate as raw bytes
                        responses.append(Response(rhash, mid, "ok", "text", body, run_id=run_id))
                    links.append((key, mid, "answer:0", rhash))
                    if judged:
                        vhash = hashlib.sha256(f"verdict {key} {mid}".encode()).hexdigest()
                        responses.append(Response(vhash, judge, "ok", "text", f"verdict: {value:.3f} {HOSTILE[0]}",
                                                  run_id=run_id))
                        links.append((f"{key}|{mid}", judge, "judge:0", vhash))
                    scores.append(Score(ScoreKey(BENCHMARK, PROTOCOL, key, mid, judge, SCORER), status, metrics,
                                        error, reason, run_id=run_id))
                    if samples:
                        lines.append({"item": key, "group": {"task": task, "dataset": "d1" if text is None else "d1\ud800",
                                                "shots": shots},
                                      "model": m, "model_id": mid, "request": {"hash": rhash, "text_sha256": text_hash},
                                      "status": status, "metrics": metrics})
            store.write_batch(responses, links, scores, failures)
    for m in models:
        for task in ("t1", "t2"):
            vals = [((i * 7919 + list(ids).index(m) * 104729) % 1000) / 1000.0 for i in range(n)
                    if (task == "t1") == (i % 2 == 0)]
            mean = float(np.mean(vals)) if vals else 0.0
            rows_csv.append({"benchmark": BENCHMARK, "protocol": PROTOCOL, "task": task, "subset": "d1", "shots": 1,
                             "model": m, "metric": "acc", "value": mean, "ci_low": mean - 0.05, "ci_high": mean + 0.05,
                             "n": len(vals), "n_failed": 0, "direction": "higher", "unit": "", "data": "built-in synthetic"})
    with open(folder / "results.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows_csv[0]))
        w.writeheader()
        w.writerows(rows_csv)
    if ranks is not None:
        tasks = sorted({t for t, _ in ranks})
        table = RankTable(shots=1, models=list(models), tasks=tasks,
                          values={t: {"acc": {m: 0.0 for m in models}} for t in tasks},
                          metric_ranks={t: {"acc": {m: 1.0 for m in models}} for t in tasks},
                          intervals={t: {"acc": {m: ranks[(t, m)] for m in models if (t, m) in ranks}} for t in tasks})
        (folder / "ranks.csv").write_text(csv_text(rank_rows([table]), RANK_COLUMNS), encoding="utf-8")
    results = {"benchmark": BENCHMARK, "protocol": PROTOCOL, "run_id": run_id, "created": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "icl_version": "0.1.0", "git_revision": "abc123",
        "command": ["python", "-m", "icl.run", BENCHMARK], "data": {"d1": "built-in synthetic"},
        "fingerprints": {"dataset:d1": fingerprint}, "counts": {"planned": len(lines) or n * len(models)},
        "models": {m: {"model_id": mid} for m, mid in ids.items()},
        "judges": [{"label": "toy-judge", "judge_id": judge}] if judged else [], "failures": {"count": 1, "items": []},
        "config": {"benchmark": BENCHMARK, "fast": True, "out": str(folder)}, "not_applicable": {}}
    (folder / "results.json").write_text(json.dumps(results))
    if samples:
        with open(folder / "samples.jsonl", "w", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        with open(folder / "requests.jsonl", "w", encoding="utf-8") as f:
            for r in requests.values():
                f.write(json.dumps(r) + "\n")
    return ids


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``folder`` with its size, mtime and SHA-256: a viewer must leave it equal."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def all_keys(n: int) -> Iterable[str]:
    return (key_of(i, "t1" if i % 2 == 0 else "t2", 2 if i % 3 == 0 else 1) for i in range(n))
