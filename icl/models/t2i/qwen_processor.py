"""The Qwen2-VL processor of ``QwenImageEditPlusPipeline`` without torchvision.

The pipeline (huggingface/diffusers ``src/diffusers/pipelines/qwenimage/
pipeline_qwenimage_edit_plus.py``) declares its ``processor`` component a transformers
``Qwen2VLProcessor`` and calls it only as ``processor(text=..., images=..., padding=True,
return_tensors="pt")``: images and text, never videos. In transformers 5 (checked with 5.24)
``Qwen2VLProcessor(...)`` and ``Qwen2VLProcessor.from_pretrained`` cannot be built without
torchvision: ``ProcessorMixin.__init__`` checks every sub-processor named in ``__init__``,
``video_processor`` included, against ``VideoProcessorMixin``, which transformers exports only
when torchvision is installed (``transformers/__init__.py``: ``video_processing_utils`` sits in
the torchvision branch; the fallback lookup reads the torchvision-only
``VIDEO_PROCESSOR_MAPPING`` and fails with ``AttributeError: ... '_extra_content'``), even for
``video_processor=None``.

:class:`QwenImageTextProcessor` is ``Qwen2VLProcessor`` with the same image and text handling
and no video processor; :func:`load_processor` builds it from a release's ``processor/`` folder
with the PIL image processor ``Qwen2VLImageProcessorPil`` (the pre-torchvision "slow"
``Qwen2VLImageProcessor``), always, so an image never depends on whether torchvision happens to
be installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import AutoTokenizer, Qwen2VLProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.processing_utils import ProcessorMixin


class QwenImageTextProcessor(Qwen2VLProcessor):
    """``Qwen2VLProcessor`` for images and text only (see the module docstring)."""

    def __init__(self, image_processor: Any = None, tokenizer: Any = None, chat_template: Any = None,
                 **kwargs: Any) -> None:
        # the token attributes Qwen2VLProcessor.__init__ sets, then the mixin with two parts
        self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
        self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
        self.image_token_id = getattr(tokenizer, "image_token_id", None) or \
            tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = getattr(tokenizer, "video_token_id", None) or \
            tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)


def load_processor(folder: Path) -> QwenImageTextProcessor:
    """The processor of a release's ``processor/`` folder (``preprocessor_config.json`` and the
    tokenizer files), local files only."""
    image_processor = Qwen2VLImageProcessorPil.from_pretrained(folder, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return QwenImageTextProcessor(image_processor, tokenizer)
