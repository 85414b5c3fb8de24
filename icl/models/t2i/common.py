"""Pieces every generator shares: request checks, prompt text, per-request generators, output
resizing and the per-image generation record (seed, steps, size, latency, peak memory)."""

from __future__ import annotations

import resource
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Optional, Sequence

import cv2
import numpy as np

from icl.models.base import RequestRefused  # noqa: F401  (re-exported: generators import it from here)
from icl.models.requests import GenerationRequest
from icl.models.weights import resolve_weights

PRECISION_DTYPES = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class GenerationRecord:
    """How one image was made. ``size`` is the ``(h, w)`` the model generated, ``output_size``
    what it returned (the request's size). ``latency_s`` is the batch's wall time divided by
    its ``batch`` images; ``peak_bytes`` the batch's peak (``memory`` says which counter:
    ``cuda-max-allocated`` or ``process-max-rss``; None for remote models); ``guidance`` the
    classifier-free guidance weight used (None where the model has none). The runner stores
    each record with its response (``icl.store`` ``responses.generation``)."""

    request_id: str
    seed: int
    steps: Optional[int]
    size: tuple[int, int]
    output_size: tuple[int, int]
    latency_s: float
    batch: int
    peak_bytes: Optional[int]
    memory: Optional[str]
    guidance: Optional[float] = None


class PretrainedFolder:
    """Mixin of adapters loading one ``from_pretrained`` folder, found by the file
    ``folder_marker`` inside it (``weights`` argument, else ``$ICL_WEIGHTS_DIR/<name>/``); the
    folder's digest is part of the model's identity."""

    name: ClassVar[str]
    folder_marker: ClassVar[str] = "config.json"
    # the files a ``weights=hf:...`` reference downloads (None: icl.models.hub.DEFAULT_PATTERNS)
    hub_patterns: ClassVar[Optional[tuple[str, ...]]] = None
    weights: Optional[str]

    @property
    def folder(self) -> Path:
        found = resolve_weights(self.name, self.weights, self.folder_marker, self.hub_patterns)
        return found.parent if found.is_file() else found

    def weight_files(self) -> Sequence[Path]:
        return (self.folder,)


def torch_dtype(precision: str) -> Any:
    import torch

    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    if precision not in dtypes:
        raise ValueError(f"precision must be one of {', '.join(dtypes)}, got {precision!r}")
    return dtypes[precision]


def check_generation(request: Any, adapter: str) -> GenerationRequest:
    """``request`` after checking it is a well-formed GenerationRequest (uint8 ``[H, W, 3]``
    images, a positive size); a ValueError names the request and the part."""
    if not isinstance(request, GenerationRequest):
        raise ValueError(f"{adapter}: serves GenerationRequest, got {type(request).__name__}")
    for i, part in enumerate(request.prompt):
        if isinstance(part, np.ndarray):
            if part.dtype != np.uint8 or part.ndim != 3 or part.shape[2] != 3 or min(part.shape[:2]) < 1:
                raise ValueError(f"{adapter}: request {request.id!r} prompt[{i}]: expected a uint8 [H, W, 3] "
                                 f"image, got {part.dtype} {list(part.shape)}")
        elif not isinstance(part, str):
            raise ValueError(f"{adapter}: request {request.id!r} prompt[{i}]: expected str or image, "
                             f"got {type(part).__name__}")
    if request.size is not None and (len(request.size) != 2 or min(request.size) < 1):
        raise ValueError(f"{adapter}: request {request.id!r}: size must be (h, w) >= 1, got {request.size}")
    return request


def prompt_text(request: GenerationRequest) -> str:
    """The request's text parts joined by single spaces (each stripped), images left out."""
    return " ".join(p.strip() for p in request.prompt if isinstance(p, str) and p.strip())


def refuse_images(request: GenerationRequest, adapter: str) -> Optional[str]:
    """Why a text-only model refuses a request with images (None when it has none)."""
    n = len(request.images)
    if not n:
        return None
    return (f"{adapter}: request {request.id!r} holds {n} image(s), but this model generates "
                          f"from text only; run the benchmark's text-only variant or pick a model that takes "
                          f"images (janus, qwen-image-edit, flux-kontext, openai-images)")


def seed_of(request: GenerationRequest) -> int:
    """The request's seed as a torch generator takes it (non-negative, below 2**63)."""
    return int(request.seed) % (1 << 63)


def cpu_generator(seed: int) -> Any:
    """A CPU generator of its own for one request: noise never depends on the device, the
    batch or the order the request ran in."""
    import torch

    return torch.Generator("cpu").manual_seed(seed)


def to_size(image: np.ndarray, size: Optional[tuple[int, int]]) -> np.ndarray:
    """uint8 ``[h, w, 3]`` of a float ``[H, W, 3]`` image in [0, 1] (or uint8), resized to
    ``size`` = ``(h, w)`` (area averaging when shrinking, bicubic when enlarging), then rounded
    by PROTOCOL §1.3: ``rint(255 * clip(x, 0, 1))``."""
    x: Any = image.astype(np.float32) / 255.0 if image.dtype == np.uint8 else image.astype(np.float32)
    if size is not None and tuple(x.shape[:2]) != tuple(size):
        h, w = int(size[0]), int(size[1])
        shrink = h * w < x.shape[0] * x.shape[1]
        x = cv2.resize(x, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)
    return np.rint(255.0 * np.clip(x.astype(np.float64), 0.0, 1.0)).astype(np.uint8)


def _max_rss() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


class Recorder:
    """Per-image :class:`GenerationRecord` s: ``with recorder.batch(device) as done:`` around
    one batch, then ``done(request, seed, steps, size, output_size[, guidance])`` per image."""

    def __init__(self) -> None:
        self.records: list[GenerationRecord] = []

    @contextmanager
    def batch(self, device: Optional[str]) -> Iterator[Any]:
        pending: list[tuple] = []
        cuda = bool(device) and str(device).startswith("cuda")
        if cuda:
            import torch

            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        yield lambda *fields: pending.append(fields)
        if cuda:
            import torch

            torch.cuda.synchronize(device)
            peak: Optional[int] = int(torch.cuda.max_memory_allocated(device))
            kind: Optional[str] = "cuda-max-allocated"
        elif device is None:
            peak, kind = None, None
        else:
            peak, kind = _max_rss(), "process-max-rss"
        per = (time.perf_counter() - t0) / max(len(pending), 1)
        for request, seed, steps, size, output_size, *guidance in pending:
            self.records.append(GenerationRecord(request.id, seed, steps, tuple(size), tuple(output_size), per,
                                                 len(pending), peak, kind, *guidance))


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
