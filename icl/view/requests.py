"""What the model saw: a run's requests rebuilt from its benchmark, in a helper process.

The store keeps answers and scores, not the images a request carried. This helper opens the run's
benchmark as results.json records it (``RunConfig.from_resolved``, ``open_benchmark``: the data
must be where the run read it), builds the request of an item (privileged, for its target) and
writes its images as PNGs into the viewer's cache. It runs in its own process, started by the
server on the first item page of a run and kept for the next ones, so the server itself never
imports torch or a benchmark (its memory stays small) and a benchmark that fails or hangs costs
one line on the page.

    python -m icl.view.requests RUN_DIR IMAGE_DIR     # item keys in, one JSON line each out
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Optional

from icl.store.atomic import write_bytes


def _png(image: Any, folder: Path) -> dict[str, Any]:
    import cv2
    import numpy as np

    rgb = np.ascontiguousarray(np.asarray(image))
    if rgb.ndim == 2:
        rgb = np.repeat(rgb[:, :, None], 3, axis=2)
    if rgb.dtype != np.uint8:
        rgb = np.clip(rgb.astype(np.float64) * (255.0 if rgb.max(initial=0) <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    ok, data = cv2.imencode(".png", cv2.cvtColor(rgb[:, :, :3], cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError("PNG encoding failed")
    name = hashlib.sha256(data.tobytes()).hexdigest()[:32] + ".png"
    path = folder / name
    if not path.exists():
        write_bytes(path, data.tobytes(), durable=False)  # whole or absent
    return {"src": name, "w": int(rgb.shape[1]), "h": int(rgb.shape[0])}


def describe(request: Any, folder: Path) -> dict[str, Any]:
    """``{"parts": [...], "target": ...}``: the request's text and images in the order the model
    gets them (``{"text"}`` or ``{"label", "src"}`` parts) and its ground truth when it carries one."""
    from icl.models.requests import AnalogyRequest, ChatRequest, GenerationRequest

    parts: list[dict[str, Any]] = []
    target: Optional[dict[str, Any]] = None

    def content(items: Any) -> None:
        for part in items:
            parts.append({"text": part} if isinstance(part, str) else {"label": "image", **_png(part, folder)})

    if isinstance(request, AnalogyRequest):
        for i, (x, y) in enumerate(zip(request.context_inputs, request.context_outputs), 1):
            parts.append({"label": f"context {i}: input", **_png(x, folder)})
            parts.append({"label": f"context {i}: output", **_png(y, folder)})
        parts.append({"label": "query", **_png(request.query, folder)})
        if request.oracle_target is not None:
            target = {"label": "target", **_png(request.oracle_target, folder)}
    elif isinstance(request, ChatRequest):
        for message in request.messages:
            parts.append({"text": f"[{message.role}]"})
            content(message.content)
        if request.oracle_answer is not None:
            target = {"text": request.oracle_answer}
    elif isinstance(request, GenerationRequest):
        content(request.prompt)
    else:
        parts.append({"text": f"({type(request).__name__}: not shown)"})
    return {"parts": parts, "target": target}


def open_benchmark(config: Any) -> Any:
    """The run's benchmark, opened by the runner's own function (:mod:`icl.run.planning.setup`)."""
    from icl.run.planning.setup import open_benchmark as opener

    return opener(config)


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    run_dir, folder = Path(args[0]), Path(args[1])
    folder.mkdir(parents=True, exist_ok=True)
    bench, items, problem = None, {}, ""
    try:
        from icl.run import RunConfig

        meta = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
        bench = open_benchmark(RunConfig.from_resolved(meta["config"]))
        items = {it.key: it for it in bench.items()}
    except Exception as exc:  # any reason the benchmark cannot be opened here is the answer to every item
        problem = f"the run's benchmark cannot be opened here ({type(exc).__name__}: {exc})"
    for line in sys.stdin:
        try:
            key = json.loads(line)["key"]
            if problem:
                out: dict[str, Any] = {"error": problem}
            elif key not in items:
                out = {"error": "the item is not in the plan the benchmark makes now"}
            else:
                out = describe(bench.request(items[key], True), folder)  # type: ignore[union-attr]
        except Exception as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


class Helper:
    """The helper process of one run, started on first use; ``ask`` returns its answer for an
    item or ``{"error": ...}`` (a helper that times out or dies is stopped, and started again by
    the next call)."""

    def __init__(self, run_dir: Path, folder: Path):
        self.run_dir, self.folder = run_dir, folder
        self._proc: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()

    def ask(self, key: str, timeout: float = 180.0) -> dict[str, Any]:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                root = str(Path(__file__).resolve().parents[2])  # this icl, whatever the working folder
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
                self._proc = subprocess.Popen([sys.executable, "-m", "icl.view.requests", str(self.run_dir),
                                               str(self.folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL, text=True, env=env)
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None
            line, timed_out = "", False
            try:
                proc.stdin.write(json.dumps({"key": key}) + "\n")
                proc.stdin.flush()
                ready, _, _ = select.select([proc.stdout], [], [], timeout)
                timed_out = not ready
                line = proc.stdout.readline() if ready else ""
            except OSError:  # the helper is gone (a broken pipe)
                pass
            if not line:
                self.stop()
                return {"error": f"no answer from the helper within {timeout:.0f} s" if timed_out
                        else "the helper stopped"}
            try:
                answer = json.loads(line)
            except ValueError:
                return {"error": "the helper's answer was not JSON"}
            return answer if isinstance(answer, dict) else {"error": "the helper's answer was not an object"}

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
