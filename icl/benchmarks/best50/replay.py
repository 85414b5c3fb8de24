"""``best50-predictions``: a model that answers from a predictions JSONL made elsewhere.

Each line's prediction (model text parsed with the package's rule, or ``pred_boxes_pixel``) is
replayed as pixel boxes (:func:`~icl.benchmarks.best50.benchmark.pixel_answer`), so scoring a
file goes through the same runner, store and report as a live model. Lines need ``k`` and
``sample_id``; a request with no line, or with several, fails only its own item (the run then
exits 1 and the report lists it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from icl.models.base import Adapter
from icl.models.requests import ChatRequest


class Replay(Adapter):
    """Replays a predictions file (``path``); its digest is part of the model's identity."""

    name = "best50-predictions"
    version = "1"
    serves = (ChatRequest,)
    batch_size = 256

    def __init__(self, path: str) -> None:
        from icl.benchmarks.best50.benchmark import pixel_answer
        from icl.benchmarks.best50.predictions import load_predictions

        self.path = Path(path)
        preds = load_predictions(self.path)
        anonymous = [r.line for r in preds.records if r.sample_id is None]
        if anonymous:
            raise ValueError(f"{self.path}: {len(anonymous)} line(s) without 'sample_id' (first: line "
                             f"{anonymous[0]}); replaying needs k and sample_id on every line")
        self.answers = {f"k{r.k}/{r.sample_id}": pixel_answer(r.pred) for r in preds.records}
        # a sample answered on several lines is ambiguous: it fails (named) instead of being scored
        self.repeats = {f"k{k}/{sid}": lines for (k, sid), lines in preds.repeats.items()}

    def weight_files(self) -> Sequence[Path]:
        return (self.path,)

    def predict(self, requests: Sequence[ChatRequest]) -> list[Any]:
        out: list[Any] = []
        for r in requests:
            answer = self.answers.get(r.id)
            if r.id in self.repeats:
                out.append(LookupError(f"{self.path}: sample {r.id!r} is answered on lines "
                                       f"{', '.join(map(str, self.repeats[r.id]))}; keep one"))
            elif answer is None:
                out.append(LookupError(f"{self.path}: no prediction for sample {r.id!r}"))
            else:
                out.append(answer)
        return out
