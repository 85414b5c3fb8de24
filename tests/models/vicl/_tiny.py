"""Tiny randomly initialised configurations of the visual in-context models, written in each
model's official checkpoint format (the tests then load them through the adapters' real paths)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from icl.models.requests import AnalogyRequest

PAINTER = dict(img_size=[64, 32], patch_size=8, embed_dim=32, depth=5, num_heads=2, decoder_embed_dim=8,
               pretrain_img_size=32, merge_index=1, feature_indices=[1, 2, 3, 4])
VQGAN = dict(resolution=64, ch=8, ch_mult=[1, 1, 1, 1, 1], num_res_blocks=1, attn_resolutions=[4], z_channels=8,
             n_embed=16, embed_dim=4, norm_groups=4)
MAE = dict(img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, decoder_embed_dim=16, decoder_depth=1,
           decoder_num_heads=2, vqgan=VQGAN)
MUSE = dict(resolution=16, num_channels=3, hidden_channels=32, channel_mult=[1, 1, 1], num_res_blocks=1,
            attn_resolutions=[4], z_channels=32, num_embeddings=24, quantized_embed_dim=8)


def painter_checkpoint(folder: Path, seed: int = 0) -> Path:
    from icl.models.vicl.painter import PainterConfig, PainterNet

    net = PainterNet(PainterConfig.from_overrides(PAINTER))
    net.init_random(torch.Generator().manual_seed(seed))
    path = folder / "painter_vit_large.pth"
    torch.save({"model": net.state_dict()}, path)
    return path


def mae_checkpoint(folder: Path, seed: int = 0, with_vae: bool = True) -> Path:
    from icl.models.vicl.mae_vqgan import MAEVQGANConfig, MAEVQGANNet

    torch.manual_seed(seed)
    net = MAEVQGANNet(MAEVQGANConfig.from_overrides(MAE))
    state = net.state_dict()
    if not with_vae:
        vae = {k[4:]: v for k, v in state.items() if k.startswith("vae.")}
        # taming's Lightning checkpoint: {"state_dict": ...}, training-only loss.* tensors included
        torch.save({"state_dict": {**vae, "loss.discriminator.main.0.weight": torch.zeros(2)}}, folder / "last.ckpt")
        state = {k: v for k, v in state.items() if not k.startswith("vae.")}
    path = folder / "checkpoint-1000.pth"
    # as MAE's misc.save_model writes it: the training arguments ride along as a Namespace
    torch.save({"model": state, "epoch": 1000, "args": argparse.Namespace(model="mae_vit_large_patch16")}, path)
    return path


def lvm_folders(folder: Path, seed: int = 0, max_positions: int = 256) -> tuple[Path, Path]:
    """A LlamaForCausalLM folder (save_pretrained, safetensors) and an open-muse VQGAN folder."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from icl.models.vicl._vqgan import VQGAN, config_from_muse

    torch.manual_seed(seed)
    vq_dir = folder / "vqgan"
    vq_dir.mkdir(parents=True, exist_ok=True)
    (vq_dir / "config.json").write_text(json.dumps(MUSE))
    torch.save(VQGAN(config_from_muse(MUSE)).state_dict(), vq_dir / "pytorch_model.bin")
    llm = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=2,
                                       max_position_embeddings=max_positions))
    llm.save_pretrained(str(folder / "llm"))
    return folder / "llm", vq_dir


def image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def four_requests(seed: int = 0, shots: tuple[int, ...] = (1, 1, 1, 1)) -> list[AnalogyRequest]:
    """Four analogies with queries of two sizes (24 x 30 and 40 x 22)."""
    rng = np.random.default_rng(seed)
    sizes = [(24, 30), (40, 22), (24, 30), (40, 22)]
    return [AnalogyRequest("colorization", "d", f"q{i}", [image(rng, 20, 26) for _ in range(k)],
                           [image(rng, 20, 26) for _ in range(k)], image(rng, *s), s, seed=100 + i)
            for i, (s, k) in enumerate(zip(sizes, shots))]


def check_batch_contract(model, reqs: list[AnalogyRequest], atol: float) -> list[torch.Tensor]:
    """Shapes and dtypes of a batch of four; the batch equals four single calls within ``atol``
    and a second run is bit-identical (determinism)."""
    batch = model.predict(reqs)
    assert len(batch) == len(reqs)
    for out, req in zip(batch, reqs):
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
        assert tuple(out.shape) == (*req.query.shape[:2], 3)
        assert bool(torch.isfinite(out).all()) and float(out.min()) >= 0 and float(out.max()) <= 1
    for out, req in zip(batch, reqs):
        torch.testing.assert_close(out, model.predict([req])[0], atol=atol, rtol=0)
    for a, b in zip(batch, model.predict(reqs)):
        assert torch.equal(a, b)
    return batch
