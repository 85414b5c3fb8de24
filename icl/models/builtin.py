"""Built-in baselines (PROTOCOL §1.4): oracle, copy-target, identity."""

from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from icl.models.base import Adapter, AnalogyRequest


class Oracle(Adapter):
    """Returns the encoded ground truth: the round-trip test of every task's decoder."""

    name = "oracle"
    version = "1"
    batch_size = 64
    privileged = True

    def predict(self, requests: Sequence[AnalogyRequest]) -> list[np.ndarray]:
        out = []
        for req in requests:
            if req.oracle_target is None:
                raise ValueError(f"oracle: request for {req.task}/{req.dataset}/{req.query_id} has no oracle_target")
            out.append(req.oracle_target)
        return out


class CopyTarget(Adapter):
    """``c_out`` of the first context, resized to the query size with nearest neighbour."""

    name = "copy-target"
    version = "1"
    batch_size = 64

    def predict(self, requests: Sequence[AnalogyRequest]) -> list[np.ndarray]:
        out = []
        for req in requests:
            if not req.context_outputs:
                raise ValueError(f"copy-target: request for {req.task}/{req.dataset}/{req.query_id} has no context")
            h, w = req.query.shape[:2]
            c_out = req.context_outputs[0]
            same = c_out.shape[:2] == (h, w)
            out.append(c_out if same else cv2.resize(c_out, (w, h), interpolation=cv2.INTER_NEAREST))
        return out


class Identity(Adapter):
    """Returns the query unchanged: the 'hands the input through' baseline."""

    name = "identity"
    version = "1"
    batch_size = 64

    def predict(self, requests: Sequence[AnalogyRequest]) -> list[np.ndarray]:
        return [req.query for req in requests]
