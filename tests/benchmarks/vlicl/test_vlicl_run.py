"""``python -m icl.run vlicl --fast``: all ten tasks through the one runner, judge included."""

import csv
import json

from icl.benchmarks.vlicl.tasks import TASKS
from icl.run.__main__ import main


def test_fast_run_covers_every_task_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["vlicl", "--fast", "--out", str(out), "--data-root", str(tmp_path / "data"), "--no-progress"]
    assert main(args) == 0
    with open(out / "accuracy.csv", newline="") as f:
        acc = list(csv.DictReader(f))
    assert {r["task"] for r in acc} == set(TASKS) and {r["model"] for r in acc} == {"copy-last"}
    for name in ("shot_summary.csv", "ranks.csv", "capabilities.csv", "episodes.csv", "report.md", "results.json"):
        assert (out / name).is_file(), name
    assert list((out / "plots").glob("*.png"))
    meta = json.loads((out / "results.json").read_text())
    assert meta["judge"]["adapter"] == "vlicl-judge" and meta["artifacts"]["episodes.csv"]
    # text-to-image items were judged: the judge's answers are in the store under its own identity
    assert meta["counts"]["failed"] == 0 and meta["counts"]["planned"] == meta["counts"]["computed"]
    capsys.readouterr()
    assert main(args) == 0
    assert "0 items computed" in capsys.readouterr().out


def _oracle_accuracy(out):
    with open(out / "results.csv", newline="") as f:
        return {(r["task"], r["shots"]): float(r["value"]) for r in csv.DictReader(f)
                if r["model"] == "oracle" and r["metric"] == "accuracy"}


def test_the_oracle_scores_100_on_every_task_it_serves(tmp_path, capsys):
    """The oracle answers each image-to-text request with its ground truth (``oracle_answer``,
    given to privileged baselines only), written as a support answer is: through the real answer
    parser it scores 100 on every task it serves (it stopped on its first batch before)."""
    from icl.benchmarks.vlicl.tasks import I2T

    out = tmp_path / "out"
    assert main(["vlicl", "--fast", "--models", "oracle", "--out", str(out), "--data-root", str(tmp_path / "data"),
                 "--no-progress", "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "STOPPED" not in err and "oracle_answer" not in err, err
    acc = _oracle_accuracy(out)
    served = {t for t, spec in TASKS.items() if spec.direction == I2T}
    assert {t for t, _ in acc} == served and set(acc.values()) == {100.0}, acc
    meta = json.loads((out / "results.json").read_text())
    assert meta["counts"]["failed"] == 0 and meta["counts"]["computed"] > 0


def test_the_oracle_on_the_release_layout_scores_100_but_where_the_legacy_parse_cannot(release):
    """The same round trip on the published layout's records (their answer types as published):
    100 under the lenient parse; under the legacy parse (the reference code's first ``\\d+``) a
    negative operator result can never be right, and the oracle shows exactly those items."""
    from icl.benchmarks.vlicl import VLICL
    from icl.benchmarks.vlicl.tasks import FIRST_INTEGER, I2T
    from icl.models.builtin import Oracle

    bench = VLICL({"data_root": release, "seeds": (0,)})
    served = [i for i in bench.items() if TASKS[i.payload[0]].direction == I2T]
    answers = Oracle().predict([bench.request(i, privileged=True) for i in served])
    scores = [bench.score(i, a) for i, a in zip(served, answers)]
    assert {i.payload[0] for i in served} == {t for t, s in TASKS.items() if s.direction == I2T}
    assert all(s["correct_lenient"] == 1.0 for s in scores)
    for item, score in zip(served, scores):
        truth = bench.truth(item)
        negative = TASKS[item.payload[0]].scoring == FIRST_INTEGER and int(truth) < 0
        assert score["correct"] == (0.0 if negative else 1.0), (item.key, truth)
    assert any(TASKS[i.payload[0]].scoring == FIRST_INTEGER and int(bench.truth(i)) < 0 for i in served)
    assert all(bench.request(i).oracle_answer is None for i in served)  # never to an unprivileged model


def test_a_baseline_the_benchmark_cannot_serve_is_refused_up_front(tmp_path, capsys):
    """With the two-pass chain of thought the second request carries no ground truth: the oracle
    is refused before anything runs (one line, exit 2; --check lists it), never STOPPED mid-run."""
    out = tmp_path / "out"
    args = ["vlicl", "--fast", "--cot", "true", "--models", "oracle", "--out", str(out), "--data-root",
            str(tmp_path / "data"), "--no-progress", "--no-plots"]
    assert main(args) == 2
    err = capsys.readouterr().err
    (line,) = err.strip().splitlines()
    assert "model 'oracle' cannot run benchmark 'vlicl'" in line and "--cot" in line, err
    assert not (out / "store.sqlite").exists()  # nothing ran
    assert main([*args, "--check"]) == 2
    shown = capsys.readouterr().out
    assert "model 'oracle' cannot run benchmark 'vlicl'" in shown and "leave the model out of --models" in shown
    check = json.loads((out / "check.json").read_text())
    assert any("cannot run benchmark 'vlicl'" in p["message"] for p in check["problems"])
