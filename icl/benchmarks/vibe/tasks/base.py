"""The task interface (PROTOCOL §1.2-1.3): build the model's input, encode targets as images,
validate, decode and score predictions.

A task knows nothing about files or models: it takes :class:`icl.data.Sample` objects and
prediction arrays. Decoding and scoring go through the public kernels of :mod:`icl.ops`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from icl.helpers import resolved
from icl.benchmarks.vibe.tasks.errors import PredictionError as PredictionError, is_tensor as is_tensor
from icl.data.dataset import TASK_PARTS, DatasetMeta, Sample
from icl.data.geometry import resize_image as resize_image, resize_nearest as resize_nearest


class EncodingError(ValueError):
    """A target that the task's encoding cannot draw (e.g. boxes that fit no channel)."""


@dataclass(frozen=True)
class PointsTarget:
    """Visible keypoints ``points`` float64 [N, 2] as (x, y) pixels, of an image of ``size`` (h, w)."""

    points: np.ndarray
    size: tuple[int, int]


@dataclass(frozen=True)
class BoxesTarget:
    """Boxes float64 [N, 4] (x0, y0, x1, y1; x1/y1 exclusive) with ``classes`` int64 [N], image ``size`` (h, w)."""

    boxes: np.ndarray
    classes: np.ndarray
    size: tuple[int, int]


@dataclass
class Episode:
    """Everything one analogy needs: the query's input and target, and per context its input,
    target and encoded target (``c_out``)."""

    query_input: np.ndarray
    target: Any
    context_inputs: list[np.ndarray]
    context_targets: list[Any]
    context_outputs: list[np.ndarray]


def all_tensors(predictions: Any) -> bool:
    """Whether a batch is all torch tensors (a ``[B, H, W, 3]`` tensor counts)."""
    return is_tensor(predictions) or all(is_tensor(p) for p in predictions)


def validate_prediction(index: int, pred: Any) -> np.ndarray:
    """PROTOCOL §1.3: a prediction must be ``[h, w, 3]`` uint8, or float and finite, which becomes
    ``rint(255 * clip(x, 0, 1))`` computed in float64 (values outside [0, 1] are clipped, not
    rejected; NaN or infinity makes the prediction invalid). Returns uint8."""
    if hasattr(pred, "detach") and hasattr(pred, "cpu"):  # torch tensor, without importing torch
        pred = pred.detach().cpu()
        pred = (pred.double() if pred.is_floating_point() else pred).numpy()
    if not isinstance(pred, np.ndarray):
        raise PredictionError(index, f"expected a numpy array or torch tensor, got {type(pred).__name__}")
    if pred.ndim != 3 or pred.shape[2] != 3:
        raise PredictionError(index, f"expected shape [h, w, 3], got {tuple(pred.shape)}")
    if pred.shape[0] < 1 or pred.shape[1] < 1:
        raise PredictionError(index, f"empty image of shape {tuple(pred.shape)}")
    if pred.dtype == np.uint8:
        return pred
    if not np.issubdtype(pred.dtype, np.floating):
        raise PredictionError(index, f"expected uint8 or float, got dtype {pred.dtype}")
    return float_to_uint8(index, pred)


def float_to_uint8(index: int, pred: np.ndarray) -> np.ndarray:
    """``rint(255 * clip(x, 0, 1))`` in float64 (half to even); :class:`PredictionError` for NaN/inf."""
    x = pred.astype(np.float64)
    if not np.isfinite(x).all():
        raise PredictionError(index, "contains NaN or infinite values")
    return np.rint(np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)


def scale_points(xy: np.ndarray, src: tuple[int, int], dst: tuple[int, int]) -> np.ndarray:
    """Pixel coordinates (x, y) [N, 2] from an image of size ``src`` to ``dst`` (h, w), pixel centres aligned."""
    sy, sx = dst[0] / src[0], dst[1] / src[1]
    out = np.asarray(xy, np.float64).reshape(-1, 2).copy()
    out[:, 0] = (out[:, 0] + 0.5) * sx - 0.5
    out[:, 1] = (out[:, 1] + 0.5) * sy - 0.5
    return out


def scale_boxes(boxes: np.ndarray, src: tuple[int, int], dst: tuple[int, int]) -> np.ndarray:
    """Box edges (x0, y0, x1, y1) [N, 4] from an image of size ``src`` to ``dst`` (h, w)."""
    sy, sx = dst[0] / src[0], dst[1] / src[1]
    return np.asarray(boxes, np.float64).reshape(-1, 4) * np.array([sx, sy, sx, sy])


def precision_recall_f1(tp: int, n_pred: int, n_gt: int) -> dict[str, float]:
    """PROTOCOL §1.3 zero-division rules: P with no prediction is 0 (1 if the GT is empty too);
    R with an empty GT is 1 when there is no prediction, else 0; F1 of P = R = 0 is 0."""
    precision = tp / n_pred if n_pred else (1.0 if n_gt == 0 else 0.0)
    recall = tp / n_gt if n_gt else (1.0 if n_pred == 0 else 0.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1)}


class Task(ABC):
    """One task of the visual in-context benchmark (see module docstring)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    metrics: ClassVar[tuple[str, ...]]
    lower_is_better: ClassVar[frozenset[str]] = frozenset()
    rank_metrics: ClassVar[tuple[str, ...]]
    semantic: ClassVar[bool] = False  # class-aware context selection
    paper_task: ClassVar[str]  # the paper's task category (it counts 12)

    def __repr__(self) -> str:
        return f"<task {self.name} v{self.version}>"

    @property
    def parts(self) -> tuple[str, ...]:
        """Annotation parts this task reads (``Dataset.load(..., parts=task.parts)``)."""
        return TASK_PARTS[self.name]

    def applies_to(self, meta: DatasetMeta) -> bool:
        """Whether the dataset declares this task."""
        return self.name in meta.tasks

    def check_sample(self, sample: Sample, meta: DatasetMeta) -> str | None:
        """None when the sample can be used for this task, else the reason it is filtered out."""
        return None

    def oracle_ceiling(self, target: Any, context_targets: Sequence[Any], meta: DatasetMeta) -> str | None:
        """Why the oracle (the encoded target, decoded back) cannot score perfectly on this
        sample, i.e. the encoding's ceiling there (PROTOCOL §1.4), or None where the round trip
        is lossless. Reports call the oracle's scores on flagged samples its ceiling."""
        return None

    @abstractmethod
    def make_pair(self, sample: Sample, global_seed: int, *, query: Sample | None = None) -> tuple[np.ndarray, Any]:
        """``(input uint8 [H, W, 3], target)`` for ``sample``. ``query``: the query this sample
        is a context for (tasks whose context inputs depend on the query use it; inpainting)."""

    @abstractmethod
    def encode(self, target: Any, meta: DatasetMeta) -> np.ndarray:
        """The target drawn as the image a model should output: uint8 [h, w, 3]."""

    def target_size(self, target: Any) -> tuple[int, int]:
        """(h, w) of the encoded target."""
        size = getattr(target, "size", None)
        return tuple(size) if isinstance(size, tuple) else tuple(np.asarray(target).shape[:2])  # type: ignore[return-value]

    def make_episode(self, query: Sample, contexts: Sequence[Sample], global_seed: int, meta: DatasetMeta) -> Episode:
        """Query input/target and context inputs/targets/encoded targets, protocol-exact."""
        q_in, target = self.make_pair(query, global_seed)
        c_in, c_tgt, c_out = [], [], []
        for ctx in contexts:
            x, t = self.make_pair(ctx, global_seed, query=query)
            c_in.append(x)
            c_tgt.append(t)
            c_out.append(self.encode(t, meta))
        return Episode(q_in, target, c_in, c_tgt, c_out)

    def evaluate(
        self, predictions: Sequence[Any], targets: Sequence[Any], context_targets: Sequence[Sequence[Any]],
        meta: DatasetMeta, *, device: Any = None, defer: bool = False,
    ) -> list[dict[str, float]]:
        """Validate, decode and score a batch; one dict of ``metrics`` per prediction.
        Raises :class:`PredictionError` for an invalid prediction. ``defer``: values computed
        elsewhere may be returned as :class:`icl.helpers.Deferred` (``float()`` waits for
        them), so that the caller's other work overlaps them; else every value is a number.

        Numpy predictions are scored on the host. When every prediction is a torch tensor (a
        ``[B, H, W, 3]`` tensor counts), or ``device`` is given (numpy predictions are then
        moved there), the batch is validated, decoded and scored on that device, same-size
        predictions together (see :mod:`icl.benchmarks.vibe.tasks._device`)."""
        if not len(predictions) == len(targets) == len(context_targets):
            raise ValueError(
                f"evaluate: {len(predictions)} predictions, {len(targets)} targets, "
                f"{len(context_targets)} context target lists; expected equal lengths"
            )
        if len(predictions) and (device is not None or all_tensors(predictions)):
            from icl.benchmarks.vibe.tasks._device import validate_tensors

            batch = validate_tensors(predictions, device)
            return self._score_device(batch, list(targets), [list(c) for c in context_targets], meta)
        preds = [validate_prediction(i, p) for i, p in enumerate(predictions)]
        scores = self._score(preds, list(targets), [list(c) for c in context_targets], meta)
        return scores if defer else resolved(scores)

    @abstractmethod
    def _score(
        self, preds: list[np.ndarray], targets: list[Any], context_targets: list[list[Any]], meta: DatasetMeta
    ) -> list[dict[str, float]]:
        """Score validated uint8 predictions."""

    def _score_device(
        self, batch: Any, targets: list[Any], context_targets: list[list[Any]], meta: DatasetMeta
    ) -> list[dict[str, float]]:
        """Score a validated :class:`icl.benchmarks.vibe.tasks._device.DeviceBatch`; tasks without a device
        implementation score its host copy."""
        return self._score(batch.host(), targets, context_targets, meta)
