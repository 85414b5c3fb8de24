"""The model identity covers the files its arguments name (issue 28): editing the file behind
``config=`` gives a new model id, so nothing stored for the old contents is reused.

The audit edited the file behind a model's ``config=`` and the run answered "0 computed, N
already in the store" with the old scores.
"""

import json
import subprocess

from icl.run.planning.config import ModelSpec
from icl.run.planning.models import make_model
from tests.reliability._runner_models import Configured
from tests.reliability.test_reliability_runner import _env


def _cmd(out, data, config):
    import sys

    return [sys.executable, "-m", "icl.run", "vibe", "--fast", "--tasks", "flip", "--datasets", "scenes-a",
            "--limit", "2", "--models", f"configured:config={config}", "--out", str(out), "--data-root", str(data),
            "--no-plots", "--no-progress"]


def _model_id(out):
    models = json.loads((out / "results.json").read_text())["models"]
    (entry,) = models.values()
    return entry["model_id"], entry["identity"]


def test_editing_the_file_behind_config_computes_anew(tmp_path, builtin_root):
    """Two real runs into one folder; between them the model's configuration file changes."""
    env = {**_env(tmp_path), "ICL_CACHE": str(tmp_path / "cache")}
    config, out = tmp_path / "model.json", tmp_path / "out"
    config.write_text(json.dumps({"shift": 0}))
    first = subprocess.run(_cmd(out, builtin_root, config), env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "2 items computed, 0 already in the store" in first.stdout
    first_id, identity = _model_id(out)
    assert set(identity["files"]) == {"config"}
    config.write_text(json.dumps({"shift": 9}))
    second = subprocess.run(_cmd(out, builtin_root, config), env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "2 items computed, 0 already in the store" in second.stdout  # not the stale answers
    assert _model_id(out)[0] != first_id


def test_only_existing_regular_files_other_than_weights_enter_the_identity(tmp_path, monkeypatch):
    from icl.models import register_model
    from icl.models.registry import unregister_model

    register_model(Configured.name, Configured, replace=True)
    try:
        (tmp_path / "c.json").write_text("{}")
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("ICL_CACHE", str(tmp_path / "cache"))  # the digest cache, not the user's
        relative = make_model(ModelSpec("configured", {"config": "c.json"}), "cpu")
        absolute = make_model(ModelSpec("configured", {"config": str(tmp_path / "c.json")}), "cpu")
        assert relative.identity["files"] == absolute.identity["files"]
        for not_a_file in ("", "missing.json", str(tmp_path)):
            assert "files" not in make_model(ModelSpec("configured", {"config": not_a_file}), "cpu").identity
    finally:
        unregister_model(Configured.name)
