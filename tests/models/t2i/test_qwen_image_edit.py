"""``qwen-image-edit`` on a tiny Qwen-Image-Edit-2509-layout folder (tiny_t2i.build_qwen_image_edit:
the component names and classes of huggingface/diffusers
src/diffusers/pipelines/qwenimage/pipeline_qwenimage_edit_plus.py ``QwenImageEditPlusPipeline.
__init__`` — scheduler, vae, text_encoder, tokenizer, processor, transformer — with the widths of
diffusers' tests/pipelines/qwenimage/test_qwenimage_edit_plus.py), loaded through
``QwenImageEditPlusPipeline.from_pretrained`` with the torchvision-free processor
(icl.models.t2i.qwen_processor), generating from two reference images through
``python -m icl.run vif``."""

import json
import sqlite3

import numpy as np
import pytest
from tiny_t2i import build_qwen_image_edit, qwen_tokenizer

from icl.run.__main__ import main


def test_processor_without_torchvision():
    """The pipeline's ``processor(text=..., images=...)`` call: each ``<|image_pad|>`` becomes
    one token per 2 x 2 merged 14-px patch (Qwen2VLProcessor.replace_image_token), pixel values
    and grid as Qwen2-VL's vision tower takes them."""
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.utils.import_utils import is_torchvision_available

    from icl.models.t2i.qwen_processor import QwenImageTextProcessor

    tok = qwen_tokenizer()
    proc = QwenImageTextProcessor(Qwen2VLImageProcessorPil(), tok)
    text = "Picture 1: <|vision_start|><|image_pad|><|vision_end|>Picture 2: <|vision_start|><|image_pad|><|vision_end|>"
    # sizes (w, h) already multiples of 28 and above the 56 x 56 minimum area: not resized
    images = [Image.new("RGB", (112, 56), (255, 0, 0)), Image.new("RGB", (56, 168), (0, 0, 255))]
    out = proc(text=[text], images=images, padding=True, return_tensors="pt")
    assert out["image_grid_thw"].tolist() == [[1, 4, 8], [1, 12, 4]]  # (t, h/14, w/14)
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    assert int((out["input_ids"] == pad).sum()) == (4 * 8 + 12 * 4) // 4
    assert tuple(out["pixel_values"].shape) == (32 + 48, 3 * 2 * 14 * 14)  # channels x temporal patch x 14 x 14
    if not is_torchvision_available():  # why this module exists (its docstring): stated, so a change is noticed
        from transformers import Qwen2VLProcessor

        with pytest.raises((AttributeError, TypeError, ValueError)):
            Qwen2VLProcessor(image_processor=Qwen2VLImageProcessorPil(), tokenizer=tok, video_processor=None)


@pytest.mark.slow
def test_generates_from_two_references_through_the_runner(tmp_path, capsys):
    folder = build_qwen_image_edit(tmp_path / "qwen-edit")
    assert json.loads((folder / "model_index.json").read_text())["processor"] == ["transformers", "Qwen2VLProcessor"]
    out = tmp_path / "run"
    args = ["vif", "--fast", "--models", f"qwen-image-edit:weights={folder},steps=2,height=32,width=32",
            "--variants", "visual", "--synthetic-tasks", "1", "--size", "32", "--out", str(out),
            "--data-root", str(tmp_path / "data"), "--no-plots", "--no-progress", "--judge", "vif-spatial-judge"]
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    meta = json.loads((out / "results.json").read_text())
    assert meta["counts"]["computed"] == 1 and meta["counts"]["failed"] == 0
    (line,) = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert line["request"]["images"] == 2 and line["status"] == "ok"  # one reference and one visual instruction
    g = line["generation"]
    assert g["steps"] == 2 and g["guidance"] == 4.0 and g["size"] == [32, 32] and g["output_size"] == [32, 32]
    import cv2

    image = cv2.imread(str(out / line["answer"]["png"]))
    assert image.shape == (32, 32, 3) and float(np.std(image)) > 0  # a real (random-weight) image, not a blank
    with sqlite3.connect(out / "store.sqlite") as c:
        (stored,) = c.execute("SELECT generation FROM responses WHERE generation IS NOT NULL").fetchall()
    assert json.loads(stored[0])["seed"] == g["seed"]
    assert "0 items computed" in (main(args), capsys.readouterr().out)[1]
