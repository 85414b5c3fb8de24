"""The tiny random LLaVA of ``icl.models.vlm.tiny``: built with the official transformers classes
(``huggingface/transformers`` ``src/transformers/models/llava/modeling_llava.py``
``LlavaForConditionalGeneration``, ``processing_llava.py`` ``LlavaProcessor``), the same bytes for
the same seed; the built-in copy in icl's cache (``tiny-chat-judge``'s weights) is built once, and a
folder without its completion marker, or a killed build's leftover, is never used."""

from __future__ import annotations

import json
import os

import pytest

from icl.models.vlm.tiny import BUILTIN_MARKER, build_llava, builtin_tiny_chat
from icl.models.weights import tree_digest
from icl.run.planning.config import ModelSpec
from icl.run.planning.models import make_model

pytestmark = pytest.mark.slow  # transformers import and model builds: seconds


def test_the_same_seed_writes_the_same_bytes(tmp_path):
    a, b = build_llava(tmp_path / "a"), build_llava(tmp_path / "b")
    assert tree_digest(a) == tree_digest(b)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert tree_digest(build_llava(tmp_path / "c", seed=1)) != tree_digest(a)
    config = json.loads((a / "config.json").read_text())
    assert config["architectures"] == ["LlavaForConditionalGeneration"] and config["model_type"] == "llava"


def test_the_builtin_is_built_once_in_the_cache_and_a_half_built_folder_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ICL_DATA_ROOT", str(tmp_path / "data"))
    folder = builtin_tiny_chat()
    assert folder.parent == tmp_path / "cache" / "builtin" and (folder / BUILTIN_MARKER).is_file()
    assert "random" in json.loads((folder / BUILTIN_MARKER).read_text())["weights"]
    assert not (tmp_path / "data").exists()  # never under the data root
    digest, stamp = tree_digest(folder), (folder / "model.safetensors").stat().st_mtime_ns
    judge = make_model(ModelSpec("tiny-chat-judge"), "cpu")
    assert judge.identity["weights"] == {str(folder): digest}
    assert builtin_tiny_chat() == folder and (folder / "model.safetensors").stat().st_mtime_ns == stamp  # reused
    assert make_model(ModelSpec("tiny-chat-judge"), "cpu").model_id == judge.model_id

    # half built (no marker, truncated weights): rebuilt whole, the same bytes as before
    (folder / BUILTIN_MARKER).unlink()
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert builtin_tiny_chat() == folder and (folder / BUILTIN_MARKER).is_file()
    assert tree_digest(folder) == digest
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # the stale copy is gone

    # a killed build's leftover (a temporary folder, never renamed into place) is not used
    import shutil

    shutil.rmtree(folder)
    leftover = folder.with_name(f"{folder.name}.tmp-{os.getpid()}-deadbeef")
    leftover.mkdir()
    (leftover / "config.json").write_text("{}")
    assert builtin_tiny_chat() == folder and tree_digest(folder) == digest
