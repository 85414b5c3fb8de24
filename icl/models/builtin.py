"""Built-in baselines (PROTOCOL §1.4): oracle, copy-target, identity.

Each answers with the uint8 image it picks (numpy for numpy requests, a tensor on the request's
device for tensor requests, see ``Adapter.accepts_tensors``). At precision fp16/bf16 the answer
is that image as a torch tensor ``x / 255`` in that dtype, which decodes back to the same
uint8 image (``round(255 * x)`` is exact for every level in both dtypes).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Optional, Sequence

import cv2
import numpy as np

from icl.models.base import Adapter
from icl.models.requests import AnalogyRequest, ChatRequest


def nearest_index(src: int, dst: int) -> np.ndarray:
    """OpenCV ``INTER_NEAREST``'s source index per destination index: ``floor(i * (src / dst))``
    with the scale computed as OpenCV does (``1 / (dst / src)`` in double)."""
    return np.minimum(np.floor(np.arange(dst) * (1.0 / (dst / src))).astype(np.int64), src - 1)


def resize_nearest_cv(image: Any, size: tuple[int, int]) -> Any:
    """``cv2.resize(image, (w, h), interpolation=cv2.INTER_NEAREST)`` for numpy arrays, and the
    same pixels gathered on the device for torch tensors."""
    h, w = size
    if tuple(image.shape[:2]) == (h, w):
        return image
    if isinstance(image, np.ndarray):
        return cv2.resize(image, (w, h), interpolation=cv2.INTER_NEAREST)
    import torch

    rows = torch.from_numpy(nearest_index(image.shape[0], h)).to(image.device)
    cols = torch.from_numpy(nearest_index(image.shape[1], w)).to(image.device)
    return image.index_select(0, rows).index_select(1, cols)


def as_output(image: Any, precision: str) -> Any:
    """A uint8 image as the answer at ``precision`` (see the module docstring)."""
    if precision == "fp32":
        return image
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    t = image if isinstance(image, torch.Tensor) else torch.from_numpy(np.array(image))  # the request's own is read-only
    return t.to(dtype) / 255


class _Builtin(Adapter):
    accepts_tensors = True

    @abstractmethod
    def pick(self, req: AnalogyRequest) -> Any:
        """The uint8 image answering ``req``."""

    def predict(self, requests: Sequence[AnalogyRequest]) -> list[Any]:
        return [as_output(self.pick(req), self.precision) for req in requests]


class Oracle(_Builtin):
    """Returns the encoded ground truth (an AnalogyRequest's ``oracle_target``, a ChatRequest's
    ``oracle_answer``): the round-trip test of every decoder and parser."""

    name = "oracle"
    version = "1"
    serves = (AnalogyRequest, ChatRequest)
    batch_size = 64
    privileged = True
    reference = True

    def predict(self, requests: Sequence[Any]) -> list[Any]:
        if requests and all(isinstance(r, ChatRequest) for r in requests):
            missing = [r.id for r in requests if r.oracle_answer is None]
            if missing:
                raise ValueError(f"oracle: chat request {missing[0]!r} has no oracle_answer")
            return [r.oracle_answer for r in requests]
        return super().predict(requests)

    def pick(self, req: AnalogyRequest) -> Any:
        if req.oracle_target is None:
            raise ValueError(f"oracle: request for {req.task}/{req.dataset}/{req.query_id} has no oracle_target")
        return req.oracle_target


class CopyTarget(_Builtin):
    """``c_out`` of the first context, resized to the query size with nearest neighbour."""

    name = "copy-target"
    version = "1"
    batch_size = 64

    def pick(self, req: AnalogyRequest) -> Any:
        if not req.context_outputs:
            raise ValueError(f"copy-target: request for {req.task}/{req.dataset}/{req.query_id} has no context")
        return resize_nearest_cv(req.context_outputs[0], tuple(req.query.shape[:2]))


class Identity(_Builtin):
    """Returns the query unchanged: the 'hands the input through' baseline."""

    name = "identity"
    version = "1"
    batch_size = 64
    reference = True

    def pick(self, req: AnalogyRequest) -> Any:
        return req.query


class BuiltinDataJudge(Adapter):
    """A deterministic judge of a benchmark's built-in synthetic data: it reads its own drawings
    and answers the benchmark's judge questions. It judges only requests whose id starts with
    ``prefix`` (the benchmark gives built-in items that prefix) and refuses anything else in one
    line: release data needs a vision-language judge (``--judge``). Subclasses set ``name``,
    ``prefix``, ``data`` (what it judges, for the message) and implement :meth:`answer`."""

    serves = (ChatRequest,)
    batch_size = 64
    prefix: ClassVar[str] = ""
    data: ClassVar[str] = "built-in data"

    @abstractmethod
    def answer(self, request: ChatRequest) -> str:
        """The judge's answer to one question about a built-in image."""

    def would_refuse(self, request: Any) -> Optional[str]:
        if isinstance(request, ChatRequest) and request.id.startswith(self.prefix):
            return None
        what = getattr(request, "id", type(request).__name__)
        return (f"{self.name} judges only {self.data}, not request {what!r}: judge release data with a "
                "vision-language model (--judge hf-vlm:... or openai:...)")

    def predict(self, requests: Sequence[ChatRequest]) -> list[str]:
        for req in requests:
            why = self.would_refuse(req)
            if why is not None:
                raise ValueError(why)
        return [self.answer(r) for r in requests]
