"""Fixtures for runner tests: the fast built-in data, a plugin dist for subprocesses, and
readers of a run's store (real SQLite, read-only)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# As ``python -m icl.run`` does: device evaluation runs OpenMP regions from two threads, and
# idle teams spinning (the default) starve the other thread. Effective only when set before
# torch is first imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def fast_data(builtin_root) -> Path:
    """A data root holding the fast built-in datasets (generated once per session)."""
    return builtin_root


@pytest.fixture
def data_copy(fast_data, tmp_path, own_cache) -> Path:
    """A private copy of the fast data (for tests that corrupt files): the data root and the
    icl cache where the built-ins live (``$ICL_CACHE`` points at the copy)."""
    dst = tmp_path / "data"
    shutil.copytree(fast_data, dst)
    return dst


@pytest.fixture(scope="session")
def plugin_env(tmp_path_factory) -> dict:
    """Environment for ``python -m icl.run`` subprocesses: the repository on the path and a
    dist-info declaring the test adapters in the ``icl.models`` entry-point group."""
    site = tmp_path_factory.mktemp("plugin-site")
    dist = site / "icl_test_adapters-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-test-adapters\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(
        "[icl.models]\n"
        "counting = tests.run._adapters:Counting\n"
        "bad-shape = tests.run._adapters:BadShape\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def icl_run(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "icl.run", *args]


def item_fields(key: str) -> tuple[str, str, str, int]:
    """(dataset, task, query, shots) of a vibe item key ``ds@v/task@v/query/kK/cHASH/sSEED``."""
    ds, task, query, k = key.split("/")[:4]
    if "/swap:" in key:  # a replaced-context item of the diagnostics: the query id its request carries
        query = f"{query}/context-of:{key.split('/swap:')[1].split('/')[0]}"
    return ds.split("@")[0], task.split("@")[0], query, int(k[1:])


def score_rows(db: Path) -> list[tuple]:
    """Every stored score as (item_key, model label, status, reason, metrics JSON, error);
    [] while the store does not exist yet."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            return con.execute(
                "SELECT s.item_key, m.label, s.status, s.reason, s.metrics, s.error FROM scores s "
                "JOIN models m ON m.model_id = s.model_id ORDER BY s.item_key, m.label").fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:  # not created yet
        return []


def metrics_by_key(db: Path) -> dict[tuple[str, str], tuple[str, dict]]:
    """{(item_key, label): (status, metrics)}."""
    return {(k, m): (s, json.loads(j)) for k, m, s, _, j, _ in score_rows(db)}
