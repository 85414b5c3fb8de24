"""SegGPT (Wang et al. 2023, "SegGPT: Segmenting Everything In Context"), baaivision/Painter
``SegGPT/``, as transformers ships it (``SegGptForImageSegmentation``, checkpoint
``BAAI/seggpt-vit-large``: a ``save_pretrained`` folder with ``config.json`` and
``model.safetensors``).

Preprocessing as the official ``SegGPT/SegGPT_inference/seggpt_engine.py``
(``inference_image``): every image resized to 448 x 448 with PIL's bicubic, every prompt
target with PIL's nearest, both ImageNet-normalised; the prompt pair on top, the query below
(transformers concatenates them). K prompts are one batch of K with the feature ensemble on
(``feat_ensemble = 0 if len(x) > 1 else -1``: transformers' ``feature_ensemble=True``), and
the answer is the first row's bottom half, un-normalised, clipped to [0, 1] and resized to the
query's size with nearest neighbour (``F.interpolate(mode='nearest')``). Requests of one shot
are stacked into one batch; K-shot requests run one per batch, because the ensemble averages
over the whole batch. ``embedding_type``: ``instance`` (the official CLI's default),
``semantic``, or ``auto`` (default: ``semantic`` for segmentation, whose colours name classes
(PROTOCOL §1.2), else ``instance``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Hashable, Optional, Sequence, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icl.models.base import Architecture
from icl.models.memory import ActivationMemory, block_values, first_int, read_config
from icl.models.requests import AnalogyRequest
from icl.models.vicl._load import load_pretrained
from icl.models.vicl._torch import IMAGENET_MEAN, IMAGENET_STD, TorchAdapter, to_device_tensor
from icl.models.vicl.canvas import host_image, resize_pil
from icl.models.weights import resolve_weights

EMBEDDING_TYPES = ("auto", "instance", "semantic")


def resize_nearest_pil(image: Any, size: tuple[int, int]) -> np.ndarray:
    """PIL's ``Image.resize(..., NEAREST)``: source pixel ``floor((i + 0.5) * in / out)``."""
    im = host_image(image)
    h, w = size
    rows = np.minimum(((np.arange(h) + 0.5) * im.shape[0] / h).astype(np.int64), im.shape[0] - 1)
    cols = np.minimum(((np.arange(w) + 0.5) * im.shape[1] / w).astype(np.int64), im.shape[1] - 1)
    return np.ascontiguousarray(im[rows][:, cols])


class SegGPT(TorchAdapter):
    """SegGPT through transformers (module docstring).

    K-shot: all K pairs, as a batch of K prompts with SegGPT's feature ensemble.
    Weights: ``weights`` is the transformers folder (default ``$ICL_WEIGHTS_DIR/seggpt``).
    """

    name = "seggpt"
    version = "1"
    batch_size = 8
    shots_policy = "all K pairs as K prompts of one batch, merged by SegGPT's feature ensemble"

    def __init__(self, weights: Optional[str] = None, dtype: Optional[str] = None, compile: Union[bool, str] = False,
                 embedding_type: str = "auto"):
        super().__init__(weights, dtype, compile, None)
        if embedding_type not in EMBEDDING_TYPES:
            raise ValueError(f"{self.name}: embedding_type must be one of {', '.join(EMBEDDING_TYPES)}, "
                             f"got {embedding_type!r}")
        self.embedding_type = embedding_type

    def model_files(self) -> Sequence[Path]:
        found = resolve_weights(self.name, self.weights, "config.json")
        return (found.parent if found.is_file() else found,)

    def architectures(self) -> Sequence[Architecture]:
        from transformers import SegGptForImageSegmentation

        return (Architecture(self.model_files()[0], SegGptForImageSegmentation),)

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From the folder's ``config.json`` (``SegGptConfig``: ``image_size`` H x W,
        ``patch_size`` p, ``hidden_size`` d, ``mlp_dim``, ``num_attention_heads`` h,
        ``decoder_hidden_size`` c, ``intermediate_hidden_state_indices`` F; transformers'
        defaults for what it leaves out), per prompt (a K-shot request runs alone as K prompts)
        with ``N = (H / p)(W / p)``:
        ``A = b x (6 H W + F N d + max(2 x (block(N) + 3 h N^2), 5 c H W))``: the images, the kept
        features, and the larger of the encoder's two streams before the merge (transformers'
        ``SegGptAttention`` builds its scores itself: the scores, the scores plus the relative
        position bias and their softmax, ``3 x h x N x N``) and the decoder head (Painter's:
        ``c`` channels at every pixel, five times)."""
        try:
            config = read_config(self.model_files()[0] / "config.json")
        except (OSError, ValueError):
            return None
        if config is None:
            return None
        size = config.get("image_size", [896, 448])
        height, width = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
        p = first_int(config, "patch_size") or 16
        d = first_int(config, "hidden_size") or 1024
        heads = first_int(config, "num_attention_heads") or 16
        c = first_int(config, "decoder_hidden_size") or 64
        kept = len(config.get("intermediate_hidden_state_indices") or (5, 11, 17, 23))
        tokens = (height // p) * (width // p)
        encoder = 2 * block_values(tokens, d, first_int(config, "mlp_dim") or 4 * d, heads, score_copies=3)
        values = 6 * height * width + kept * tokens * d + max(encoder, 5 * c * height * width)
        return ActivationMemory(bytes_per_value * values,
                                f"seggpt {height}x{width} canvas, N={tokens} tokens, d={d}, {heads} heads "
                                f"(eager attention scores), decoder c={c}; per prompt")

    def build(self) -> nn.Module:
        from transformers import SegGptForImageSegmentation

        # read at the run's dtype (load()'s cast is then a no-op)
        return load_pretrained(SegGptForImageSegmentation, self.model_files()[0], "SegGPT", dtype=self.torch_dtype)

    def load(self, device: str) -> None:
        super().load(device)
        size = self.net.config.image_size  # (h, w), or one side of the square
        self.side = int(size[1] if isinstance(size, (list, tuple)) else size // 2)

    def kind(self, req: AnalogyRequest) -> str:
        if self.embedding_type != "auto":
            return self.embedding_type
        return "semantic" if req.task == "segmentation" else "instance"

    def group_key(self, req: AnalogyRequest) -> Hashable:
        # the ensemble averages over the batch: K-shot requests go alone (one key each)
        return (self.kind(req), 1) if req.shots == 1 else (self.kind(req), req.shots, id(req))

    def run_group(self, requests: Sequence[AnalogyRequest]) -> list[torch.Tensor]:
        dev, dt, s = torch.device(self.device), self.torch_dtype, self.side
        mean = torch.tensor(IMAGENET_MEAN, device=dev, dtype=torch.float32)[None, :, None, None]
        std = torch.tensor(IMAGENET_STD, device=dev, dtype=torch.float32)[None, :, None, None]
        queries, prompts, masks = [], [], []
        for req in requests:
            q = resize_pil(req.query, (s, s))
            for x, y in zip(req.context_inputs, req.context_outputs):
                queries.append(q)
                prompts.append(resize_pil(x, (s, s)))
                masks.append(resize_nearest_pil(y, (s, s)))

        def norm(images: list[np.ndarray]) -> torch.Tensor:
            return ((to_device_tensor(images, dev, torch.float32) - mean) / std).to(dt)

        ensemble = requests[0].shots > 1
        out = self.net(pixel_values=norm(queries), prompt_pixel_values=norm(prompts), prompt_masks=norm(masks),
                       feature_ensemble=ensemble, embedding_type=self.kind(requests[0]))
        pred = out.pred_masks[:, :, out.pred_masks.shape[2] // 2:].float() * std + mean
        answers = []
        for i, req in enumerate(requests):
            row = pred[i * req.shots].clamp(0, 1)  # the ensemble makes every row of a K-shot batch alike
            h, w = req.query.shape[:2]
            answers.append(F.interpolate(row[None], size=(h, w), mode="nearest")[0].permute(1, 2, 0))
        return answers
