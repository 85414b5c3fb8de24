"""VisualCloze (Li et al. 2025, "VisualCloze: A Universal Image Generation Framework via
Visual In-Context Learning"), lzyhha/VisualCloze, as diffusers ships it
(``VisualClozePipeline``: FLUX.1-Fill-dev with the VisualCloze LoRA merged; the release
``VisualCloze/VisualClozePipeline-384`` is a ``save_pretrained`` folder: ``model_index.json``,
``transformer/``, ``vae/``, ``text_encoder/``, ``tokenizer/``, ``text_encoder_2/``,
``tokenizer_2/``, ``scheduler/``).

Grid, as the authors lay it out (README, ``examples/gradio_tasks*.py``): one row per context
pair ``[c_in_k, c_out_k]`` and a last row ``[query, None]``; each row's images are resized to
the area of ``resolution`` squared at the first image's aspect ratio (diffusers'
``VisualClozeProcessor``). Prompts: the layout prompt is the pipeline's; the task prompt
follows the authors' template (``data/prefix_instruction.py`` ``get_task_instruction``, the
variant the diffusers example uses) with ``[IMAGE1]``/``[IMAGE2]`` descriptions taken from
VisualCloze's own image-type prompts where a benchmark task has one (``TASK_IMAGES``; the
first entry of each list) and a neutral pair otherwise; no content prompt (the benchmark gives
images only). The authors' SDEdit upsampling stage (``upsampling_strength`` > 0) is not run:
the answer is resized to the query anyway; each request's noise comes from its own generator
seeded by ``derive_seed``. Requests whose grids have the same cell sizes are one batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Hashable, Optional, Sequence, Union

import torch
import torch.nn.functional as F

from icl.data.seeds import ANY, derive_seed
from icl.models.base import Architecture
from icl.models.memory import ActivationMemory, dit_values, read_config, t5_bytes, vae_channels, vae_scale, vae_values
from icl.models.requests import AnalogyRequest
from icl.models.vicl._load import load_pretrained, read_json
from icl.models.vicl._torch import TorchAdapter, checked_device, compiled
from icl.models.vicl.canvas import host_image
from icl.models.hub import DIFFUSERS_PATTERNS
from icl.models.weights import WeightsError, resolve_weights

TEMPLATE = "In each row, a logical task is demonstrated to achieve [IMAGE2] {target} based on [IMAGE1] {condition}."
PHOTO = "a high-quality image"  # VisualCloze's "target" image prompt, first entry
# benchmark task -> (condition, target) image descriptions, from VisualCloze's prefix_instruction.py
TASK_IMAGES = {
    "segmentation": (PHOTO, "sam 2 generated colorful segmentation masks"),
    "edges": (PHOTO, "canny edge map with sharp black-and-white contours"),
    "depth": (PHOTO, "depth map showing gray-scale object contours"),
    "denoising": ("an image with subtle Gaussian noise adding grain", PHOTO),
    "colorization": ("a grayscale image with varying shades of gray", PHOTO),
    "inpainting": ("an inpainted image seamlessly filling missing areas", PHOTO),
}
NEUTRAL = ("the input image", "the output image")  # icl's own, for tasks VisualCloze has no prompt for


def task_prompt(task: str) -> str:
    condition, target = TASK_IMAGES.get(task, NEUTRAL)
    return TEMPLATE.format(condition=condition, target=target)


def cell_size(h: int, w: int, resolution: int, divisible: int) -> tuple[int, int]:
    """The (h, w) a grid row takes: area ``resolution ** 2`` at the aspect ``w / h``, floored
    to multiples of ``divisible`` (as diffusers' ``VisualClozeProcessor.preprocess_image``)."""
    aspect = w / h
    new_h = int((resolution * resolution / aspect) ** 0.5)
    new_w = int(new_h * aspect)
    return max(new_h // divisible, 1) * divisible, max(new_w // divisible, 1) * divisible


class VisualCloze(TorchAdapter):
    """VisualCloze through diffusers' ``VisualClozePipeline`` (module docstring).

    K-shot: all K pairs, one grid row each, above the query row.
    Arguments: ``weights`` (the pipeline folder; default ``$ICL_WEIGHTS_DIR/visualcloze``),
    ``dtype``, ``compile`` (the transformer), ``steps`` 30 and ``guidance_scale`` 30 (the
    authors' example), ``resolution`` (default the folder's ``model_index.json``, else 384),
    ``prompt`` (a fixed task prompt instead of the per-task ones), ``max_sequence_length``
    512 (T5 tokens, the pipeline's default).
    """

    name = "visualcloze"
    version = "1"
    batch_size = 4
    shots_policy = "all K pairs as grid rows [c_in, c_out] above the query row [query, ?]"

    def __init__(self, weights: Optional[str] = None, dtype: Optional[str] = None, compile: Union[bool, str] = False,
                 steps: int = 30, guidance_scale: float = 30.0, resolution: Optional[int] = None,
                 prompt: Optional[str] = None, max_sequence_length: int = 512):
        super().__init__(weights, dtype, compile, None)
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"{self.name}: steps must be a positive integer, got {steps!r}")
        self.steps, self.guidance_scale = steps, float(guidance_scale)
        self.resolution_arg, self.prompt = resolution, prompt
        self.max_sequence_length = int(max_sequence_length)

    def model_files(self) -> Sequence[Path]:
        found = resolve_weights(self.name, self.weights, "model_index.json", DIFFUSERS_PATTERNS)
        return (found.parent if found.is_file() else found,)

    @staticmethod
    def networks() -> dict[str, Any]:
        """The pipeline's networks: subfolder -> the class it is loaded with."""
        from diffusers import AutoencoderKL, FluxTransformer2DModel
        from transformers import CLIPTextModel, T5EncoderModel

        return {"transformer": FluxTransformer2DModel, "vae": AutoencoderKL, "text_encoder": CLIPTextModel,
                "text_encoder_2": T5EncoderModel}

    def architectures(self) -> Sequence[Architecture]:
        folder = self.model_files()[0]
        return tuple(Architecture(folder / k, cls) for k, cls in self.networks().items())

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From the folder's ``transformer/``, ``vae/`` and ``text_encoder_2/config.json`` and
        ``model_index.json``'s ``resolution`` R (or the ``resolution`` argument), for a one-shot
        request (a grid of K + 1 = 2 rows of two R x R cells; K shots add ``2 (R / 2f)^2`` image
        tokens a row), ``f`` the VAE's scale, ``T`` = ``max_sequence_length`` text tokens:
        ``A = max(t5(T), b x dit(4 (R / 2f)^2 image + T text tokens), b x vae_enc(R x 2R row),
        b x vae_dec(R x R))``: the T5 encoder (:func:`icl.models.memory.t5_bytes`), the Flux
        transformer over the whole grid's 2 x 2 packed latent tokens and the text
        (:func:`icl.models.memory.dit_values`; guidance is distilled: one row), and the VAE
        encoding a grid row or decoding the answer's cell (:func:`icl.models.memory.vae_values`)."""
        try:
            folder = self.model_files()[0]
        except (OSError, ValueError):
            return None
        transformer = read_config(folder / "transformer" / "config.json")
        vae = read_config(folder / "vae" / "config.json")
        t5, index = read_config(folder / "text_encoder_2" / "config.json"), read_config(folder / "model_index.json")
        if transformer is None or vae is None or t5 is None:
            return None
        side = int(self.resolution_arg or (index or {}).get("resolution") or 384)
        cells, text = 2 * 2, self.max_sequence_length  # one shot: rows [c_in, c_out], [query, answer]
        image_tokens = cells * (side // (2 * vae_scale(vae))) ** 2
        dit, width = dit_values(transformer, image_tokens, text)
        vae_peak = max(vae_values(vae, side, 2 * side, encode_images=1, decode_images=0),
                       vae_values(vae, side, side, encode_images=0, decode_images=1))
        total = max(t5_bytes(t5, text, bytes_per_value), bytes_per_value * dit, bytes_per_value * vae_peak)
        return ActivationMemory(total, f"one-shot grid of 4 {side}px cells: {image_tokens} image + {text} text tokens, "
                                       f"width {width}; VAE {vae_channels(vae)}")

    def build(self) -> dict[str, Any]:  # type: ignore[override]  # the pipeline's parts: load() joins them
        """The pipeline's components with their weights, on the host at the model's dtype
        (strict loads; a missing tokenizer or scheduler file names the folder)."""
        from diffusers import FlowMatchEulerDiscreteScheduler
        # T5TokenizerFast: the class in transformers 4.x, an alias of T5Tokenizer in 5.x (absent from its stubs)
        from transformers import CLIPTokenizer, T5TokenizerFast  # type: ignore[attr-defined]

        folder = self.model_files()[0]
        parts: dict[str, Any] = {k: load_pretrained(cls, folder / k, f"VisualCloze {k}", dtype=self.torch_dtype).eval()
                                 for k, cls in self.networks().items()}
        try:
            parts["tokenizer"] = CLIPTokenizer.from_pretrained(str(folder / "tokenizer"), local_files_only=True)
            parts["tokenizer_2"] = T5TokenizerFast.from_pretrained(str(folder / "tokenizer_2"), local_files_only=True)
            parts["scheduler"] = FlowMatchEulerDiscreteScheduler.from_pretrained(str(folder / "scheduler"),
                                                                                local_files_only=True)
        except Exception as exc:  # missing or malformed tokenizer/scheduler files: name the folder
            raise WeightsError(f"{folder}: cannot read the tokenizers or scheduler ({type(exc).__name__}: {exc})") from exc
        return parts

    def load(self, device: str) -> None:
        from diffusers import VisualClozePipeline

        dev = checked_device(self.name, device, self.torch_dtype)
        index = read_json(self.model_files()[0] / "model_index.json")
        parts = self.build()
        for k in ("transformer", "vae", "text_encoder", "text_encoder_2"):
            parts[k] = parts[k].to(dev)
        parts["transformer"] = compiled(parts["transformer"], self.compile)
        self.resolution = int(self.resolution_arg or index.get("resolution") or 384)
        # diffusers sets the pipeline's parts and sub-pipelines at run time: untyped here
        pipe: Any = VisualClozePipeline(**parts, resolution=self.resolution)
        pipe.set_progress_bar_config(disable=True)
        self.divisible = 2 * pipe.generation_pipe.vae_scale_factor
        self.pipe = self.net = pipe
        self.device = str(dev)

    def group_key(self, req: AnalogyRequest) -> Hashable:
        """The cell sizes of a request's grid (rows of equal sizes stack into one batch)."""
        rows = [host_image(x).shape[:2] for x in req.context_inputs] + [host_image(req.query).shape[:2]]
        return tuple(cell_size(h, w, self.resolution, self.divisible) for h, w in rows)

    def prompt_for(self, req: AnalogyRequest) -> str:
        return self.prompt if self.prompt is not None else task_prompt(req.task)

    def run_group(self, requests: Sequence[AnalogyRequest]) -> list[torch.Tensor]:
        from PIL import Image

        grids = []
        for r in requests:
            rows = [[Image.fromarray(host_image(x)), Image.fromarray(host_image(y))]
                    for x, y in zip(r.context_inputs, r.context_outputs)]
            grids.append(rows + [[Image.fromarray(host_image(r.query)), None]])
        gens = [torch.Generator(device=self.device).manual_seed(
            derive_seed(r.seed, r.dataset, ANY, r.query_id, f"{self.name}/noise") & ((1 << 63) - 1)) for r in requests]
        result = self.pipe(task_prompt=[self.prompt_for(r) for r in requests], content_prompt=[None] * len(requests),
                           image=grids, num_inference_steps=self.steps, guidance_scale=self.guidance_scale,
                           generator=gens, upsampling_strength=0.0, output_type="pt",
                           max_sequence_length=self.max_sequence_length)
        out = []
        for img, r in zip(result.images, requests):
            h, w = r.query.shape[:2]
            img = F.interpolate(img.float().clamp(0, 1)[None], size=(h, w), mode="bilinear", align_corners=False)
            out.append(img[0].permute(1, 2, 0))
        return out
