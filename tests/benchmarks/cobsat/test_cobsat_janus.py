"""CoBSAT's image mode end to end with the tiny Janus of the generators issue
(tests/models/t2i/tiny_t2i.py ``build_janus``: ``JanusForConditionalGeneration`` with the
processor, chat template and special tokens as transformers'
``models/janus/convert_janus_weights_to_hf.py`` writes them), through ``python -m icl.run cobsat``:
the interleaved ``"{x}: "`` texts and demonstration images reach Janus' generation prompt in order
(deepseek-ai/Janus ``generation_inference.py``: one user turn, then the assistant tag), every
generation is stored at CoBSAT-lite's size and judged, and a second run computes nothing."""

import json
import sqlite3

import numpy as np
import pytest

from icl.benchmarks.cobsat.benchmark import CoBSAT
from icl.benchmarks.cobsat.vocab import display
from icl.models import get_model
from icl.run.execution import responses as R
from icl.run.__main__ import main

pytestmark = pytest.mark.slow  # ~8 s: six generations of 16 image tokens with classifier-free guidance


def test_janus_generates_cobsat_lite_end_to_end(tmp_path, tiny_janus, capsys):
    out = tmp_path / "out"
    args = ["cobsat", "--fast", "--models", f"janus:weights={tiny_janus}", "--tasks", "Color-I,Texture-II",
            "--shots", "0,2,8", "--prompts", "1", "--out", str(out), "--no-progress", "--no-plots"]
    assert main(args) == 0
    meta = json.loads((out / "results.json").read_text())
    assert meta["counts"]["planned"] == meta["counts"]["computed"] == 6 and meta["counts"]["failed"] == 0
    assert meta["judge"]["adapter"] == "cobsat-judge"
    acc = (out / "accuracy.csv").read_text().splitlines()
    assert len(acc) == 1 + 6 and all(",image,default,emu2,paired0,1,0," in row for row in acc[1:])
    with sqlite3.connect(out / "store.sqlite") as db:
        stored = db.execute("SELECT kind, body FROM responses WHERE status='ok'").fetchall()
    images = [R.stored(kind, body) for kind, body in stored if kind == "png"]
    assert len(images) == 6 and all(img.shape == (48, 48, 3) and img.dtype == np.uint8 for img in images)
    assert len(stored) == 6 + 6 * 2  # six generations, two judge answers each
    capsys.readouterr()
    assert main(args) == 0
    assert "0 items computed" in capsys.readouterr().out


def test_the_prompt_janus_sees_interleaves_texts_and_demonstrations(tiny_janus):
    bench = CoBSAT({"fast": True, "tasks": ("Color-I",), "shots": (2,), "prompts": 1})
    item = next(iter(bench.items()))
    req = bench.request(item)
    janus = get_model("janus", weights=str(tiny_janus))
    janus.load("cpu")
    text = janus.generation_text(req)
    words = [display(v) for v in item.payload.text_values]
    assert len(words) == 3
    assert text.startswith("<|User|>: ") and text.endswith("\n\n<|Assistant|>:")
    # two demonstrations, each "{x}: " then its image, then the query's "{x}:" last (Janus' chat
    # template puts each image on its own line and strips the turn's trailing space)
    assert text.count("<image_placeholder>") == 2 and len(req.images) == 2
    assert text == (f"<|User|>: {words[0]}: \n<image_placeholder>\n{words[1]}: \n<image_placeholder>\n"
                    f"{words[2]}:\n\n<|Assistant|>:")
    positions = [text.index(f"{w}:") for w in words]
    assert positions == sorted(positions)
    assert text.index("<image_placeholder>") > positions[0] and text.rindex("<image_placeholder>") < positions[-1]
