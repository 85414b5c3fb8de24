"""Diffusers pipelines behind :class:`~icl.models.requests.GenerationRequest`.

- ``diffusers-t2i``: any local folder ``diffusers.AutoPipelineForText2Image`` loads (Stable
  Diffusion 1.5/2, SDXL, SD3, FLUX.1, ...). Text only: a request holding images is refused in
  its slot with a sentence (run the benchmark's text-only variant).
- ``flux-kontext``: ``FluxKontextPipeline`` (FLUX.1 Kontext [dev]); the request's one image is
  the image to edit (``image=``), as black-forest-labs/flux ``docs/image-editing.md`` and the
  pipeline's docstring use it. It generates at the asked size, the model's ``height`` /
  ``width`` where given, else the request's (``height``, ``width`` and ``max_area = height *
  width`` passed together: the pipeline would otherwise rescale to 1024 x 1024), unless a
  ``call_args`` ``max_area`` says otherwise.
- ``qwen-image-edit``: ``QwenImageEditPlusPipeline`` (Qwen-Image-Edit-2509/2511); the request's
  images go as one list, in prompt order (``image=[img1, img2, ...]``), as the pipeline's
  docstring and QwenLM/Qwen-Image ``README.md`` (Qwen-Image-Edit-2509 usage) pass them; its
  ``processor`` is built without torchvision (:mod:`icl.models.t2i.qwen_processor`).

Settings: ``steps`` and ``guidance`` (None: the default of the loaded pipeline class's
``__call__``: 50 / 7.5 for Stable Diffusion, 50 / 5.0 for SDXL, 28 / 7.0 for SD3, 28 / 3.5 for
FLUX.1 and Kontext, 50 / ``true_cfg_scale`` 4.0 for Qwen-Image-Edit-Plus), ``height`` /
``width`` (None: the pipeline's default resolution); the image is then resized to
``request.size``. ``call_args`` (a dict, JSON on the command line) passes further arguments of
the pipeline's ``__call__`` (e.g. ``negative_prompt``, ``max_sequence_length``, Kontext's
``max_area``); ``qwen-image-edit`` sends ``negative_prompt=" "`` unless told otherwise, as
QwenLM/Qwen-Image ``README.md`` does (without one its ``true_cfg_scale`` guidance is off).
Each request draws its noise from its own CPU ``torch.Generator`` seeded with ``request.seed``,
so an image does not depend on its batch neighbours or order beyond float rounding (tests state
the tolerance per precision). ``cpu_offload`` (CUDA only) calls
``enable_model_cpu_offload``: it moves weights, never changes a number, and stays out of the
model's identity.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import Any, ClassVar, Optional, Sequence, Union

import numpy as np

from icl._parse import parse_bool
from icl.models.base import PRECISIONS, Adapter
from icl.models.memory import (ActivationMemory, dit_values, first_int, lm_config_values, read_config, t5_bytes,
                               unet_values, vae_channels, vae_scale, vae_values)
from icl.models.requests import GenerationRequest
from icl.models.t2i.common import (PretrainedFolder, Recorder, RequestRefused, check_generation, chunks,
                                   cpu_generator, prompt_text, refuse_images, seed_of, to_size, torch_dtype)
from icl.models.hub import DIFFUSERS_PATTERNS
from icl.models.weights import WeightsError, pipeline_architectures

log = logging.getLogger("icl.models.t2i")
# the text tokens a pipeline's __call__ pads to by default (max_sequence_length), by model_index.json's _class_name
_TEXT_TOKENS = {"Flux": 512, "StableDiffusion3": 256 + 77, "QwenImage": 512}
_OWN_CALL_CFG = ("Flux", "QwenImage")  # pipelines whose guidance is distilled or runs the negative prompt apart


class DiffusersGenerator(PretrainedFolder, Adapter):
    """One diffusers pipeline folder behind GenerationRequest (subclasses pick the pipeline).

    Model arguments: ``weights`` (the ``from_pretrained`` folder holding ``model_index.json``;
    else ``$ICL_WEIGHTS_DIR/<name>/``), ``precision`` (fp32, fp16, bf16), ``steps``,
    ``guidance``, ``height``, ``width`` (None: the pipeline class's defaults), ``call_args``
    (further ``__call__`` arguments; a dict, or a JSON object from the command line),
    ``cpu_offload`` (execution only), ``batch_size`` (requests per pipeline call).
    """

    serves = (GenerationRequest,)
    version = "1"
    folder_marker = "model_index.json"
    hub_patterns = DIFFUSERS_PATTERNS
    execution_args = frozenset({"cpu_offload"})
    pipeline_class: ClassVar[str] = "AutoPipelineForText2Image"
    guidance_arg: ClassVar[str] = "guidance_scale"
    max_images: ClassVar[Optional[int]] = 0  # images one request may carry (0: text only; None: any)
    min_images: ClassVar[int] = 0
    most_per_call: ClassVar[Optional[int]] = None  # the pipeline's own batch limit
    default_call_args: ClassVar[dict[str, Any]] = {}
    # the side of the square a reference image is encoded at (None: the generated image's size)
    reference_side: ClassVar[Optional[int]] = None
    _owned = ("prompt", "generator", "output_type", "num_inference_steps", "height", "width", "image")

    def __init__(self, weights: Optional[str] = None, precision: str = "fp32", steps: Optional[int] = None,
                 guidance: Optional[float] = None, height: Optional[int] = None, width: Optional[int] = None,
                 call_args: Optional[Union[dict[str, Any], str]] = None, cpu_offload: Union[bool, str] = False,
                 batch_size: int = 4):
        if precision not in PRECISIONS:
            raise ValueError(f"{self.name}: precision must be one of {PRECISIONS}, got {precision!r}")
        if steps is not None and (not isinstance(steps, int) or steps < 1):
            raise ValueError(f"{self.name}: steps must be a positive int or None, got {steps!r}")
        if guidance is not None and (not isinstance(guidance, (int, float)) or guidance < 0):
            raise ValueError(f"{self.name}: guidance must be a number >= 0 or None, got {guidance!r}")
        for arg, px in (("height", height), ("width", width)):
            if px is not None and (not isinstance(px, int) or px < 8):
                raise ValueError(f"{self.name}: {arg} must be an int >= 8 or None, got {px!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"{self.name}: batch_size must be a positive int, got {batch_size!r}")
        self.weights, self.precision, self.steps, self.guidance = weights, precision, steps, guidance
        if isinstance(call_args, str):  # from the command line: a JSON object
            try:
                call_args = json.loads(call_args)
            except ValueError as exc:
                raise ValueError(f"{self.name}: call_args must be a JSON object, got {call_args!r} ({exc})") from None
        if call_args is not None and not isinstance(call_args, dict):
            raise ValueError(f"{self.name}: call_args must be a dict of pipeline arguments, got {call_args!r}")
        owned = sorted(set(call_args or {}) & set(self._owned + (self.guidance_arg,)))
        if owned:
            raise ValueError(f"{self.name}: call_args {owned} are set by the adapter (use its own arguments)")
        self.height, self.width, self.batch_size = height, width, batch_size
        self.call_args = {**self.default_call_args, **(call_args or {})}
        self.cpu_offload = parse_bool(cpu_offload, "model argument cpu_offload")
        self.pipe: Any = None
        self.recorder = Recorder()

    @property
    def records(self) -> list:
        return self.recorder.records

    def check_folder(self, folder: Any) -> None:
        """The folder's ``model_index.json`` names this adapter's pipeline class (``Auto*``
        loaders take any); a WeightsError naming the folder and both classes otherwise."""
        if self.pipeline_class.startswith("Auto"):
            return
        try:
            found = json.loads((folder / "model_index.json").read_text(encoding="utf-8")).get("_class_name")
        except (OSError, ValueError, AttributeError) as exc:
            raise WeightsError(f"{self.name}: {folder}/model_index.json cannot be read ({type(exc).__name__}: "
                               f"{exc}); expected a {self.pipeline_class} folder") from None
        if found != self.pipeline_class:
            raise WeightsError(f"{self.name}: {folder} holds a {found or 'unnamed'} pipeline (model_index.json "
                               f"_class_name); {self.name} loads a {self.pipeline_class} folder "
                               "(docs/generators.md lists the official folders)")

    def check_loadable(self) -> None:
        self.check_folder(self.folder)

    def architectures(self) -> Sequence[Any]:
        return pipeline_architectures(self.folder)

    def load(self, device: str) -> None:
        import diffusers

        folder = self.folder
        self.device = device
        self.check_folder(folder)
        loader = getattr(diffusers, self.pipeline_class)
        try:
            pipe = loader.from_pretrained(folder, dtype=torch_dtype(self.precision), local_files_only=True,
                                          **self.components(folder))
        except (OSError, ValueError, KeyError) as exc:
            raise WeightsError(f"{self.name}: {folder}: {self.pipeline_class} cannot load this folder "
                               f"({type(exc).__name__}: {exc}); docs/generators.md lists the official folders") from exc
        if self.cpu_offload and device.startswith("cuda"):
            pipe.enable_model_cpu_offload(device=device)
        else:
            if self.cpu_offload:
                log.warning("%s: cpu_offload needs a CUDA device; running whole on %s", self.name, device)
            pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        defaults = inspect.signature(type(pipe).__call__).parameters
        unknown = sorted(set(self.call_args) - set(defaults))
        if unknown:
            raise ValueError(f"{self.name}: {type(pipe).__name__} takes no argument(s) {unknown} (call_args)")
        self.steps_used = self.steps if self.steps is not None else defaults["num_inference_steps"].default
        self.guidance_used = self.guidance if self.guidance is not None else defaults[self.guidance_arg].default
        self.pipe = pipe

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From the folder's ``model_index.json`` (``_class_name``) and its parts'
        ``config.json``, for an image of H x W (``height`` / ``width``, else the denoiser's
        ``sample_size`` x the VAE's scale f, else 1024) and ``r`` denoiser rows per request
        (classifier-free guidance batched with the prompt: 2; FLUX.1 and Qwen-Image, whose
        guidance is distilled or runs the negative prompt as a transformer call of its own: 1):

        - a UNet (Stable Diffusion 1.x/2.x, SDXL): ``A = b x max(unet(H/f x W/f, r), vae_dec(H x W))``
          (:func:`icl.models.memory.unet_values`, :func:`~icl.models.memory.vae_values`; the CLIP
          text encoders' 77 tokens are far below either);
        - an MM-DiT (FLUX.1, Kontext, SD3, Qwen-Image): ``A = max(text, b x r x dit(tokens),
          b x vae)``: the text encoder (T5: :func:`icl.models.memory.t5_bytes`; Qwen2.5-VL: its
          key/value cache and every layer's hidden state, which the pipeline asks for), the
          transformer over the ``H/2f x W/2f`` packed latent tokens, those of the reference
          images (:attr:`reference_side`; one reference assumed, each further one adds its
          tokens) and ``max_sequence_length`` text tokens (``call_args``, else the pipeline's
          default), and the VAE encoding a reference or decoding the answer."""
        try:
            folder = self.folder
        except (OSError, ValueError):  # weights not resolvable here: the check reports that itself
            return None
        index, vae = read_config(folder / "model_index.json"), read_config(folder / "vae" / "config.json")
        unet = read_config(folder / "unet" / "config.json")
        denoiser = unet or read_config(folder / "transformer" / "config.json")  # a UNet or an MM-DiT
        if index is None or vae is None or denoiser is None:
            return None
        kind, scale = str(index.get("_class_name", "")), vae_scale(vae)
        default = (first_int(denoiser, "sample_size") or 1024 // scale) * scale
        height, width = self.height or default, self.width or default
        guided = self.guidance is None or self.guidance > 1  # every pipeline's default guidance is above 1
        vae_peak = vae_values(vae, height, width, encode_images=0, decode_images=1)
        if unet is not None:
            rows = 2 if guided else 1
            values = max(unet_values(unet, height // scale, width // scale, rows), vae_peak)
            return ActivationMemory(bytes_per_value * values, f"{kind} {height}x{width}, {rows} UNet rows, VAE "
                                                              f"{vae_channels(vae)}")
        # FLUX.1 and Qwen-Image run a negative prompt (true CFG) as a transformer call of its own
        rows = 2 if guided and not kind.startswith(_OWN_CALL_CFG) else 1
        text = int(self.call_args.get("max_sequence_length")
                   or next((n for p, n in _TEXT_TOKENS.items() if kind.startswith(p)), 512))
        tokens = (height // (2 * scale)) * (width // (2 * scale))
        reference = self.reference_side
        if kind.startswith("FluxKontext") and self.call_args.get("_auto_resize") is False:
            reference = None  # the reference keeps its own size: the generated one's assumed
        if self.max_images != 0:
            ref_h, ref_w = (height, width) if reference is None else (reference, reference)
            tokens += (ref_h // (2 * scale)) * (ref_w // (2 * scale))
            vae_peak = max(vae_peak, vae_values(vae, ref_h, ref_w, encode_images=1, decode_images=0))
        dit, dit_width = dit_values(denoiser, tokens, text)
        return ActivationMemory(max(self._text_encoder_bytes(folder, text, bytes_per_value),
                                    bytes_per_value * rows * dit, bytes_per_value * vae_peak),
                                f"{kind} {height}x{width}: {tokens} image + {text} text tokens, width {dit_width}, "
                                f"{rows} row(s); VAE {vae_channels(vae)}")

    def _text_encoder_bytes(self, folder: Any, tokens: int, bytes_per_value: int) -> int:
        """The text encoder's peak over ``tokens``: T5 (``text_encoder_2`` of FLUX.1,
        ``text_encoder_3`` of SD3) or a Qwen2.5-VL ``text_encoder`` (its key/value cache, one
        layer's working set and every layer's hidden state: ``output_hidden_states=True``)."""
        for part in ("text_encoder_3", "text_encoder_2"):
            t5 = read_config(folder / part / "config.json")
            if t5 is not None and "d_ff" in t5:
                return t5_bytes(t5, tokens, bytes_per_value)
        config = read_config(folder / "text_encoder" / "config.json") or {}
        text = config.get("text_config", config)
        counted = lm_config_values(text, tokens) if isinstance(text, dict) else None
        if counted is None:
            return 0
        hidden, layers = first_int(text, "hidden_size") or 0, first_int(text, "num_hidden_layers") or 0
        return bytes_per_value * (counted[0] + (layers + 1) * tokens * hidden)

    def components(self, folder: Any) -> dict[str, Any]:
        """Parts built here rather than by ``from_pretrained`` (none by default)."""
        return {}

    def would_refuse(self, request: Any) -> Optional[str]:
        """Why this pipeline cannot take ``request`` (None when it can): the number of images it
        holds against ``min_images`` / ``max_images`` (the one rule of ``predict`` and ``--check``)."""
        if not isinstance(request, GenerationRequest):
            return f"{self.name}: serves GenerationRequest, got {type(request).__name__}"
        if self.max_images == 0:
            return refuse_images(request, self.name)
        n = len(request.images)
        if n < self.min_images or (self.max_images is not None and n > self.max_images):
            if self.max_images == self.min_images:
                takes = f"exactly {self.min_images}"
            else:
                most = "any number" if self.max_images is None else f"at most {self.max_images}"
                takes = f"at least {self.min_images} and {most}"
            return f"{self.name}: request {request.id!r} holds {n} image(s); this pipeline takes {takes}"
        return None

    def image_kwargs(self, batch: Sequence[GenerationRequest]) -> dict[str, Any]:
        """Pipeline arguments carrying the batch's input images (none for text-to-image)."""
        return {}

    def size_kwargs(self, size: Optional[tuple[int, int]]) -> dict[str, Any]:
        """``height`` / ``width`` of a pipeline call for requests of ``size``: the model's own
        arguments when given (the image is then resized to ``size``), else none (the pipeline's
        default resolution)."""
        out: dict[str, Any] = {}
        if self.height is not None:
            out["height"] = self.height
        if self.width is not None:
            out["width"] = self.width
        return out

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        if self.pipe is None:
            raise RuntimeError(f"{self.name}: call load(device) before predict")
        checked = [check_generation(r, self.name) for r in requests]
        out: list[Any] = [None if why is None else RequestRefused(why) for why in map(self.would_refuse, checked)]
        live = [i for i, o in enumerate(out) if o is None]
        groups: dict[Any, list[int]] = {}  # one pipeline call takes one size
        for i in live:
            groups.setdefault(tuple(sorted(self.size_kwargs(checked[i].size).items())), []).append(i)
        for group in groups.values():
            for part in chunks(group, min(self.batch_size, self.most_per_call or self.batch_size)):
                for i, image in zip(part, self._generate([checked[i] for i in part])):
                    out[i] = image
        return out

    def _generate(self, batch: list[GenerationRequest]) -> list[np.ndarray]:
        import torch

        seeds = [seed_of(r) for r in batch]
        kwargs: dict[str, Any] = {**self.call_args, "num_inference_steps": self.steps_used,
                                  self.guidance_arg: self.guidance_used, **self.size_kwargs(batch[0].size)}
        with self.recorder.batch(self.device) as done, torch.inference_mode():
            result = self.pipe(prompt=[prompt_text(r) for r in batch], generator=[cpu_generator(s) for s in seeds],
                               output_type="np", **self.image_kwargs(batch), **kwargs)
            images = []
            for r, seed, image in zip(batch, seeds, np.asarray(result.images)):
                images.append(to_size(image, r.size))
                done(r, seed, self.steps_used, image.shape[:2], images[-1].shape[:2],
                     None if self.guidance_used is None else float(self.guidance_used))
        return images


class DiffusersText2Image(DiffusersGenerator):
    """``diffusers-t2i``: ``AutoPipelineForText2Image`` (see the module docstring)."""

    name = "diffusers-t2i"


def _rgb_pil(image: np.ndarray) -> Any:
    from PIL import Image

    return Image.fromarray(np.ascontiguousarray(image), "RGB")


class FluxKontext(DiffusersGenerator):
    """``flux-kontext``: ``FluxKontextPipeline``, one reference image per request (the image to
    edit), the request's text as the instruction."""

    name = "flux-kontext"
    pipeline_class = "FluxKontextPipeline"
    max_images = 1
    min_images = 1

    # the reference is resized to one of PREFERRED_KONTEXT_RESOLUTIONS (672 x 1568 ... 1568 x 672,
    # about 1024 x 1024 in area; diffusers pipelines/flux/pipeline_flux_kontext.py, ``_auto_resize``)
    reference_side = 1024

    def size_kwargs(self, size: Optional[tuple[int, int]]) -> dict[str, Any]:
        """Generate at the asked size: the model's ``height`` / ``width`` arguments where given,
        else the request's size. ``FluxKontextPipeline.__call__`` rescales any ``height`` x
        ``width`` to its ``max_area`` (1024 x 1024 by default) at the same aspect, then rounds each
        side down to a multiple of ``2 * vae_scale_factor`` (16 for FLUX.1 Kontext): so ``height``,
        ``width`` and ``max_area = height * width`` are passed together, each side rounded down
        to that multiple here (logged when that changes it; the image is then resized to the
        request's size). A ``max_area`` in ``call_args`` is passed as given instead."""
        h = self.height if self.height is not None else (None if size is None else int(size[0]))
        w = self.width if self.width is not None else (None if size is None else int(size[1]))
        if h is None or w is None:  # one side unknown: the pipeline's default resolution decides
            return super().size_kwargs(size)
        m = 2 * int(getattr(self.pipe, "vae_scale_factor", 8))
        rh, rw = max(m, h // m * m), max(m, w // m * m)
        rounded = self.__dict__.setdefault("_rounded", set())  # sizes already logged
        if (rh, rw) != (h, w) and (h, w) not in rounded:
            rounded.add((h, w))
            resized = "" if size is None else f" and resized to {size[0]}x{size[1]}"
            log.warning("%s: %dx%d is generated at %dx%d (FluxKontextPipeline needs sides that are multiples of %d)%s",
                        self.name, h, w, rh, rw, m, resized)
        out: dict[str, Any] = {"height": rh, "width": rw}
        if "max_area" not in self.call_args:
            out["max_area"] = rh * rw
        return out

    def image_kwargs(self, batch: Sequence[GenerationRequest]) -> dict[str, Any]:
        return {"image": [_rgb_pil(r.images[0]) for r in batch]}


class QwenImageEdit(DiffusersGenerator):
    """``qwen-image-edit``: ``QwenImageEditPlusPipeline``, one to several reference images per
    request in prompt order; ``guidance`` is its ``true_cfg_scale`` (real classifier-free
    guidance; the pipeline's ``guidance_scale`` only feeds guidance-distilled transformers)."""

    name = "qwen-image-edit"
    pipeline_class = "QwenImageEditPlusPipeline"
    guidance_arg = "true_cfg_scale"
    max_images = None  # neither the pipeline nor QwenLM/Qwen-Image's README sets a limit
    min_images = 1
    most_per_call = 1  # the pipeline refuses a batch of prompts
    # each reference goes to the VAE at an area of 1024 x 1024 (VAE_IMAGE_SIZE, diffusers
    # pipelines/qwenimage/pipeline_qwenimage_edit_plus.py)
    reference_side = 1024
    default_call_args = {"negative_prompt": " "}

    def components(self, folder: Any) -> dict[str, Any]:
        from icl.models.t2i.qwen_processor import load_processor

        if not (folder / "processor").is_dir():
            raise WeightsError(f"{self.name}: {folder} has no processor/ folder; {self.name} loads a "
                               f"{self.pipeline_class} folder (docs/generators.md lists the official folders)")
        return {"processor": load_processor(folder / "processor")}  # no torchvision (qwen_processor)

    def image_kwargs(self, batch: Sequence[GenerationRequest]) -> dict[str, Any]:
        return {"image": [_rgb_pil(img) for img in batch[0].images]}
