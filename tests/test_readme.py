"""Every ``python -m icl.run vlicl`` and ``best50`` command the README shows runs as written and
exits 0 (issue 19), with the README's placeholders (weight folders, the release folder, the
package, the server address) replaced by real local stand-ins: a tiny LLaVA checkpoint built
with the official transformers classes (``icl.models.vlm.tiny``), a fabricated copy of
the published VL-ICL layout (``tests/benchmarks/vlicl/conftest.py``), a best50 package in the
format of its README and an OpenAI-compatible server on 127.0.0.1 (``vlm_chat_server.py``)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_commands(benchmark: str) -> list[str]:
    """The README's ``python -m icl.run BENCHMARK ...`` lines (comments stripped), in order, with
    the ``python -m icl.run merge ...`` lines of the same block (they merge its shard runs)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        mine = False
        for line in block.splitlines():
            cmd = line.split("  #", 1)[0].strip()
            if cmd.startswith(f"python -m icl.run {benchmark} "):
                out.append(cmd)
                mine = True
            elif mine and cmd.startswith("python -m icl.run merge "):
                out.append(cmd)
    return out


def test_the_readme_shows_the_commands_this_file_runs():
    assert len(readme_commands("vlicl")) >= 3 and len(readme_commands("best50")) >= 3
    assert any(c.startswith("python -m icl.run merge ") for c in readme_commands("best50"))


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """Placeholders of the README -> local stand-ins, and the OpenAI-compatible server."""
    from icl.benchmarks.best50.synthetic import write_package
    from icl.models.vlm.hf import HFVisionLanguage
    from tests.benchmarks.vlicl.conftest import make_release
    from icl.models.vlm.tiny import build_llava
    from tests.models.vlm.vlm_chat_server import ChatServer

    base = tmp_path_factory.mktemp("readme")
    tiny = build_llava(base / "tiny-llava", max_positions=2048)
    release = make_release(base / "VL-ICL")
    package = write_package(base / "PKG", n_per_class=1, classes=("car", "dog"), ks=(1, 2))
    preds = base / "preds.jsonl"
    with open(preds, "w") as f:
        for path in sorted((package / "inputs").glob("inputs_k*.jsonl")):
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                f.write(json.dumps({k: rec[k] for k in ("k", "sample_id", "class", "query_gt_boxes_pixel",
                                                      "query_image_size")}
                                   | {"response": "<bbox_start><x10><y10><x500><y500><bbox_end>"}) + "\n")
    model = HFVisionLanguage(weights=str(tiny))
    model.load("cpu")
    with ChatServer(model, lifetime_s=600) as server:
        yield {"/w/qwen2-vl-7b": str(tiny), "/w/judge": str(tiny), "/w/qwen2.5-vl": str(tiny),
               "/data/VL-ICL": str(release), "http://127.0.0.1:8000/v1": server.base_url,
               "PKG": str(package), "preds.jsonl": str(preds)}


def _substitute(cmd: str, stand_ins: dict) -> list[str]:
    words = shlex.split(cmd)
    out = []
    for w in words:
        for key, value in stand_ins.items():
            w = value if w == key else w.replace(key, value) if key.startswith(("/", "http")) else w
        out.append(w)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("bench", ["vlicl", "best50"])
def test_readme_commands_run_as_written(bench, stand_ins, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MY_KEY": "sk-readme-test", "ICL_DATA_ROOT": str(tmp_path / "d")}
    for cmd in readme_commands(bench):
        argv = _substitute(cmd, stand_ins)
        assert argv[:3] == ["python", "-m", "icl.run"]
        common = [] if argv[3] == "merge" else ["--no-progress", "--device", "cpu"]
        proc = subprocess.run([sys.executable, *argv[1:], *common], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{cmd}\n{proc.stderr[-3000:]}"
        assert "items computed" in proc.stdout, cmd
