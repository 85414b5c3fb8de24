"""VisualCloze: a tiny diffusers ``VisualClozePipeline`` folder (``save_pretrained``; the
components of diffusers' own tests) loads through the adapter (each component strictly) and
answers as the pipeline called the way the authors lay out a task (lzyhha/VisualCloze README
and ``examples/gradio_tasks.py``: rows ``[c_in, c_out]``, then ``[query, None]``; task prompt
from ``data/prefix_instruction.py``'s template)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from _official import visualcloze_folder
from _tiny import check_batch_contract, image
from icl.data.seeds import ANY, derive_seed
from icl.models import get_model
from icl.models.requests import AnalogyRequest
from icl.models.vicl.visualcloze import cell_size, task_prompt
from icl.models.weights import WeightsError


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return visualcloze_folder(tmp_path_factory.mktemp("vc") / "VisualClozePipeline-384")


def loaded(folder, **kw):
    model = get_model("visualcloze", weights=str(folder), steps=2, **kw)
    model.load("cpu")
    return model


def requests(seed=0, shots=(1, 2, 1, 1)):
    rng = np.random.default_rng(seed)
    return [AnalogyRequest("segmentation" if i % 2 else "flip", "d", f"q{i}", [image(rng, 40, 50) for _ in range(k)],
                           [image(rng, 30, 30) for _ in range(k)], image(rng, 44, 55), (44, 55), seed=7 + i)
            for i, k in enumerate(shots)]


def test_task_prompts_follow_the_authors_template():
    assert task_prompt("segmentation") == ("In each row, a logical task is demonstrated to achieve [IMAGE2] sam 2 "
                                           "generated colorful segmentation masks based on [IMAGE1] a high-quality image.")
    assert "[IMAGE1] the input image" in task_prompt("flip")
    assert cell_size(40, 50, 384, 16) == (336, 416)  # area 384^2 at 5:4, floored to 16


def test_matches_the_pipeline_called_directly(folder):
    from diffusers import VisualClozePipeline

    model = loaded(folder)
    req = requests()[1]
    got = model.predict([req])[0]
    pipe = VisualClozePipeline.from_pretrained(str(folder))
    pipe.set_progress_bar_config(disable=True)
    grid = [[Image.fromarray(x), Image.fromarray(y)] for x, y in zip(req.context_inputs, req.context_outputs)]
    grid.append([Image.fromarray(req.query), None])
    g = torch.Generator().manual_seed(derive_seed(req.seed, req.dataset, ANY, req.query_id, "visualcloze/noise")
                                      & ((1 << 63) - 1))
    ref = pipe(task_prompt=[task_prompt("segmentation")], content_prompt=[None], image=[grid], num_inference_steps=2,
               guidance_scale=30.0, generator=[g], upsampling_strength=0, output_type="pt").images[0]
    ref = F.interpolate(ref[None].float(), size=(44, 55), mode="bilinear", align_corners=False)[0].permute(1, 2, 0)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


def test_batch_contract(folder):
    check_batch_contract(loaded(folder), requests(), atol=1e-4)


def test_half_precision_and_missing_key(folder, tmp_path):
    half = loaded(folder, dtype="bf16")
    assert half.pipe.transformer.dtype == torch.bfloat16
    out = half.predict(requests(3)[:1])[0]
    assert out.shape == (44, 55, 3) and bool(torch.isfinite(out).all())
    import shutil

    from safetensors.torch import load_file, save_file

    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    path = broken / "transformer" / "diffusion_pytorch_model.safetensors"
    state = load_file(str(path))
    state.pop("proj_out.weight")
    save_file(state, str(path), metadata={"format": "pt"})
    with pytest.raises(WeightsError, match=r"broken/transformer.*missing \(proj_out.weight"):
        loaded(broken)
