"""SegGPT: a tiny ``SegGptForImageSegmentation`` (transformers' class, official key names)
saved with ``save_pretrained`` loads through the adapter and answers as the official
``SegGPT/SegGPT_inference/seggpt_engine.py`` (baaivision/Painter) computes: PIL bicubic images,
PIL nearest targets, ImageNet normalisation, feature ensemble for K prompts, the first row's
bottom half, nearest resize to the query."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from _tiny import check_batch_contract, four_requests, image
from icl.models import get_model
from icl.models.requests import AnalogyRequest
from icl.models.weights import WeightsError

TINY = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, image_size=[64, 32], patch_size=8,
            pretrain_image_size=16, decoder_hidden_size=8, merge_index=0, intermediate_hidden_state_indices=[1, 2, 3],
            drop_path_rate=0.0, mlp_dim=64)
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from transformers import SegGptConfig, SegGptForImageSegmentation

    torch.manual_seed(0)
    model = SegGptForImageSegmentation(SegGptConfig(**TINY))
    with torch.no_grad():  # larger random weights than the initialiser's, so answers differ by input
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.normal_(0, 0.2)
    path = tmp_path_factory.mktemp("seggpt") / "seggpt-vit-large"
    model.save_pretrained(str(path))
    return path


def official(folder, req: AnalogyRequest, embedding_type: str) -> np.ndarray:
    """seggpt_engine.inference_image on arrays (the model call through transformers)."""
    from transformers import SegGptForImageSegmentation

    model = SegGptForImageSegmentation.from_pretrained(str(folder)).eval()
    res = 32
    image = np.array(Image.fromarray(req.query).resize((res, res))) / 255.0
    imgs, tgts = [], []
    for x, y in zip(req.context_inputs, req.context_outputs):
        imgs.append((np.array(Image.fromarray(x).resize((res, res))) / 255.0 - MEAN) / STD)
        tgts.append((np.array(Image.fromarray(y).resize((res, res), Image.NEAREST)) / 255.0 - MEAN) / STD)
    q = np.stack([(image - MEAN) / STD] * len(imgs))
    t = lambda a: torch.tensor(np.stack(a) if isinstance(a, list) else a).permute(0, 3, 1, 2).float()  # noqa: E731
    with torch.no_grad():
        out = model(pixel_values=t(q), prompt_pixel_values=t(imgs), prompt_masks=t(tgts),
                    feature_ensemble=len(imgs) > 1, embedding_type=embedding_type).pred_masks
    y = out[0, :, res:].permute(1, 2, 0).numpy()
    y = np.clip((y * STD + MEAN) * 255, 0, 255)
    h, w = req.query.shape[:2]
    y = F.interpolate(torch.tensor(y)[None].permute(0, 3, 1, 2), size=[h, w], mode="nearest")
    return y[0].permute(1, 2, 0).numpy() / 255


@pytest.mark.parametrize("shots, task", [(1, "segmentation"), (3, "edges")])
def test_matches_the_official_pipeline(folder, shots, task):
    model = get_model("seggpt", weights=str(folder))
    model.load("cpu")
    rng = np.random.default_rng(shots)
    req = AnalogyRequest(task, "d", "q", [image(rng, 40, 50) for _ in range(shots)],
                         [image(rng, 40, 50) for _ in range(shots)], image(rng, 27, 35), (27, 35))
    got = model.predict([req])[0].numpy()
    ref = official(folder, req, "semantic" if task == "segmentation" else "instance")
    assert got.shape == (27, 35, 3)
    # PIL's 22-bit fixed-point resize vs icl's float64 one: inputs within 1 grey level
    assert np.abs(got - ref).max() < 0.03 and np.abs(got - ref).mean() < 0.005


def test_batch_contract_and_precisions(folder):
    model = get_model("seggpt", weights=str(folder))
    model.load("cpu")
    check_batch_contract(model, four_requests(shots=(1, 2, 1, 1)), atol=1e-4)
    half = get_model("seggpt", weights=str(folder), dtype="bf16")
    half.load("cpu")
    assert next(half.net.parameters()).dtype == torch.bfloat16
    check_batch_contract(half, four_requests(4)[:2], atol=5e-2)


def test_missing_key_and_bad_embedding_type_are_refused(folder, tmp_path):
    from safetensors.torch import load_file, save_file
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    state = load_file(str(broken / "model.safetensors"))
    state.pop("model.encoder.layers.3.mlp.lin2.weight")
    save_file(state, str(broken / "model.safetensors"), metadata={"format": "pt"})
    model = get_model("seggpt", weights=str(broken))
    with pytest.raises(WeightsError, match=r"broken.*missing \(model.encoder.layers.3.mlp.lin2.weight"):
        model.load("cpu")
    with pytest.raises(ValueError, match="embedding_type"):
        get_model("seggpt", embedding_type="panoptic")
