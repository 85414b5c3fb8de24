"""``clip-judge``: CLIP or SigLIP (transformers ``CLIPModel`` / ``SiglipModel``) as an image judge.

It answers the judge's :class:`~icl.models.requests.ChatRequest` s (one image, then a question)
in two forms, the same requests a chat model answers as a judge:

- concept presence, VL-ICL's judge question (:data:`PRESENCE_PROMPT`, the source's appendix A
  wording): "yes" when the concept's score reaches ``threshold``, else "no". The score is, for
  CLIP, the cosine similarity of the image and the text ``label_template.format(concept)``
  embeddings (default threshold 0.25); for SigLIP, the model's own sigmoid probability
  ``sigmoid(exp(logit_scale) * cosine + logit_bias)`` (default threshold 0.5), as
  ``SiglipModel.forward`` computes it.
- a vocabulary (:data:`CHOICE_PROMPT`): the label whose text embedding is nearest the image's by
  cosine similarity, answered verbatim.
- a numbered multiple-choice question as CoBSAT's judge asks it (``... Answer from the following
  options:  (1)leaf (2)hat ... Answer the number only ...``; UW-Madison-Lee-Lab/CoBSAT
  ``evaluation_icl.py``, ``get_eval_prompt``): the number of the nearest option, as that
  repository's ``eval_clip`` picks it: the first argmax of the cosine similarities to the options,
  each floored at 0 first (so where every similarity is negative, option 1).
  With one image it embeds the image; with none, the question's ``Image caption: {text}.``
  is embedded as text, its first :data:`CAPTION_CHARS` characters as ``eval_clip`` cuts a
  description (an empty caption answers "none": no option). Options are embedded through
  ``label_template`` like the vocabulary form; CoBSAT's reference embeds the bare labels
  (``label_template="{}"``).

Any other question is refused in its slot (a ValueError naming the request). Scores are also
available directly: :meth:`CLIPJudge.presence` and :meth:`CLIPJudge.nearest`.
Text is encoded as each model was trained: CLIP pads to the longest text, SigLIP to
``max_length`` (google-research/big_vision, and transformers' SigLIP documentation).
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

import numpy as np

from icl.models.base import PRECISIONS, Adapter, Architecture
from icl.models.memory import ActivationMemory, block_values, first_int, read_config
from icl.models.requests import ChatRequest
from icl.models.t2i.common import PretrainedFolder, RequestRefused, chunks, torch_dtype
from icl.models.weights import WeightsError

# VL-ICL appendix A (icl/benchmarks/vlicl/tasks.py JUDGE_PROMPT), the question chat judges get too
PRESENCE_PROMPT = "Decide whether the image contains the following concept: {concept}. Answer with 'yes' or 'no'."
CHOICE_PROMPT = "Which one of these does the image show: {labels}? Answer with exactly one of them."
LABEL_SEPARATOR = " | "
# PRESENCE_PROMPT, or VL-ICL's open_t2i_mi question without "the following concept:"
# (icl/benchmarks/vlicl/tasks.py JUDGE_PROMPT_OPEN_MI)
_PRESENCE = re.compile(r"Decide whether the image contains (?:the following concept:\s*)?(.+?)\.\s*"
                       r"Answer with 'yes' or 'no'", re.S)
_CHOICE = re.compile(r"Which one of these does the image show:\s*(.+?)\?\s*Answer with exactly one of them", re.S)
DEFAULT_THRESHOLD = {"clip": 0.25, "siglip": 0.5}
_NUMBERED = re.compile(r"Answer from the following options:\s*(.+?)\.\s*Answer the number only", re.S)
_OPTION = re.compile(r"\((\d+)\)(.+?)(?=\s*\(\d+\)|$)", re.S)
_CAPTION = re.compile(r"^Image caption: (.*)\. What is ", re.S)
CAPTION_CHARS = 200  # CoBSAT's eval_clip embeds description[:200]


def numbered_options(text: str) -> Optional[list[str]]:
    """The options of a numbered multiple-choice question, in order (None: not one, or not
    numbered 1..n)."""
    found = _NUMBERED.search(text)
    if found is None:
        return None
    pairs = _OPTION.findall(found.group(1))
    if len(pairs) < 2 or [int(n) for n, _ in pairs] != list(range(1, len(pairs) + 1)):
        return None
    return [label.strip() for _, label in pairs]


def presence_request(id: str, image: np.ndarray, concept: str) -> ChatRequest:
    """The yes/no question about ``concept`` in ``image`` (any chat model or ``clip-judge``)."""
    return ChatRequest.user(id, image, PRESENCE_PROMPT.format(concept=concept), max_new_tokens=5)


def choice_request(id: str, image: np.ndarray, labels: Sequence[str], max_new_tokens: int = 16) -> ChatRequest:
    """Which of ``labels`` ``image`` shows (any chat model or ``clip-judge``)."""
    bad = [x for x in labels if not x or LABEL_SEPARATOR.strip() in x or "?" in x]
    if len(labels) < 2 or bad:
        raise ValueError(f"choice_request {id!r}: need >= 2 non-empty labels without '|' or '?', got {list(labels)}")
    return ChatRequest.user(id, image, CHOICE_PROMPT.format(labels=LABEL_SEPARATOR.join(labels)),
                            max_new_tokens=max_new_tokens)


class CLIPJudge(PretrainedFolder, Adapter):
    """CLIP / SigLIP judge behind ChatRequest (see the module docstring).

    Model arguments: ``weights`` (a transformers CLIP or SigLIP folder; else
    ``$ICL_WEIGHTS_DIR/clip-judge/``), ``precision``, ``threshold`` (None: 0.25 cosine for
    CLIP, 0.5 probability for SigLIP), ``label_template`` (how a concept or label becomes text;
    "a photo of {}." is CLIP's ImageNet prompt), ``batch_size``.
    """

    name = "clip-judge"
    version = "2"  # 2: the numbered-options question (it was refused)
    serves = (ChatRequest,)

    def __init__(self, weights: Optional[str] = None, precision: str = "fp32", threshold: Optional[float] = None,
                 label_template: str = "a photo of {}.", batch_size: int = 32):
        if precision not in PRECISIONS:
            raise ValueError(f"clip-judge: precision must be one of {PRECISIONS}, got {precision!r}")
        if "{}" not in label_template:
            raise ValueError(f"clip-judge: label_template must hold '{{}}' where the label goes, "
                             f"got {label_template!r}")
        if threshold is not None and not isinstance(threshold, (int, float)):
            raise ValueError(f"clip-judge: threshold must be a number or None, got {threshold!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"clip-judge: batch_size must be a positive int, got {batch_size!r}")
        self.weights, self.precision, self.threshold = weights, precision, threshold
        self.label_template, self.batch_size = label_template, batch_size
        self.model: Any = None

    def architectures(self) -> Sequence[Architecture]:
        from transformers import AutoModel

        return (Architecture(self.folder, AutoModel),)

    def load(self, device: str) -> None:
        from transformers import AutoModel, AutoProcessor

        folder = self.folder
        model = AutoModel.from_pretrained(folder, dtype=torch_dtype(self.precision)).eval().to(device)
        kind = model.config.model_type
        if kind not in DEFAULT_THRESHOLD:
            raise WeightsError(f"clip-judge: {folder} holds a {kind!r} model; expected clip or siglip")
        self.kind, self.model, self.device = kind, model, device
        self.processor = AutoProcessor.from_pretrained(folder)
        self.cut = self.threshold if self.threshold is not None else DEFAULT_THRESHOLD[kind]

    def activation_memory(self, bytes_per_value: int) -> Optional[ActivationMemory]:
        """From ``config.json`` (``vision_config``: ``image_size`` S, ``patch_size`` p,
        ``hidden_size``, ``intermediate_size``; ``text_config``: ``max_position_embeddings`` T and
        its widths), per question about one image:
        ``A = b x (3 S^2 + max(block((S / p)^2 + 1), block(T)))``: the image's pixels, then the
        larger of one vision block over its patches and class token and one text block over a
        label padded to T tokens (:func:`icl.models.memory.block_values`; the towers run one after
        the other, one layer at a time). A vocabulary question embeds each of its labels."""
        try:
            config = read_config(self.folder / "config.json")
        except (OSError, ValueError):  # weights not resolvable here: the check reports that itself
            return None
        if config is None:
            return None
        vision, text = config.get("vision_config") or {}, config.get("text_config") or {}
        side, patch = first_int(vision, "image_size") or 224, first_int(vision, "patch_size") or 32
        width = first_int(vision, "hidden_size") or 768
        tokens = (side // patch) ** 2 + 1
        vision_block = block_values(tokens, width, first_int(vision, "intermediate_size") or 4 * width)
        text_tokens = first_int(text, "max_position_embeddings") or 77
        text_width = first_int(text, "hidden_size") or 512
        text_block = block_values(text_tokens, text_width, first_int(text, "intermediate_size") or 4 * text_width)
        return ActivationMemory(bytes_per_value * (3 * side * side + max(vision_block, text_block)),
                                f"{config.get('model_type', '?')}: {side}px, {tokens} image tokens of width {width}, "
                                f"{text_tokens} text tokens of width {text_width}")

    # -- embeddings and scores --------------------------------------------------------------
    def _unit(self, out: Any) -> Any:
        emb = out.pooler_output if hasattr(out, "pooler_output") else out
        emb = emb.float()
        return emb / emb.norm(dim=-1, keepdim=True)

    def embed_images(self, images: Sequence[np.ndarray]) -> Any:
        """Unit-norm float32 image embeddings ``[N, D]``."""
        import torch

        enc = self.processor(images=list(images), return_tensors="pt")
        pixels = enc["pixel_values"].to(self.device, dtype=self.model.dtype)
        with torch.inference_mode():
            return self._unit(self.model.get_image_features(pixel_values=pixels))

    def embed_texts(self, labels: Sequence[str]) -> Any:
        """Unit-norm float32 embeddings ``[N, D]`` of ``label_template.format(label)``."""
        import torch

        texts = [self.label_template.format(x) for x in labels]
        padding = "max_length" if self.kind == "siglip" else True
        enc = self.processor(text=texts, padding=padding, truncation=True, return_tensors="pt")
        enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        with torch.inference_mode():
            return self._unit(self.model.get_text_features(**enc))

    def presence(self, images: Sequence[np.ndarray], concepts: Sequence[str]) -> np.ndarray:
        """Per (image, concept) pair its presence score (cosine for CLIP, probability for
        SigLIP), float64 ``[N]``."""
        import torch

        sims = (self.embed_images(images) * self.embed_texts(concepts)).sum(dim=-1)
        if self.kind == "siglip":
            scale, bias = self.model.logit_scale.detach().float().exp(), self.model.logit_bias.detach().float()
            sims = torch.sigmoid(sims * scale.to(sims.device) + bias.to(sims.device))
        return sims.double().cpu().numpy()

    def nearest(self, images: Sequence[np.ndarray], vocabularies: Sequence[Sequence[str]]) -> list[int]:
        """Per image the index of the nearest label of its vocabulary (cosine similarity)."""
        return self._nearest(self.embed_images(images), vocabularies)

    def nearest_to_texts(self, texts: Sequence[str], vocabularies: Sequence[Sequence[str]],
                         floor: Optional[float] = None) -> list[int]:
        """Per text (embedded as it is, no template) the index of the nearest label of its vocabulary."""
        template, self.label_template = self.label_template, "{}"
        try:
            emb = self.embed_texts(texts)
        finally:
            self.label_template = template
        return self._nearest(emb, vocabularies, floor)

    def _nearest(self, emb: Any, vocabularies: Sequence[Sequence[str]], floor: Optional[float] = None) -> list[int]:
        """First argmax per row of the cosine similarities (each floored at ``floor`` when given)."""
        out = []
        for i, labels in enumerate(vocabularies):
            sims = self.embed_texts(labels) @ emb[i]
            out.append(int((sims if floor is None else sims.clamp(min=floor)).argmax()))
        return out

    # -- the judge's chat interface ----------------------------------------------------------
    @staticmethod
    def classify(req: ChatRequest) -> tuple[str, Any]:
        """What ``req`` asks, without a model: ``("caption", (text, options))``, ``("none", None)``
        (an empty caption), ``("presence", (image, concept))``, ``("choice", (image, labels))``,
        ``("numbered", (image, options))``, or ``("refused", why)``."""
        text = " ".join(p for m in req.messages if m.role == "user" for p in m.content if isinstance(p, str))
        images = req.images
        options = numbered_options(text)
        caption = _CAPTION.match(text) if options is not None and not images else None
        if caption is not None:
            if caption.group(1).strip():
                return "caption", (caption.group(1)[:CAPTION_CHARS], options)
            return "none", None
        if len(images) != 1:
            return "refused", f"clip-judge: request {req.id!r} shows {len(images)} images; it judges one"
        if (found := _PRESENCE.search(text)) is not None:
            return "presence", (images[0], found.group(1).strip())
        if (found := _CHOICE.search(text)) is not None:
            return "choice", (images[0], [x.strip() for x in found.group(1).split(LABEL_SEPARATOR.strip())])
        if options is not None:
            return "numbered", (images[0], options)
        return "refused", (f"clip-judge: request {req.id!r} asks none of the presence, choice and "
                           f"numbered-options questions of icl.models.t2i.clip_judge")

    def would_refuse(self, request: Any) -> Optional[str]:
        if not isinstance(request, ChatRequest):
            return f"clip-judge: serves ChatRequest, got {type(request).__name__}"
        kind, why = self.classify(request)
        return why if kind == "refused" else None

    def check_loadable(self) -> None:
        from transformers import AutoConfig

        try:
            kind = AutoConfig.from_pretrained(self.folder, local_files_only=True).model_type
        except (OSError, ValueError) as exc:
            raise WeightsError(f"clip-judge: {self.folder}: cannot read its configuration ({type(exc).__name__}: "
                               f"{exc})") from None
        if kind not in DEFAULT_THRESHOLD:
            raise WeightsError(f"clip-judge: {self.folder} holds a {kind!r} model; expected clip or siglip")

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        if self.model is None:
            raise RuntimeError("clip-judge: call load(device) before predict")
        out: list[Any] = [None] * len(requests)
        work: dict[str, list[tuple[int, Any, Any]]] = {"presence": [], "choice": [], "numbered": [], "caption": []}
        for i, req in enumerate(requests):
            if not isinstance(req, ChatRequest):
                raise ValueError(f"clip-judge: serves ChatRequest, got {type(req).__name__}")
            kind, what = self.classify(req)
            if kind == "refused":
                out[i] = RequestRefused(what)
            elif kind == "none":
                out[i] = "none"
            else:
                work[kind].append((i, *what))
        presence, choice, numbered, captions = (work[k] for k in ("presence", "choice", "numbered", "caption"))
        for part in chunks(presence, self.batch_size):
            scores = self.presence([p[1] for p in part], [p[2] for p in part])
            for (i, _, _), s in zip(part, scores):
                out[i] = "yes" if s >= self.cut else "no"
        for part in chunks(choice, self.batch_size):
            picks = self.nearest([c[1] for c in part], [c[2] for c in part])
            for (i, _, labels), k in zip(part, picks):
                out[i] = labels[k]
        for part in chunks(numbered, self.batch_size):  # eval_clip floors similarities at 0
            picks = self._nearest(self.embed_images([c[1] for c in part]), [c[2] for c in part], floor=0.0)
            for (i, _, _), k in zip(part, picks):
                out[i] = str(k + 1)
        for part in chunks(captions, self.batch_size):
            picks = self.nearest_to_texts([c[1] for c in part], [c[2] for c in part], floor=0.0)
            for (i, _, _), k in zip(part, picks):
                out[i] = str(k + 1)
        return out
