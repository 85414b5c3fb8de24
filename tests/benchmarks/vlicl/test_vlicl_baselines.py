"""The weight-free few-shot baselines of icl.models.icl_baselines (generic over chat/generation requests)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from icl.data.seeds import rng as seeded_rng
from icl.models.registry import get_model
from icl.models.requests import AnalogyRequest, ChatRequest, GenerationRequest, Message


def _chat(*answers: str) -> ChatRequest:
    img = np.zeros((4, 4, 3), np.uint8)
    msgs = []
    for a in answers:
        msgs += [Message("user", (img, "q")), Message("assistant", (a,))]
    return ChatRequest("r", tuple(msgs) + (Message("user", (img, "q")),))


def test_copy_last_chat() -> None:
    m = get_model("copy-last")
    assert m.weight_files() == () and m.serves == (ChatRequest, GenerationRequest)
    assert m.predict([_chat("dax", "blicket"), _chat(), _chat("7")]) == ["blicket", "", "7"]


def test_copy_last_generation() -> None:
    m = get_model("copy-last")
    a = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    b = seeded_rng(0, "vlicl-test", "*", "b", "image").integers(0, 256, (5, 7, 3), dtype=np.uint8)
    out = m.predict([GenerationRequest("g", ("x", a, "y", b, "z"), size=(10, 14)),
                     GenerationRequest("h", ("x", a, "z")),
                     GenerationRequest("i", ("only text",), size=(3, 2)),
                     GenerationRequest("j", ("only text",))])
    np.testing.assert_array_equal(out[0], cv2.resize(b, (14, 10), interpolation=cv2.INTER_NEAREST))
    np.testing.assert_array_equal(out[1], a)
    assert out[2].shape == (3, 2, 3) and (out[2] == 128).all()
    assert out[3].shape == (64, 64, 3) and out[3].dtype == np.uint8


def test_frequent_answer() -> None:
    m = get_model("frequent-answer")
    assert m.predict([_chat("a", "b", "a", "c"), _chat("a", "b"), _chat("x", "y", "y", "x"), _chat()]) == [
        "a", "b", "x", ""]


def test_refuses_other_requests() -> None:
    req = AnalogyRequest("t", "d", "q", [], [], np.zeros((2, 2, 3), np.uint8), (2, 2))
    with pytest.raises(TypeError, match="copy-last: cannot answer a AnalogyRequest"):
        get_model("copy-last").predict([req])
    with pytest.raises(TypeError, match="frequent-answer"):
        get_model("frequent-answer").predict([GenerationRequest("g", ("x",))])
