"""icl.models.requests: content hashes of requests."""

import numpy as np

from icl.models.requests import AnalogyRequest, ChatRequest, content_hash


def _analogy(oracle_target: object) -> AnalogyRequest:
    image = np.zeros((2, 2, 3), np.uint8)
    return AnalogyRequest("task", "data", "q0", [image], [image], image, (2, 2), oracle_target=oracle_target)


def test_an_empty_array_hashes_and_its_shape_tells_it_apart() -> None:
    # an encoded target with nothing in it (e.g. no boxes) is a legitimate field value
    empty_boxes, empty_points = np.zeros((0, 4)), np.zeros((4, 0))
    h = content_hash(_analogy(empty_boxes))
    assert h == content_hash(_analogy(np.zeros((0, 4))))
    assert h != content_hash(_analogy(empty_points))
    assert h != content_hash(_analogy(np.zeros((0, 4), np.float32)))


def test_array_hash_follows_the_bytes_not_the_layout() -> None:
    a = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    strided = np.asfortranarray(a)
    assert content_hash(ChatRequest.user("r", a, "what?")) == content_hash(ChatRequest.user("r", strided, "what?"))
    b = a.copy()
    b[1, 3, 2] += 1
    assert content_hash(ChatRequest.user("r", a, "what?")) != content_hash(ChatRequest.user("r", b, "what?"))
