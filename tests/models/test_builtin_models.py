import numpy as np
import pytest

from icl.models import AnalogyRequest, get_model


def _request(rng, q_hw=(5, 7), c_hw=(3, 4), oracle=True, k=2):
    c_in = [rng.integers(0, 256, (*c_hw, 3), dtype=np.uint8) for _ in range(k)]
    c_out = [rng.integers(0, 256, (*c_hw, 3), dtype=np.uint8) for _ in range(k)]
    query = rng.integers(0, 256, (*q_hw, 3), dtype=np.uint8)
    target = rng.integers(0, 256, (q_hw[1], q_hw[0], 3), dtype=np.uint8)
    return AnalogyRequest("rotation", "ds", "q1", c_in, c_out, query, target.shape[:2], target if oracle else None)


def test_oracle_returns_encoded_target(rng):
    model = get_model("oracle")
    assert model.privileged
    reqs = [_request(rng), _request(rng)]
    out = model.predict(reqs)
    assert len(out) == 2 and all(o is r.oracle_target for o, r in zip(out, reqs))
    with pytest.raises(ValueError, match="oracle_target"):
        model.predict([_request(rng, oracle=False)])


def test_copy_target_nearest_resize_to_query(rng):
    model = get_model("copy-target")
    assert not model.privileged
    req = _request(rng, q_hw=(6, 8), c_hw=(3, 4))
    (out,) = model.predict([req])
    assert out.shape == (6, 8, 3) and out.dtype == np.uint8
    # exact 2x nearest upscale: every pixel repeated 2x2
    np.testing.assert_array_equal(out, np.repeat(np.repeat(req.context_outputs[0], 2, axis=0), 2, axis=1))
    same = _request(rng, q_hw=(3, 4), c_hw=(3, 4))
    np.testing.assert_array_equal(model.predict([same])[0], same.context_outputs[0])


def test_copy_target_odd_sizes_keeps_palette(rng):
    req = _request(rng, q_hw=(13, 9), c_hw=(5, 11), k=1)
    (out,) = get_model("copy-target").predict([req])
    assert out.shape == (13, 9, 3)
    colours = {tuple(c) for c in req.context_outputs[0].reshape(-1, 3)}
    assert {tuple(c) for c in out.reshape(-1, 3)} <= colours


def test_identity_returns_query(rng):
    reqs = [_request(rng), _request(rng, q_hw=(1, 1))]
    out = get_model("identity").predict(reqs)
    assert all(o is r.query for o, r in zip(out, reqs))


def test_request_is_frozen(rng):
    req = _request(rng)
    assert req.shots == 2
    with pytest.raises(AttributeError):
        req.task = "flip"
