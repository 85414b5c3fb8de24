"""The request a visual in-context model receives, and the adapter ABC shared by benchmarks.

Requests are plain typed data; adapters own resizing, normalisation and batching. The runner
hands an adapter at most ``batch_size`` requests per ``predict`` call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

import numpy as np

PRECISIONS = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class AnalogyRequest:
    """One visual analogy: K context pairs and a query; the model returns one RGB image.

    Images are uint8 ``[H, W, 3]`` (sizes may differ between images): numpy arrays, or, when
    ``device`` is set (only for adapters with ``accepts_tensors``), torch uint8 tensors already
    on that device. ``target_size`` is the ``(h, w)`` of the ground truth; a model may answer at
    any resolution (the task resizes). ``oracle_target`` is the encoded ground truth, filled
    only for privileged adapters.
    """

    task: str
    dataset: str
    query_id: str
    context_inputs: list[np.ndarray]
    context_outputs: list[np.ndarray]
    query: np.ndarray
    target_size: tuple[int, int]
    oracle_target: Optional[np.ndarray] = None
    device: Optional[str] = None

    @property
    def shots(self) -> int:
        return len(self.context_inputs)


class Adapter(ABC):
    """A model behind the visual in-context interface.

    Class attributes: ``name`` (registry id), ``version`` (bump when outputs change: it is part
    of every stored result's key), ``batch_size`` (most requests per ``predict`` call),
    ``precision`` (one of ``PRECISIONS``; the runner may override it before ``load``),
    ``privileged`` (receives ``oracle_target``; only baselines may set it), ``accepts_tensors``
    (the adapter takes requests whose images are torch tensors on its device, see
    :class:`AnalogyRequest`, and answers with torch tensors on that device: the runner then
    uploads each batch once and decodes and scores the outputs where they are).
    """

    name: ClassVar[str] = "adapter"
    version: ClassVar[str] = "0"
    batch_size: int = 1
    precision: str = "fp32"
    privileged: ClassVar[bool] = False
    accepts_tensors: ClassVar[bool] = False

    def load(self, device: str) -> None:
        """Load weights onto ``device`` ("cpu", "cuda", "cuda:1", ...). Called once before predict."""
        self.device = device

    @abstractmethod
    def predict(self, requests: Sequence[Any]) -> list[Any]:
        """One output per request, in order. For an :class:`AnalogyRequest` an image: uint8
        ``[h, w, 3]`` or float in [0, 1] (float16, bfloat16 or float32 torch tensors are taken
        as they are; any ``h, w``), numpy or torch on any device; a ``[B, h, w, 3]`` tensor may
        stand for the whole list. Other benchmarks pass their own request types (e.g. best50's
        ``DetectionRequest``, answered with text)."""
