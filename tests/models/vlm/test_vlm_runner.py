"""hf-vlm through the one runner: best50's detection prompt and VL-ICL episodes, cached."""

import csv
import json

from icl.run.__main__ import main


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_hf_vlm_answers_best50_and_is_cached(tmp_path, tiny_folders, capsys):
    out = tmp_path / "b"
    model = f"hf-vlm:weights={tiny_folders['llava']},max_batch=4"
    args = ["best50", "--fast", "--models", model, "--ks", "1", "--limit", "3", "--max-new-tokens", "8",
            "--out", str(out), "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress"]
    assert main(args) == 0, capsys.readouterr().err
    per = _rows(out / "per_sample.csv")
    assert len(per) == 3  # random weights: no boxes, but every answer parsed and scored
    meta = json.loads((out / "results.json").read_text())
    (ident,) = [m["identity"] for m in meta["models"].values()]
    assert ident["adapter"] == "hf-vlm" and len(ident["weights"]) == 1 and ident["args"]["max_batch"] == 4
    capsys.readouterr()
    assert main(args) == 0
    assert "0 items computed" in capsys.readouterr().out


def test_prompt_over_the_context_is_recorded_as_overflow(tmp_path, tiny_folders, capsys):
    out = tmp_path / "v"
    model = f"hf-vlm:weights={tiny_folders['llava']},max_context=100"
    args = ["vlicl", "--fast", "--models", model, "--tasks", "operator_induction", "--seeds", "0",
            "--shots", "0,8", "--queries", "2", "--out", str(out), "--data-root", str(tmp_path / "data"),
            "--no-plots", "--no-progress"]
    code = main(args)
    assert code == 0, capsys.readouterr().err  # an overflow is a result (counted wrong), not a failure
    acc = {r["shots"]: r for r in _rows(out / "accuracy.csv")}
    assert float(acc["8"]["overflow"]) == 2 and float(acc["8"]["failed"]) == 0
    report = (out / "report.md").read_text()
    assert "Context overflow" in report and "*" in report
    (summ,) = _rows(out / "shot_summary.csv")
    assert summ["overflow_shots"] == "8" and summ["efficiency_over"] == "all"
    (rank,) = _rows(out / "ranks.csv")
    assert rank["overflow_shots"] == "operator_induction:8"
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert sum(p["overflow"] for p in preds) == 2 and len(preds) == 4
    # stored once: a second run sends nothing and exits 0; --efficiency fitting summarises the fitting shots
    capsys.readouterr()
    assert main(args + ["--efficiency", "fitting"]) == 0
    assert "0 items computed, 4 already in the store" in capsys.readouterr().out
    (summ,) = _rows(out / "shot_summary.csv")
    assert summ["shots"] == "0" and summ["efficiency_over"] == "fitting"
    # scored anew under another judge: the stored answers and overflows are reused, none re-sent
    capsys.readouterr()
    assert main(args + ["--judge", "copy-last"]) == 0
    printed = capsys.readouterr().out
    assert "4 items computed, 0 already in the store, 0 failed (4 answers reused from the store)" in printed


def test_concurrency_16_to_100_resends_nothing(tmp_path, llava, capsys):
    """Execution arguments stay out of the model identity: the stored answers are reused."""
    from vlm_chat_server import ChatServer

    with ChatServer(llava, lifetime_s=120) as srv:
        def run(extra: str) -> int:
            model = f"openai:model=tiny,base_url={srv.base_url},api_key_env=ICL_NO_KEY,{extra}"
            return main(["vlicl", "--fast", "--models", model, "--tasks", "clevr", "--seeds", "0", "--shots", "0,1",
                         "--queries", "3", "--out", str(tmp_path / "o"), "--data-root", str(tmp_path / "data"),
                         "--no-plots", "--no-progress"])

        assert run("concurrency=16") == 0
        sent = srv.received
        assert sent == 6
        capsys.readouterr()
        assert run("concurrency=100,timeout=30,max_retries=1,backoff=0.5,max_backoff=2,max_rps=50,batch_size=5") == 0
        assert srv.received == sent and "0 items computed, 6 already in the store" in capsys.readouterr().out
        assert run("concurrency=16,send_seed=false") == 0  # an argument that can change answers: asked again
        assert srv.received == 2 * sent


def test_reference_prompt_through_hf_vlm_raw(tmp_path, tiny_folders, capsys):
    """``--prompt-style reference`` (LLaVA's llava_v1 layout) on ``hf-vlm`` with
    ``chat_template=raw``: the model reads the reference's text, the prompt is in prompts.jsonl."""
    out = tmp_path / "r"
    model = f"hf-vlm:weights={tiny_folders['llava']},chat_template=raw"
    assert main(["vlicl", "--fast", "--models", model, "--tasks", "clevr", "--seeds", "0", "--shots", "0,1",
                 "--queries", "2", "--prompt-style", "reference", "--out", str(out),
                 "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress"]) == 0, capsys.readouterr().err
    prompts = [json.loads(line)["text"] for line in (out / "prompts.jsonl").read_text().splitlines()]
    assert len(prompts) == 4 and all(p.startswith("A chat between a curious human") and p.endswith("Answer: ASSISTANT:")
                                     for p in prompts)
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {p["key"].split("/")[3] for p in preds} == {"direct+reference:llava"}
    assert "prompt style reference (llava)" in (out / "report.md").read_text()


class _FirstAnswerBroken:
    """The model behind the chat server: its first answer holds a lone surrogate (as a byte-level
    tokenizer's broken UTF-8 can give), the others are plain."""

    def __init__(self) -> None:
        self.answered = 0

    def predict(self, requests):
        out = []
        for _ in requests:
            self.answered += 1
            out.append("3 \ud800 cubes" if self.answered == 1 else "3")
        return out


def test_lone_surrogate_answer_fails_that_item_only(tmp_path, capsys):
    """A server's legal ``"\\ud800"`` escape in one answer used to abort the whole run with a raw
    UnicodeEncodeError from the store write (and every rerun the same). It fails that item only: the
    run completes with every other answer kept, and a rerun asks that item alone again."""
    from vlm_chat_server import ChatServer

    out = tmp_path / "o"
    model = _FirstAnswerBroken()
    with ChatServer(model, lifetime_s=120) as srv:
        args = ["vlicl", "--fast", "--models", f"openai:model=tiny,base_url={srv.base_url},api_key_env=ICL_NO_KEY",
                "--tasks", "clevr", "--seeds", "0", "--shots", "0,1", "--queries", "3", "--out", str(out),
                "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress"]
        assert main(args) == 1  # some items failed: the run completed
        err = capsys.readouterr().err
        assert "Traceback" not in err and "not valid Unicode: a lone surrogate U+D800 at character 2" in err
        assert srv.received == 6
        samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
        assert sorted(s["status"] for s in samples) == ["failed"] + ["ok"] * 5
        (bad,) = [s for s in samples if s["status"] == "failed"]
        assert bad["reason"] == "invalid" and "lone surrogate U+D800" in bad["error"]
        acc = [r for r in _rows(out / "results.csv") if r["metric"] == "accuracy"]
        assert sum(int(r["n_failed"]) for r in acc) == 1  # the item's shot count, once
        # the rerun sends the failed item alone again; its new answer completes the run
        assert main(args) == 0, capsys.readouterr().err
        assert srv.received == 7 and "1 items computed, 5 already in the store" in capsys.readouterr().out
