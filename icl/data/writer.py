"""Write datasets in the canonical format (docs/data-format.md): converters and built-ins use this.

Files are written deterministically (same arrays -> same bytes) so a regenerated dataset is
byte-identical.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

from icl.data.dataset import DatasetMeta


# zlib level 1: ~20% faster to write than level 3 in 3 of 4 runs of bench/bench_convert.py, the
# same size for photographs (a loaded machine: noisy); single-channel maps (class ids) with run-length matching, a fraction of the size
# for the same time; edge maps as 1-bit PNGs (decoded to 0/255, 10x faster to write). All lossless.
PNG_LEVEL = 1


def _write_png(path: Path, arr: np.ndarray, bilevel: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    params = [cv2.IMWRITE_PNG_COMPRESSION, PNG_LEVEL]
    if arr.ndim == 3:
        arr = cv2.cvtColor(np.ascontiguousarray(arr), cv2.COLOR_RGB2BGR)
    elif bilevel:
        params += [cv2.IMWRITE_PNG_BILEVEL, 1]
    else:
        params += [cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE]
    ok, buf = cv2.imencode(".png", arr, params)
    if not ok:
        raise OSError(f"cannot encode {path}")
    path.write_bytes(buf.tobytes())


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n", encoding="utf-8")


class DatasetWriter:
    """Writes ``meta.json`` and per-sample files under ``root``.

    ``add`` takes the same annotation arrays that :class:`icl.data.dataset.Sample` carries.
    """

    def __init__(self, root: str | Path, meta: DatasetMeta):
        self.root = Path(root)
        self.meta = meta
        self.root.mkdir(parents=True, exist_ok=True)
        self.write_meta(meta)

    def write_meta(self, meta: DatasetMeta) -> None:
        """(Re)write ``meta.json``: converters call it again for fields known only after the
        samples, such as a depth range derived from the data."""
        self.meta = meta
        _write_json(self.root / "meta.json", meta.to_json())

    def add(
        self,
        sample_id: str,
        image: np.ndarray,
        *,
        segmentation: np.ndarray | None = None,
        depth: np.ndarray | None = None,
        edges: np.ndarray | None = None,
        keypoints: np.ndarray | None = None,
        boxes: np.ndarray | None = None,
        box_classes: np.ndarray | None = None,
        paired: dict[str, np.ndarray] | None = None,
        paired_info: dict[str, dict[str, Any]] | None = None,
        image_jpeg: bytes | None = None,
    ) -> None:
        """Write one sample: image uint8 [H, W, 3]; segmentation uint8 [H, W]; depth float [H, W]
        metres (-1 invalid; stored as float32 .npy); edges bool [H, W]; keypoints [N, 3] (x, y, v);
        boxes [N, 4] xyxy with box_classes [N]; paired {kind: uint8 [h, w, 3]} with optional
        paired_info {kind: JSON object}. ``image_jpeg``: the bytes of the JPEG file ``image`` was
        decoded from, written as ``images/<id>.jpg`` instead of a PNG (the same pixels once decoded)."""
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"image: expected uint8 [H, W, 3], got {image.dtype} {image.shape}")
        if image_jpeg is not None:
            path = self.root / "images" / f"{sample_id}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_jpeg)
        else:
            _write_png(self.root / "images" / f"{sample_id}.png", image)
        if segmentation is not None:
            _write_png(self.root / "segmentation" / f"{sample_id}.png", segmentation.astype(np.uint8))
        if depth is not None:
            path = self.root / "depth" / f"{sample_id}.npy"
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, np.ascontiguousarray(depth, dtype=np.float32), allow_pickle=False)
        if edges is not None:
            _write_png(self.root / "edges" / f"{sample_id}.png", np.where(edges, 255, 0).astype(np.uint8), bilevel=True)
        if keypoints is not None:
            pts = [[float(x), float(y), int(v)] for x, y, v in np.asarray(keypoints).reshape(-1, 3)]
            _write_json(self.root / "keypoints" / f"{sample_id}.json", {"points": pts})
        if boxes is not None:
            boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
            classes = np.zeros(len(boxes), np.int64) if box_classes is None else np.asarray(box_classes)
            items = [{"box": [float(v) for v in b], "class": int(c)} for b, c in zip(boxes, classes)]
            _write_json(self.root / "boxes" / f"{sample_id}.json", {"boxes": items})
        for kind, img in (paired or {}).items():
            _write_png(self.root / "paired" / kind / f"{sample_id}.png", img)
        for kind, info in (paired_info or {}).items():
            _write_json(self.root / "paired" / kind / f"{sample_id}.json", info)


def build_once(final: Path, build: Callable[[Path], None], marker: str) -> Path:
    """``final``, built by ``build(tmp)`` into a unique temporary folder and renamed into place
    unless ``final / marker`` exists already; concurrent builders race safely (the loser's
    copy is discarded). A ``final`` without ``marker`` (half written by something other than this
    function: a build is only ever renamed into place whole) is moved aside and rebuilt."""
    if not (final / marker).exists():
        tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        stale = final.with_name(f"{final.name}.stale-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            build(tmp)
            if final.exists() and not (final / marker).exists():
                try:
                    os.rename(final, stale)
                except OSError:  # another builder moved it first
                    pass
            try:
                os.rename(tmp, final)
            except OSError:
                if not (final / marker).exists():  # not a lost race: a real failure
                    raise
        finally:
            for leftover in (tmp, stale):
                if leftover.exists():
                    shutil.rmtree(leftover, ignore_errors=True)
    return final
