"""Model outputs -> stored responses and back.

Text answers are kept as they are. Image answers (AnalogyRequest, GenerationRequest) become
uint8 ``[H, W, 3]`` by PROTOCOL §1.3 (``rint(255 * clip(x, 0, 1))`` in float64 for float
outputs; NaN or infinity makes the output invalid) and are stored as PNG, so that what
``rescore`` reads back is exactly what the run scored. Tensor outputs are converted on their
device and stay there for device-side scoring; the host copy is what the store keeps.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import cv2
import numpy as np

from icl._text import unicode_problem
from icl.models.requests import ChatRequest

MAX_OUTPUT_PIXELS = 64 * 2**20  # an answer larger than this is refused, whatever the request


class InvalidOutput(ValueError):
    """A model output that cannot be an answer to its request."""


def is_tensor(x: Any) -> bool:
    return hasattr(x, "detach") and hasattr(x, "device")


def expects_text(request: Any) -> bool:
    return isinstance(request, ChatRequest)


def max_pixels(request: Any) -> int:
    """The largest answer accepted: 16x the largest image the request shows or asks for."""
    sizes = [getattr(request, "target_size", None), getattr(request, "size", None)]
    areas = [h * w for s in sizes if s for h, w in [s]]
    for name in ("query", "context_inputs", "context_outputs", "prompt", "images"):
        v: Any = getattr(request, name, None)
        for img in (v if isinstance(v, (list, tuple)) else [v]):
            if hasattr(img, "shape") and len(img.shape) >= 2:
                areas.append(int(img.shape[0]) * int(img.shape[1]))
    return min(MAX_OUTPUT_PIXELS, 16 * max(areas)) if areas else MAX_OUTPUT_PIXELS


def to_uint8_image(output: Any, limit: int = MAX_OUTPUT_PIXELS) -> Any:
    """A uint8 ``[H, W, 3]`` image (numpy, or a tensor on the output's device)."""
    if not (isinstance(output, np.ndarray) or is_tensor(output)):
        raise InvalidOutput(f"expected an image (numpy array or torch tensor), got {type(output).__name__}")
    shape = tuple(output.shape)
    if len(shape) != 3 or shape[2] != 3 or shape[0] < 1 or shape[1] < 1:
        raise InvalidOutput(f"expected an image of shape [H, W, 3], got shape {list(shape)}")
    if shape[0] * shape[1] > limit:
        raise InvalidOutput(f"image of {shape[0]}x{shape[1]} pixels is larger than the request allows ({limit} pixels)")
    if is_tensor(output):
        import torch

        t = output.detach()
        if t.dtype == torch.uint8:
            return t
        if not t.is_floating_point():
            raise InvalidOutput(f"expected uint8 or floating point values, got {t.dtype}")
        t = t.to(torch.float64 if t.device.type == "cpu" else torch.float32)
        if not bool(torch.isfinite(t).all()):
            raise InvalidOutput("image contains NaN or infinite values")
        # float32 on a GPU: rint(255 * x) of a value held in fp16/bf16/fp32 rounds the same
        # except within 2^-24 of a half level, where the host's float64 decides
        return torch.round(t.clamp(0, 1) * 255).to(torch.uint8)
    if output.dtype == np.uint8:
        return output
    if output.dtype.kind != "f":
        raise InvalidOutput(f"expected uint8 or floating point values, got {output.dtype}")
    x = output.astype(np.float64)
    if not np.isfinite(x).all():
        raise InvalidOutput("image contains NaN or infinite values")
    return np.rint(255.0 * np.clip(x, 0.0, 1.0)).astype(np.uint8)


def to_host(image: Any) -> np.ndarray:
    if is_tensor(image):
        return np.ascontiguousarray(image.detach().cpu().numpy())
    return np.ascontiguousarray(image)


def encode_png(image: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(image[:, :, ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, 1])
    if not ok:
        raise InvalidOutput(f"could not encode an image of shape {list(image.shape)} as PNG")
    return buf.tobytes()


def decode_png(body: bytes) -> np.ndarray:
    img = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise InvalidOutput("stored PNG response cannot be decoded")
    return np.ascontiguousarray(img[:, :, ::-1])


def to_text(output: Any) -> str:
    """A text answer as it is; one that is not valid Unicode (a lone surrogate, which a server's
    legal JSON escape ``"\\ud800"`` decodes to and no file or database can hold) is invalid: it
    fails that item only (the run's per-item failure policy; a rerun asks again)."""
    if not isinstance(output, str):
        raise InvalidOutput(f"expected a str answer, got {type(output).__name__}")
    bad = unicode_problem(output)
    if bad:
        raise InvalidOutput(f"the text answer is {bad}")
    return output


def stored(kind: str, body: Union[str, bytes, None]) -> Any:
    """The response a benchmark scores, from what the store keeps."""
    if kind == "text":
        return body
    if kind == "png":
        if not isinstance(body, bytes):  # a row written by something else: the same failure as bad bytes
            raise InvalidOutput("stored PNG response cannot be decoded")
        return decode_png(body)
    return None
