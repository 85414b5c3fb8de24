"""``icl.models.vicl._load``'s reading of pickled checkpoints without unpickling them: the globals
a pickle names (``pickletools.genops``) and whether ``torch.load(weights_only=True)`` reads a
file that is a pickle from its first byte, checked against torch.load itself on real files."""

from __future__ import annotations

import argparse
import io
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from icl.models.vicl._load import LEGACY_MAGIC, SAFE_GLOBALS, pickle_globals, pickle_refusal


def test_the_legacy_magic_number_is_torch_s():
    assert LEGACY_MAGIC == torch.serialization.MAGIC_NUMBER == 0x1950A86A20F9469CFC6C


def test_stack_global_names_come_from_the_strings_before_it_and_the_memo():
    """Protocol 4 pushes module and name as strings and memoises them: the second ``numpy`` global
    names its module from the memo."""
    buffer = io.BytesIO(pickle.dumps({"w": np.zeros(2, np.float32)}, protocol=4))
    names = pickle_globals(buffer)
    assert "STACK_GLOBAL numpy.ndarray" in names and "STACK_GLOBAL numpy.dtype" in names, names
    assert pickle_globals(io.BytesIO(pickle.dumps(argparse.Namespace(a=1), protocol=2))) == ["argparse.Namespace"]
    with pytest.raises(ValueError):
        pickle_globals(io.BytesIO(pickle.dumps(list(range(100)), protocol=2)[:40]))


def _save(path: Path, how: str) -> Path:
    state = {"model": {"w": torch.zeros(2, 3)}, "args": argparse.Namespace(lr=1.0)}
    if how == "legacy":
        torch.save(state, path, _use_new_zipfile_serialization=False)
    elif how == "legacy-object":
        torch.save({**state, "path": Path("x")}, path, _use_new_zipfile_serialization=False)
    elif how == "legacy-stack-global":  # the legacy layout at protocol 4: weights_only reads no STACK_GLOBAL
        torch.save(state, path, _use_new_zipfile_serialization=False, pickle_protocol=4)
    elif how in ("bare-2", "bare-4"):
        path.write_bytes(pickle.dumps(state, protocol=int(how[-1])))
    elif how == "bare-plain":  # only allowed globals (none): torch takes the dict for the magic number
        path.write_bytes(pickle.dumps({"w": 1}, protocol=2))
    return path


@pytest.mark.parametrize("how", ["legacy", "legacy-object", "legacy-stack-global", "bare-2", "bare-4", "bare-plain"])
def test_the_refusal_agrees_with_torch_load(how, tmp_path):
    path = _save(tmp_path / f"{how}.pth", how)
    why = pickle_refusal(path, SAFE_GLOBALS)
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            torch.load(path, weights_only=True)
        loads = True
    except Exception:
        loads = False
    assert (why is None) == loads, (how, why)
    if how.startswith("bare"):
        assert why.startswith(f"{path}: a bare pickle, not a torch.save checkpoint"), why
    elif not loads:
        assert why.startswith(f"{path}: torch's legacy (pre-1.6) format whose pickle names "), why
