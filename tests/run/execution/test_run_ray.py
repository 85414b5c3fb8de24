"""``--ray``: a real local Ray cluster on 127.0.0.1 with two CPU workers gives the results of a
single-process run byte for byte (every CSV and per-run file), also when a worker process is
killed mid-run (its batch goes to the other worker) and when the driver is killed (SIGKILL) and
the run resumed; without ``--ray`` nothing imports Ray.

One Ray instance serves the module: started as ``--ray auto`` starts one
(:func:`icl.run.execution.pool.connect`: 127.0.0.1, one CPU per worker), then joined by the in-process runs
and, through ``RAY_ADDRESS``, by the driver subprocess that is killed.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from icl.models import register_model
from icl.models.builtin import Oracle
from icl.models.registry import unregister_model
from icl.run.execution import _ray_watch
from icl.run.planning.config import ModelSpec, RunConfig
from icl.run.runner import run
from icl.run.outputs.samples import stable_digest
from tests.run.conftest import score_rows

ray = pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[3]
BATCH = 3  # DiesOnce.batch_size
WORKERS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray instance (2 CPUs); the workers see this module's marker and log paths."""
    tmp = tmp_path_factory.mktemp("ray")
    paths = dict(ICL_TEST_KILL_MARKER=str(tmp / "kill-a-worker"), ICL_TEST_COUNT_LOG=str(tmp / "answered.log"),
                 ICL_TEST_STOP_MARKER=str(tmp / "stop-a-worker"))
    saved = {k: os.environ.get(k) for k in paths}
    os.environ.update(paths)  # inherited by the raylet, so by every worker
    register_model("dies-once", "tests.run._adapters:DiesOnce")
    register_model("stops-once", "tests.run._adapters:StopsOnce")
    address = os.environ.pop("RAY_ADDRESS", None)
    from icl.run.execution.pool import connect

    assert connect("auto", WORKERS, gpus=False).startswith("a local Ray instance")
    try:
        yield {k: Path(v) for k, v in paths.items()}
    finally:
        ray.shutdown()
        if address is not None:
            os.environ["RAY_ADDRESS"] = address
        unregister_model("dies-once")
        unregister_model("stops-once")
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def clean_best50(tmp_path_factory, builtin_root):
    """The single-process run of best50 (k 1 and 8, 12 questions) with the dying oracle."""
    out = tmp_path_factory.mktemp("clean") / "run"
    outcome = run(_config("best50", out, builtin_root, [ModelSpec("dies-once")]), open(os.devnull, "w"),
                  open(os.devnull, "w"))
    assert outcome.exit_code == 0
    return out, outcome


def _config(bench: str, out: Path, data: Path, models=None, ray_address=None) -> RunConfig:
    options = {"ks": (1, 8), "limit": 12} if bench == "best50" and models and models[0].name in ("dies-once", "stops-once") else {}
    return RunConfig(benchmark=bench, fast=True, data_root=data, out=out, plots=False, progress=False,
                     models=models, options=options, ray=ray_address, workers=WORKERS if ray_address else None)


def _files(out: Path) -> dict[str, bytes]:
    """Every file a run writes that holds results (CSVs, per-sample and prediction files;
    samples.jsonl without each line's compute, measured by whichever process ran the item)."""
    return {p.name: stable_digest(p).encode() if p.name == "samples.jsonl" else p.read_bytes()
            for p in sorted(out.iterdir())
            if p.is_file() and (p.suffix in (".csv", ".jsonl") or p.name.startswith(("predictions", "samples")))}


def _same(a: Path, b: Path) -> None:
    fa, fb = _files(a), _files(b)
    assert fa and set(fa) == set(fb)
    for name in fa:
        assert fa[name] == fb[name], name


def _ray_meta(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())["ray"]


@pytest.mark.slow
@pytest.mark.parametrize("bench", ["vibe", "best50"])
def test_ray_run_equals_the_single_process_run(bench, cluster, tmp_path, builtin_root):
    # best50's default oracle answers its 64 items in one batch: four batches instead
    models = [ModelSpec("oracle", {"batch_size": 16})] if bench == "best50" else None
    single = run(_config(bench, tmp_path / "single", builtin_root, models), open(os.devnull, "w"),
                 open(os.devnull, "w"))
    spread = run(_config(bench, tmp_path / "ray", builtin_root, models, "auto"), open(os.devnull, "w"),
                 open(os.devnull, "w"))
    assert single.exit_code == spread.exit_code == 0
    assert spread.stats.computed == single.stats.computed > 0
    _same(tmp_path / "single", tmp_path / "ray")
    meta = _ray_meta(tmp_path / "ray")
    assert meta["workers"] == WORKERS and len(meta["batches_per_worker"]) == WORKERS  # both workers answered


@pytest.mark.slow
def test_a_killed_worker_changes_nothing(cluster, clean_best50, tmp_path, builtin_root):
    """A worker killed mid-run: with no resends allowed its queued batches fail (and a rerun
    asks them again); with the default, they go to the other worker and nothing fails."""
    models = [ModelSpec("dies-once")]
    marker = cluster["ICL_TEST_KILL_MARKER"]
    out = tmp_path / "ray"
    marker.write_text("")
    config = _config("best50", out, builtin_root, models, "auto")
    config.worker_retries = 0  # the first death fails the batch
    failed = run(config, open(os.devnull, "w"), open(os.devnull, "w"))
    assert not marker.exists() and Path(f"{marker}.taken").exists()  # a worker took it and died
    # the batches queued on the dying worker (up to two) fail whole, the others are answered
    assert failed.exit_code == 1 and failed.failed_items in (BATCH, 2 * BATCH)
    assert {f.message.split(": ", 1)[1] for f in failed.failures} == {
        "ModelFailure: WorkerDied: the batch's Ray worker died on each of its 1 tries (--worker-retries 0; last: "
        "ActorDiedError: The actor died unexpectedly before finishing this task.)"}
    (out / "store.sqlite").unlink()  # the whole run again, a worker killed again
    marker.write_text("")
    spread = run(_config("best50", out, builtin_root, models, "auto"), open(os.devnull, "w"), open(os.devnull, "w"))
    assert not marker.exists()
    assert spread.exit_code == 0 and not spread.failures and spread.stats.computed == clean_best50[1].stats.computed
    _same(clean_best50[0], out)
    assert _ray_meta(out)["replaced_workers"] == 1


def test_a_stopped_worker_is_killed_and_replaced(cluster, clean_best50, tmp_path, builtin_root, monkeypatch, capfd):
    """A worker SIGSTOPped mid-batch answers no heartbeat: after ICL_WORKER_SILENCE_S it is killed
    (one line), its batches go to the other worker, a new one replaces it; results unchanged
    (once: the driver waited for it forever)."""
    monkeypatch.setenv("ICL_WORKER_SILENCE_S", "3")
    marker = cluster["ICL_TEST_STOP_MARKER"]
    marker.write_text("")
    out = tmp_path / "ray"
    result: list = []
    t = threading.Thread(target=lambda: result.append(run(
        _config("best50", out, builtin_root, [ModelSpec("stops-once")], "auto"),
        open(os.devnull, "w"), open(os.devnull, "w"))), daemon=True)
    t.start()
    t.join(120)
    assert result, "the driver still waits for the stopped worker after 120 s"
    assert not marker.exists() and Path(f"{marker}.taken").exists()  # a worker took it and stopped
    outcome = result[0]
    assert outcome.exit_code == 0 and not outcome.failures
    assert outcome.stats.computed == clean_best50[1].stats.computed
    clean = (clean_best50[0] / "results.csv").read_text().replace("dies-once", "stops-once")
    assert (out / "results.csv").read_text() == clean  # the same model under another name: the same table
    assert _ray_meta(out)["replaced_workers"] == 1
    assert capfd.readouterr().err.count("answered no heartbeat for 3 s") == 1


def _answered(log: Path) -> list[str]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.slow
def test_a_killed_driver_resumes_to_the_same_result(cluster, clean_best50, tmp_path, builtin_root):
    site = tmp_path / "site"
    dist = site / "icl_ray_adapter-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-ray-adapter\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[icl.models]\ndies-once = tests.run._adapters:DiesOnce\n")
    log = tmp_path / "killed.log"
    env = {k: v for k, v in os.environ.items() if k != "ICL_TEST_KILL_MARKER"}
    # --ray auto joins the cluster RAY_ADDRESS names; its workers get the driver's PYTHONPATH
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), ICL_TEST_COUNT_LOG=str(log), ICL_TEST_SLEEP="0.2",
               RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    out = tmp_path / "resumed"
    cmd = [sys.executable, "-m", "icl.run", "best50", "--fast", "--models", "dies-once", "--ks", "1,8", "--limit", "12",
           "--out", str(out), "--data-root", str(builtin_root), "--no-plots", "--no-progress", "--ray", "auto",
           "--workers", str(WORKERS)]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while len(score_rows(out / "store.sqlite")) < 2 * BATCH and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)  # killed once two batches are committed
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed = Counter(_answered(log))
    assert (out / "store.sqlite").exists()
    # the rerun joins this module's Ray instance and asks only what was not committed
    resumed_log = cluster["ICL_TEST_COUNT_LOG"]
    before = len(_answered(resumed_log))
    models = [ModelSpec("dies-once")]
    resumed = run(_config("best50", out, builtin_root, models, "auto"), open(os.devnull, "w"), open(os.devnull, "w"))
    assert resumed.exit_code == 0 and resumed.stats.skipped > 0 and resumed.stats.computed > 0
    again = Counter(_answered(resumed_log)[before:])
    _same(clean_best50[0], out)
    planned = clean_best50[1].stats.computed
    assert len(killed) < planned  # killed mid-run
    assert sum((killed + again).values()) >= planned
    # lost at most the batches in flight: two per worker sent ahead, and the one being scored
    assert sum((killed & again).values()) <= (2 * WORKERS + 1) * BATCH


@pytest.mark.slow
def test_without_ray_nothing_imports_it(tmp_path, builtin_root):
    code = ("import sys\nfrom icl.run.__main__ import main\n"
            f"rc = main(['best50', '--fast', '--out', {str(tmp_path / 'run')!r}, '--data-root', {str(builtin_root)!r}, "
            "'--no-plots', '--no-progress'])\n"
            "assert rc == 0, rc\nassert 'ray' not in sys.modules, 'ray was imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("flag", ["--workers", "--judge-workers", "--gpus-per-worker"])
def test_worker_flags_need_ray(flag, capsys):
    from icl.run.__main__ import main

    assert main(["best50", "--fast", flag, "2"]) == 2
    assert capsys.readouterr().err.strip() == f"icl.run: {flag} needs --ray (the models run in this process without it)"


@pytest.mark.slow
def test_a_judged_benchmark_with_the_judge_on_its_own_worker(cluster, tmp_path, builtin_root):
    """cobsat --fast: one worker for the model, one for the judge, the single-process results."""
    single = run(_config("cobsat", tmp_path / "single", builtin_root), open(os.devnull, "w"), open(os.devnull, "w"))
    config = _config("cobsat", tmp_path / "ray", builtin_root, ray_address="auto")
    config.workers, config.judge_workers = 1, 1
    spread = run(config, open(os.devnull, "w"), open(os.devnull, "w"))
    assert single.exit_code == spread.exit_code == 0 and spread.stats.computed == single.stats.computed > 0
    _same(tmp_path / "single", tmp_path / "ray")
    meta = _ray_meta(tmp_path / "ray")
    assert meta["workers"] == 1 and meta["judge"]["workers"] == 1 and sum(meta["judge"]["batches_per_worker"].values())


def test_more_workers_than_the_cluster_has_is_one_line(cluster, tmp_path, builtin_root):
    from icl.run.errors import ConfigError

    config = _config("best50", tmp_path / "run", builtin_root, ray_address="auto")
    config.workers = WORKERS + 1
    with pytest.raises(ConfigError, match=r"--workers 3: needs 3 CPUs and the Ray instance this process joined has 2"):
        run(config, open(os.devnull, "w"), open(os.devnull, "w"))
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_an_address_nothing_answers_at_is_one_line(tmp_path, builtin_root):
    """Ray itself retries such an address for minutes; the run says so at once."""
    import socket

    from icl.run.errors import ConfigError

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = _config("best50", tmp_path / "run", builtin_root, ray_address=f"127.0.0.1:{port}")
    with pytest.raises(ConfigError, match=rf"^--ray 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port} "):
        run(config, open(os.devnull, "w"), open(os.devnull, "w"))
    assert not (tmp_path / "run").exists()


class _Unpicklable(Oracle):
    """An oracle holding a lock: it cannot be pickled, so it cannot be sent to a worker."""

    name = "unpicklable"
    accepts_tensors = False

    def __init__(self):
        self.lock = threading.Lock()


def test_an_adapter_that_cannot_be_sent_stops_its_model_with_one_line(cluster, tmp_path, builtin_root):
    register_model("unpicklable", _Unpicklable, replace=True)
    try:
        err = io.StringIO()
        out = run(_config("best50", tmp_path / "run", builtin_root, [ModelSpec("unpicklable")], "auto"),
                  io.StringIO(), err)
    finally:
        unregister_model("unpicklable")
    assert out.exit_code == 1 and out.stats.stopped["unpicklable"] == (
        "model 'unpicklable' failed to load on worker (not sent): the adapter cannot be sent to a Ray worker "
        "(TypeError: cannot pickle '_thread.lock' object)")
    assert out.stats.model_calls == 0


def _own_instance_driver(tmp_path: Path, builtin_root: Path) -> tuple[subprocess.Popen, Path]:
    """A driver subprocess starting its own local Ray instance (in its own process group, as a
    job step's), once two batches are committed."""
    site = tmp_path / "site"
    dist = site / "icl_ray_term-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: icl-ray-term\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[icl.models]\nslow-oracle = tests.run._kill_adapter:SlowOracle\n")
    log = tmp_path / "answered.log"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "ICL_TEST_KILL_MARKER")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), ICL_TEST_COUNT_LOG=str(log), ICL_TEST_SLEEP="0.3")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "icl.run", "best50", "--fast", "--models", "slow-oracle", "--out", str(out),
           "--data-root", str(builtin_root), "--no-plots", "--no-progress", "--ray", "auto", "--workers", "1"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group, as a job step's
    deadline = time.time() + 120
    while len(score_rows(out / "store.sqlite")) < 2 * BATCH and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None:
        raise AssertionError(proc.stderr.read()[-2000:])
    return proc, out


@pytest.mark.slow  # a driver starting its own local Ray instance, twice
@pytest.mark.parametrize("whom", ["driver", "process group"])
def test_sigterm_stops_a_ray_run_cleanly_with_130(tmp_path, builtin_root, whom):
    """SLURM's SIGTERM (time-out, preemption) to the driver, or to every process of the job step
    (the local Ray instance's raylet and GCS too): icl's clean stop, exit 130 within seconds,
    one line and no crash dump; the batches committed before are kept."""
    proc, out = _own_instance_driver(tmp_path, builtin_root)
    try:
        start = time.monotonic()
        if whom == "driver":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError("SIGTERM did not end the --ray run within 30 s")
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    assert took < 10, took
    assert "icl.run: interrupted" in err and "SIGTERM received" not in err and "Traceback" not in err, err[-3000:]
    assert len(score_rows(out / "store.sqlite")) >= 2 * BATCH  # what finished is kept
    assert not (out / "results.json").exists()


@pytest.mark.slow  # a driver starting its own local Ray instance
def test_losing_the_local_raylet_is_one_line(tmp_path, builtin_root):
    """The local instance's raylet killed (SIGKILL, as the OOM killer would): one line of icl's,
    exit 1, the committed batches kept: said by the run itself, or, when Ray ended the driver
    first (at its next object-store call), by the watcher :func:`icl.run.execution.pool.connect` started."""
    proc, out = _own_instance_driver(tmp_path, builtin_root)
    try:
        raylets = []
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and os.getpgid(int(pid)) == proc.pid and \
                        b"raylet" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                    raylets.append(int(pid))
            except OSError:
                pass
        assert len(raylets) == 1, raylets
        os.kill(raylets[0], signal.SIGKILL)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("the driver did not end within 60 s of losing its raylet")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("icl.run:")]
    assert len(lines) == 1, err[-3000:]
    assert lines[0] in (f"icl.run: --ray: the local Ray instance's raylet (pid {raylets[0]}, exit -9) has ended; "
                        f"the batches committed are kept in the store, rerun the same command to resume",
                        _ray_watch.message("raylet", raylets[0]).rstrip("\n")), err[-3000:]
    assert "Traceback" not in err
    assert len(score_rows(out / "store.sqlite")) >= 2 * BATCH


_ENDED_BY_RAY = """
import os, signal, sys, time
import ray
from icl.run.execution.pool import _local_processes, connect
connect("auto", 1, gpus=False)
raylet = dict(_local_processes())["raylet"]
os.kill(raylet.pid, signal.SIGKILL)
raylet.wait()
print("raylet-pid", raylet.pid, flush=True)
if sys.argv[1] == "object-store":
    ray.put(b"x" * 2**20)  # Ray ends this process here: exit 1, no word of its own
    time.sleep(30)
sys.exit(3)
"""


@pytest.mark.slow  # a driver starting its own local Ray instance, twice
@pytest.mark.parametrize("then", ["object-store", "python-exit"])
def test_a_driver_ray_ends_without_a_word_gets_icls_line(then):
    """Ray ends a driver that lost its raylet at its next object-store call (exit 1, nothing on
    stderr but the object store's log line; its connection.cc "The connection to the plasma
    store is failed. Terminate the process."): the watcher started by ``connect`` says icl's
    line. A driver ending through Python (icl's own line out) gets no second one."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", _ENDED_BY_RAY, then], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120, start_new_session=True)
    # Ray forwards its processes' log lines ("(raylet) A worker died ...") to this stdout too
    said = re.search(r"^raylet-pid (\d+)$", proc.stdout, re.M)
    assert said, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    pid = int(said.group(1))
    lines = [line for line in proc.stderr.splitlines() if line.startswith("icl.run:")]
    if then == "object-store":
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert lines == [f"icl.run: --ray: the local Ray instance's raylet (pid {pid}) has ended, and Ray ended "
                         f"this run without a word (exit 1); the batches committed are kept in the store, rerun "
                         f"the same command to resume"], proc.stderr[-3000:]
    else:
        assert (proc.returncode, lines) == (3, []), proc.stderr[-3000:]
