"""Model-family quirks of transformers chat models, one small class per family.

The generic path (:class:`Family`) trusts the checkpoint's own chat template: image items go
to the template where they occur, images go to the processor as one flat list. A family
overrides only what its checkpoints need:

- ``image_placeholder``: the LLaVA-1.5 templates print every image of a turn before its text,
  which would destroy VL-ICL's interleaving (support image, its answer, next image, ...); the
  LLaVA family writes the processor's ``<image>`` token into the text where each image is.
- ``system_role``: those same templates print a system turn's first text part with no role or
  separator, so the LLaVA family folds system text into the first user turn instead.
- ``nested_images``: Idefics2/3, SmolVLM, Mllama, Gemma 3 and LFM2-VL processors take one image
  list per prompt (a flat list would be read as all images of one prompt); the others take one
  flat list for the batch.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

import numpy as np

from icl.models.requests import ChatRequest
from icl.models.vlm.prompt import hf_messages


class Family:
    """The generic transformers image-text-to-text model with a chat template."""

    model_types: ClassVar[tuple[str, ...]] = ()
    system_role: ClassVar[bool] = True
    nested_images: ClassVar[bool] = False
    image_placeholder: ClassVar[Optional[str]] = None

    def messages(self, request: ChatRequest) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
        """``(chat-template messages, images in order)`` for one request."""
        return hf_messages(request, system_role=self.system_role, image_placeholder=self.image_placeholder)

    def images_argument(self, per_prompt: list[list[np.ndarray]]) -> Optional[list[Any]]:
        """The processor's ``images`` argument for a batch (None when no prompt has images)."""
        if not any(per_prompt):
            return None
        return [list(imgs) for imgs in per_prompt] if self.nested_images else [i for imgs in per_prompt for i in imgs]

    def context_length(self, config: Any) -> Optional[int]:
        """Tokens the language model attends over (prompt and answer), from its configuration."""
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        for attr in ("max_position_embeddings", "max_sequence_length", "seq_length"):
            value = getattr(text, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        return None


class Llava(Family):
    model_types = ("llava", "vipllava", "llava_next", "llava_onevision")
    system_role = False
    image_placeholder = "<image>\n"


class NestedImages(Family):
    model_types = ("idefics2", "idefics3", "smolvlm", "mllama", "gemma3", "gemma3n", "lfm2_vl")
    nested_images = True


FAMILIES: tuple[type[Family], ...] = (Llava, NestedImages)


def family_for(model_type: str) -> Family:
    """The family serving a ``config.model_type`` (the generic one when none claims it)."""
    for cls in FAMILIES:
        if model_type in cls.model_types:
            return cls()
    return Family()
