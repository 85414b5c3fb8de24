"""What the model saw: a request described as its parts in order, images written as PNGs."""

from __future__ import annotations

import cv2
import numpy as np

from icl.models.requests import AnalogyRequest, ChatRequest, Message
from icl.view.requests import describe


def _image(value: int) -> np.ndarray:
    rng = np.random.default_rng(value)
    return rng.integers(0, 256, (8, 12, 3), dtype=np.uint8)


def _read(folder, part) -> np.ndarray:
    return cv2.cvtColor(cv2.imread(str(folder / part["src"])), cv2.COLOR_BGR2RGB)


def test_an_analogy_is_its_pairs_then_the_query_and_the_target(tmp_path):
    images = [_image(i) for i in range(6)]
    request = AnalogyRequest(task="t", dataset="d", query_id="q", context_inputs=images[0:2],
                             context_outputs=images[2:4], query=images[4], target_size=(8, 12),
                             oracle_target=images[5])
    seen = describe(request, tmp_path)
    assert [p["label"] for p in seen["parts"]] == ["context 1: input", "context 1: output", "context 2: input",
                                                   "context 2: output", "query"]
    for part, image in zip(seen["parts"], [images[0], images[2], images[1], images[3], images[4]]):
        assert np.array_equal(_read(tmp_path, part), image) and (part["w"], part["h"]) == (12, 8)
    assert np.array_equal(_read(tmp_path, seen["target"]), images[5])


def test_a_chat_keeps_its_turns_text_and_images_in_order(tmp_path):
    request = ChatRequest(id="c", messages=(Message("user", ("look: ", _image(1), " <b>and</b>")),
                                            Message("assistant", ("fep",))), oracle_answer="zorb")
    seen = describe(request, tmp_path)
    kinds = [p.get("text", p.get("label")) for p in seen["parts"]]
    assert kinds == ["[user]", "look: ", "image", " <b>and</b>", "[assistant]", "fep"]
    assert seen["target"] == {"text": "zorb"}
