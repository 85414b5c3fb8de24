"""``hf-vlm``: any transformers image-text-to-text model with a chat template.

``AutoProcessor`` + ``AutoModelForImageTextToText`` from a local ``from_pretrained`` folder.
A batch is rendered through the checkpoint's chat template (family quirks in
:mod:`icl.models.vlm.families`), encoded with left padding and decoded in one ``generate``
call. Each request keeps its own settings inside the batch:

- greedy unless ``do_sample``; a sampling request draws from its own ``torch.Generator``
  seeded with ``request.seed`` (Gumbel-max on the temperature-scaled logits, which is exact
  categorical sampling), so its answer never depends on its batch neighbours;
- ``min_new_tokens`` by masking end-of-sequence tokens per row; ``max_new_tokens`` by cutting
  each row (decoding is causal, so a row cut at n tokens equals a row generated for n tokens).

Per-request failures: ``predict`` returns one entry per request, a ``str`` answer or, for a
request whose prompt (image tokens included) plus ``max_new_tokens`` exceeds the model's
context, a :class:`~icl.models.ContextOverflowError` *instance* in that slot (never raised,
never truncated); the other requests of the batch are answered. Malformed requests raise.
:meth:`HFVisionLanguage.prompt_length` counts a prompt as that guard does (the same rendering,
processor and count) from the configuration and processor alone, without the weights: what
``--check`` tells the overflow of a run with (:mod:`icl.run.planning.check_context`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np
import torch

from icl.models.base import PRECISIONS, Adapter, Architecture, ContextOverflowError, PromptLength, exceeds_context
from icl.models.memory import CONTEXT_TOKENS, ActivationMemory, first_int, lm_config_values, read_config
from icl.models.requests import ChatRequest, Message
from icl.models.vlm.families import Family, family_for
from icl.models.vlm.prompt import check_request, count_occurrences, first_index
from icl.models.weights import WeightsError, resolve_weights

log = logging.getLogger("icl.models.vlm")

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
RAW = "raw"


class _PerRowControl:
    """Logits processor: per-row minimum length (end-of-sequence masked) and per-row
    seeded sampling (Gumbel noise from the row's own generator) before the greedy argmax."""

    def __init__(self, prompt_len: int, min_new: list[int], eos_ids: list[int],
                 sampling: list[Optional[tuple[torch.Generator, float]]]):
        self.prompt_len, self.min_new, self.eos_ids, self.sampling = prompt_len, min_new, eos_ids, sampling

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        step = input_ids.shape[1] - self.prompt_len
        scores = scores.float()
        for row, (min_new, sample) in enumerate(zip(self.min_new, self.sampling)):
            if step < min_new and self.eos_ids:
                scores[row, self.eos_ids] = -float("inf")
            if sample is not None:
                generator, temperature = sample
                u = torch.rand(scores.shape[1], generator=generator, dtype=torch.float32).clamp_(min=1e-20)
                scores[row] = scores[row] / temperature - torch.log(-torch.log(u)).to(scores.device)
        return scores


class HFVisionLanguage(Adapter):
    """A transformers chat VLM behind :class:`~icl.models.requests.ChatRequest`.

    Model arguments: ``weights`` (a local ``from_pretrained`` folder, or a Hub reference
    ``hf:ORG/NAME[@REVISION][/SUBPATH]`` downloaded into the Hugging Face cache; else
    ``$ICL_WEIGHTS_DIR/hf-vlm/``), ``precision`` (fp32, fp16, bf16), ``device_map`` (e.g.
    "auto" to spread a model over several GPUs with accelerate; None loads it whole on the
    device), ``max_batch`` (requests per ``generate`` call), ``attn_implementation`` ("sdpa",
    "eager", "flash_attention_2"; None = transformers' default), ``max_context`` (override the
    context length read from the configuration), ``chat_template`` (None: the checkpoint's own;
    a path to a Jinja file, whose contents join the model's identity; the name of one of the
    processor's named templates; or ``raw``: no template, the request's text with the processor's
    image token where each image is, for base interleaved checkpoints and
    ``--prompt-style reference``), ``system`` (a system prompt replacing the request's; None keeps
    the request's, and a template's own default system prompt applies when there is none).

    Loading never runs a checkpoint's own code (``trust_remote_code=False``) and never reaches
    the network (``local_files_only=True``): a Hub reference is resolved before, by
    :mod:`icl.models.hub`.
    """

    name = "hf-vlm"
    version = "1"
    serves = (ChatRequest,)

    def __init__(self, weights: Optional[str] = None, precision: str = "fp32",
                 device_map: Optional[Union[str, dict]] = None, max_batch: int = 8,
                 attn_implementation: Optional[str] = None, max_context: Optional[int] = None,
                 chat_template: Optional[str] = None, system: Optional[str] = None):
        if precision not in PRECISIONS:
            raise ValueError(f"hf-vlm: precision must be one of {PRECISIONS}, got {precision!r}")
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"hf-vlm: max_batch must be a positive int, got {max_batch!r}")
        if max_context is not None and (not isinstance(max_context, int) or max_context < 1):
            raise ValueError(f"hf-vlm: max_context must be a positive int, got {max_context!r}")
        self.weights, self.precision, self.device_map = weights, precision, device_map
        self.batch_size, self.attn_implementation, self.max_context = max_batch, attn_implementation, max_context
        if chat_template is not None and (not isinstance(chat_template, str) or not chat_template):
            raise ValueError(f"hf-vlm: chat_template must be a file, a template name or 'raw', got {chat_template!r}")
        if system is not None and not isinstance(system, str):
            raise ValueError(f"hf-vlm: system must be a string, got {system!r}")
        self.chat_template, self.system = chat_template, system
        self.model: Any = None
        self.check_image_tokens = False
        self._prepared: Optional[Path] = None  # the folder _prepare read

    @property
    def raw(self) -> bool:
        return self.chat_template == RAW

    def template_file(self) -> Optional[Path]:
        """The Jinja file ``chat_template`` names (None for a name, ``raw`` or the default)."""
        t = self.chat_template
        if t is None or t == RAW:
            return None
        path = Path(t).expanduser()
        if path.suffix in (".jinja", ".j2", ".txt") or "/" in t or path.is_file():
            if not path.is_file():
                raise WeightsError(f"hf-vlm: chat_template {t!r} is not a file")
            return path
        return None

    @property
    def folder(self) -> Path:
        """The ``from_pretrained`` folder (the one holding ``config.json``)."""
        found = resolve_weights(self.name, self.weights, "config.json")
        return found.parent if found.is_file() else found

    def weight_files(self) -> Sequence[Path]:
        template = self.template_file()  # its contents change answers: digested like the weights
        return (self.folder,) + ((template,) if template is not None else ())

    def architectures(self) -> Sequence[Architecture]:
        from transformers import AutoModelForImageTextToText

        return (Architecture(self.folder, AutoModelForImageTextToText),)

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From the language model's ``config.json`` (``text_config`` when nested):
        ``A = b x T x (2 L h_kv + 4 h + 2 I)`` (:func:`icl.models.memory.causal_lm_values`: the
        key/value cache of every layer and one layer's working set), ``b`` the bytes of a value,
        ``T`` the tokens of a request: ``max_context`` when given, else
        ``min(max_position_embeddings,`` :data:`~icl.models.memory.CONTEXT_TOKENS` ``)``; ``h``
        ``hidden_size``, ``L`` ``num_hidden_layers``, ``h_kv = h x num_key_value_heads /
        num_attention_heads``, ``I`` ``intermediate_size`` (4 h when not given). The vision
        tower's activations (its images' tokens are among the T) are not counted apart."""
        counted = self._lm_values()
        if counted is None:
            return None
        values, tokens, basis = counted
        return ActivationMemory(bytes_per_value * values, basis, tokens)

    def _lm_values(self) -> Optional[tuple[int, int, str]]:
        """``(values, T, basis)`` of :meth:`activation_memory` (None without a readable config)."""
        try:
            config = read_config(self.folder / "config.json")
        except (OSError, ValueError):  # weights not resolvable here: the check reports that itself
            return None
        text = config.get("text_config", config) if config is not None else None
        if not isinstance(text, dict):
            return None
        positions = first_int(text, "max_position_embeddings", "n_positions") or CONTEXT_TOKENS
        tokens = self.max_context or min(positions, CONTEXT_TOKENS)
        counted = lm_config_values(text, tokens)
        return None if counted is None else (counted[0], tokens, counted[1])

    def _open_processor(self, folder: Path) -> None:
        """The processor, its tokenizer and the chat template in force (what :meth:`load` reads
        before the weights)."""
        from transformers import AutoProcessor

        self.processor = AutoProcessor.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
        tokenizer = getattr(self.processor, "tokenizer", None)
        if tokenizer is None:
            raise WeightsError(f"hf-vlm: {folder}: the processor has no tokenizer")
        self.tokenizer: Any = tokenizer
        self.template: Optional[str] = self._resolve_template(folder)
        if not self.raw and self.template is None:
            raise WeightsError(f"hf-vlm: {folder}: no chat template (chat_template.jinja or the processor's "
                               f"chat_template); hf-vlm serves chat models only")

    def check_loadable(self) -> None:
        """The configuration, the processor, the chat template and the family read as :meth:`load`
        reads them (:meth:`_prepare`), without the weights."""
        from jinja2 import TemplateError

        folder = self.folder
        try:
            self._prepare(folder)
        except WeightsError:
            raise
        except (OSError, ValueError, KeyError, TemplateError) as exc:  # TemplateError: the probe's rendering
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise WeightsError(f"hf-vlm: {folder}: cannot be loaded ({type(exc).__name__}: {first})") from None

    def _prepare(self, folder: Path) -> None:
        """Everything :meth:`load` sets before the weights, from ``config.json`` and the processor:
        the processor and its tokenizer (left padding), the chat template, the family, the image
        token and whether requests' image counts can be checked, and the context length. A prompt
        is rendered and counted from these alone, so :meth:`prompt_length` (no weights) and the
        run count alike. Done once per folder."""
        from transformers import AutoConfig

        if self._prepared == folder:
            return
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
        self._open_processor(folder)
        self.tokenizer.padding_side = "left"
        self.family: Family = family_for(config.model_type)
        self.image_token: str = getattr(self.processor, "image_token", None) or ""
        if self.raw and not self.image_token:
            raise WeightsError(f"hf-vlm: {folder}: chat_template=raw writes the processor's image token where each "
                               f"image is, but this processor has none")
        placeholder = self.family.image_placeholder
        if placeholder is not None and self.image_token and self.image_token not in placeholder:
            raise WeightsError(f"hf-vlm: {folder}: family {type(self.family).__name__} writes images as "
                               f"{placeholder!r} but the processor's image token is {self.image_token!r}")
        self.check_image_tokens = False
        probe_text, _ = self.render(ChatRequest.user("probe", np.zeros((8, 8, 3), np.uint8), "probe"))
        self.check_image_tokens = count_occurrences(probe_text, self.image_token) == 1
        if not self.check_image_tokens:
            # The template drops images, or marks them otherwise than the processor's image token
            # (then the per-request count check would misfire): warn, leave checks to the processor.
            log.warning("hf-vlm: %s: the chat template does not mark an image with %r; image counts unchecked",
                        folder, self.image_token)
        self.context: Optional[int] = self.max_context or self.family.context_length(config)
        if self.context is None:
            log.warning("hf-vlm: %s: no context length in the configuration; pass --model-arg max_context=N "
                        "to guard against overflow", folder)
        self._prepared = folder

    def load(self, device: str) -> None:
        from transformers import AutoModelForImageTextToText

        folder = self.folder
        self.device = device
        self._prepare(folder)
        kwargs: dict[str, Any] = {"dtype": DTYPES[self.precision]}
        if self.attn_implementation:
            kwargs["attn_implementation"] = self.attn_implementation
        if self.device_map is not None:
            kwargs["device_map"] = self.device_map
        model = AutoModelForImageTextToText.from_pretrained(folder, trust_remote_code=False, local_files_only=True,
                                                            **kwargs).eval()
        if self.device_map is None:
            model.to(device)
        self.model = model
        gen = model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.tokenizer.eos_token_id
        self.eos_ids = sorted({int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos]) if e is not None})
        pad = gen.pad_token_id if gen.pad_token_id is not None else self.tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else (self.eos_ids[0] if self.eos_ids else 0)

    def _resolve_template(self, folder: Path) -> Optional[str]:
        """The Jinja template text in force (None in raw mode or when the checkpoint has none)."""
        if self.raw:
            return None
        file = self.template_file()
        if file is not None:
            return file.read_text(encoding="utf-8")
        own = getattr(self.processor, "chat_template", None)
        if self.chat_template is None:
            if isinstance(own, dict):
                return own.get("default")
            return own or None
        if not isinstance(own, dict) or self.chat_template not in own:
            names = sorted(own) if isinstance(own, dict) else []
            raise WeightsError(f"hf-vlm: {folder}: no chat template named {self.chat_template!r} (named templates: "
                               f"{', '.join(names) or 'none'}; or give a .jinja file, or 'raw')")
        return own[self.chat_template]

    def _input_device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def render(self, request: ChatRequest) -> tuple[str, list[Any]]:
        """The prompt text (chat template applied, generation prompt added) and its images."""
        if self.system is not None:
            request = replace(request, messages=(Message("system", (self.system,)),)
                              + tuple(m for m in request.messages if m.role != "system"))
        if self.raw:  # no template: the text as given, the image token where each image is
            parts = [p for m in request.messages for p in m.content]
            return "".join(self.image_token if isinstance(p, np.ndarray) else p for p in parts), \
                [p for p in parts if isinstance(p, np.ndarray)]
        messages, images = self.family.messages(request)
        text = self.processor.apply_chat_template(messages, chat_template=self.template, add_generation_prompt=True,
                                                  tokenize=False)
        if self.check_image_tokens and count_occurrences(text, self.image_token) != len(images):
            raise ValueError(f"hf-vlm: request {request.id!r}: the chat template of {self.folder} wrote "
                             f"{count_occurrences(text, self.image_token)} image tokens "
                             f"({self.image_token!r}) for {len(images)} images")
        return text, images

    def _process(self, requests: Sequence[ChatRequest]) -> Any:
        """The processor's outputs for a batch (left padded), on the CPU."""
        rendered = [self.render(r) for r in requests]
        try:
            return self.processor(text=[t for t, _ in rendered],
                                  images=self.family.images_argument([imgs for _, imgs in rendered]),
                                  padding=True, return_tensors="pt")
        except (ValueError, TypeError) as exc:
            raise ValueError(f"hf-vlm: the processor of {self.folder} refused requests "
                             f"{[r.id for r in requests]}: {exc}") from exc

    def encode(self, requests: Sequence[ChatRequest]) -> Any:
        """Processor outputs for a batch (left padded), on the model's input device."""
        enc = self._process(requests)
        dtype = DTYPES[self.precision]
        return {k: (v.to(self._input_device(), dtype=dtype) if v.is_floating_point() else v.to(self._input_device()))
                for k, v in enc.items() if isinstance(v, torch.Tensor)}

    @staticmethod
    def _prompt_tokens(enc: Any) -> list[int]:
        """Per row of an encoded batch its prompt's tokens, images included (padding left out)."""
        return [int(n) for n in enc["attention_mask"].sum(dim=1).tolist()]

    def prompt_length(self, request: Any) -> Optional[PromptLength]:
        """The tokens of ``request``'s prompt as :meth:`_batch_tokens` counts them (the same
        rendering, processor and count) and the context it compares them with; needs the
        configuration and processor only (:meth:`_prepare`), never the weights. None for a request
        that is not a :class:`ChatRequest`."""
        if not isinstance(request, ChatRequest):
            return None
        self._prepare(self.folder)
        (tokens,) = self._prompt_tokens(self._process([check_request(request, self.name)]))
        return PromptLength(tokens, self.context)

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        return [self.tokenizer.decode(a, skip_special_tokens=True).strip() if isinstance(a, list) else a
                for a in self.token_answers(requests)]

    def token_answers(self, requests: Sequence[Any]) -> list[Any]:
        """Per request the new token ids (end-of-sequence excluded), or a
        :class:`ContextOverflowError` instance; ``predict`` decodes them."""
        if self.model is None:
            raise RuntimeError("hf-vlm: call load(device) before predict")
        checked = [check_request(r, self.name) for r in requests]
        out: list[Any] = []
        for start in range(0, len(checked), self.batch_size):
            out.extend(self._batch_tokens(checked[start:start + self.batch_size]))
        return out

    def _batch_tokens(self, requests: list[ChatRequest]) -> list[Any]:
        answers: list[Any] = [None] * len(requests)
        keep = list(range(len(requests)))
        enc = self.encode(requests)
        if self.context is not None:
            for i, (r, n) in enumerate(zip(requests, self._prompt_tokens(enc))):
                if exceeds_context(n, r.max_new_tokens, self.context):
                    answers[i] = ContextOverflowError(
                        f"hf-vlm: request {r.id!r}: prompt of {n} tokens (images included) + max_new_tokens "
                        f"{r.max_new_tokens} exceeds the context of {self.context} tokens of {self.folder}")
            keep = [i for i in keep if answers[i] is None]
            if not keep:
                return answers
            if len(keep) < len(requests):
                enc = self.encode([requests[i] for i in keep])
        for i, tokens in zip(keep, self._generate([requests[i] for i in keep], enc)):
            answers[i] = tokens
        return answers

    @torch.inference_mode()
    def _generate(self, batch: list[ChatRequest], enc: dict[str, torch.Tensor]) -> list[list[int]]:
        from transformers import LogitsProcessorList

        prompt_len = enc["input_ids"].shape[1]
        sampling = [(torch.Generator().manual_seed(r.seed % (1 << 63)), float(r.temperature)) if r.do_sample else None
                    for r in batch]
        control = _PerRowControl(prompt_len, [r.min_new_tokens for r in batch], self.eos_ids, sampling)
        max_new = max(r.max_new_tokens for r in batch)
        generated = self.model.generate(**enc, do_sample=False, max_new_tokens=max_new, min_new_tokens=0,
                                        logits_processor=LogitsProcessorList([control]),
                                        eos_token_id=self.eos_ids or None, pad_token_id=self.pad_id)
        eos = set(self.eos_ids)
        rows = [row[:r.max_new_tokens] for r, row in zip(batch, generated[:, prompt_len:].tolist())]
        return [row[:first_index(row, eos)] for row in rows]
