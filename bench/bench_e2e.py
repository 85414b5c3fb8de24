"""End-to-end wall time of real runs, split by stage: where an evaluation's time goes.

Each scenario runs ``python -m icl.run ...`` in a fresh process (imports and start-up count)
into a fresh folder. Inside it, timers wrap the stages by name (only those the code under test
has, so an older checkout is measured the same way, ``--root``):

- ``startup_s``: process start to ``run()`` (interpreter, imports, argument parsing);
- ``plan_s``, ``execute_s``, ``summarise_s``, ``plots_s``: the runner's own timings
  (results.json; ``plots_s`` measured here when the runner does not record it);
- inside ``execute``: ``score_batch_s`` (the benchmark's scoring, all metrics), and in it
  ``lpips_s``, ``psnr_s``, ``ssim_s``; ``decode_s`` (model outputs to images); ``store_s``
  (SQLite writes); model time is execute less these (instant models: about 0);
- ``wall_s``: the whole process, start to exit;
- work done in helper processes (:mod:`icl.helpers`: host LPIPS, figures) as the helpers
  report it (``helper <target>`` in the JSON); ``lpips_s`` counts the LPIPS helper's seconds too;
- the measured checkout's bytecode is compiled first (as an installed package's is);
- ``steal``: the share of the machine's CPU time the hypervisor took away during the run
  (``/proc/stat``). A shared virtual machine can lose 15-25% of it: compare runs taken under low
  steal, interleaved (before, after, before...).

Timers add busy time: with scoring on worker threads a stage's seconds can overlap others.
Usage: ``python bench/bench_e2e.py [--root DIR] [--only NAME,...] [--json OUT]``. The
"before" numbers come from the same script with ``--root`` at an older checkout; ``--against
DIR --pairs N`` (or ``--against COMMIT``: that commit of this repository, exported) runs the two
checkouts alternately, N pairs per scenario, and prints each pair's wall time, CPU time (the
process and the helpers it waited for) and peak resident memory (the largest of those), their
ratios and medians (``--only vibe-fast-identity --against <checkout of 35d1349>``: issue 29's
end-to-end target).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

SCENARIOS: dict[str, list[str]] = {
    "vibe-fast-identity": ["vibe", "--fast", "--models", "identity"],
    "vibe-fast-identity-no-plots": ["vibe", "--fast", "--models", "identity", "--no-plots"],
    # the work a run did before issue 26 (no context-sensitivity items, no per-sample log); SVGs,
    # intervals and report.html remain
    "vibe-fast-identity-lean": ["vibe", "--fast", "--models", "identity", "--sensitivity-fraction", "0",
                                "--log-samples", "false"],
    "vibe-fast": ["vibe", "--fast"],
    "best50-fast": ["best50", "--fast"],
    "vlicl-fast": ["vlicl", "--fast"],
    "all-fast": ["--fast"],
    # 384 items (192 per shot count) with an instant model: the runner's cost per item
    "vibe-384-identity": ["vibe", "--fast", "--models", "identity", "--shots", "1,2"],
}

# stage -> (module, attribute path) of functions to time, where they exist
TIMED: dict[str, list[tuple[str, str]]] = {
    "lpips_s": [("icl.ops.lpips", "lpips"), ("icl.ops.lpips", "lpips_each")],
    "psnr_s": [("icl.ops.psnr", "psnr"), ("icl.ops", "psnr")],
    "ssim_s": [("icl.ops.ssim", "ssim"), ("icl.ops", "ssim")],
    "decode_s": [("icl.run.execution.responses", "to_uint8_image"), ("icl.run.execution.responses", "decode_png")],
    "store_s": [("icl.store.sqlite", "Store.write_batch"), ("icl.store.sqlite", "Store.scores")],
    "score_batch_s": [("icl.benchmarks.vibe.benchmark", "Vibe.score_batch"),
                      ("icl.benchmarks.best50.benchmark", "Best50.score_batch"),
                      ("icl.benchmarks.vlicl.benchmark", "VLICL.score_batch")],
    "plots_timed_s": [("icl.benchmarks.vibe.benchmark", "Vibe.plots"),
                      ("icl.benchmarks.best50.benchmark", "Best50.plots"),
                      ("icl.benchmarks.vlicl.benchmark", "VLICL.plots")],
}


def _process_age() -> float:
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")


def _install_timers(spent: dict[str, float]) -> None:
    import importlib.abc
    import importlib.machinery

    lock = threading.Lock()
    local = threading.local()  # nested timed calls of one stage count once

    def wrap(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(local, stage, 0)
            setattr(local, stage, depth + 1)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                setattr(local, stage, depth)
                if depth == 0:
                    with lock:
                        spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - t
        timed.__wrapped__ = fn  # type: ignore[attr-defined]
        return timed

    def install(module: str) -> None:
        for stage, targets in TIMED.items():
            for mod, path in targets:
                if mod != module:
                    continue
                owner: Any = sys.modules[module]
                try:
                    *parents, name = path.split(".")
                    for p in parents:
                        owner = getattr(owner, p)
                    fn = getattr(owner, name)
                except AttributeError:
                    continue
                setattr(owner, name, wrap(stage, fn))

    # wrap each timed module when the run imports it, never before: importing them here would
    # put their imports (torch, for icl.ops.lpips) into every run, those that never need them too
    wanted = {mod for targets in TIMED.values() for mod, _ in targets}
    for module in wanted & set(sys.modules):
        install(module)

    class _TimeOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
            if fullname not in wanted:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None or spec.loader is None:
                return spec
            run_module = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                run_module(module)
                install(fullname)

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _TimeOnImport())


def child(argv: list[str], report: Path) -> int:
    spent: dict[str, float] = {}
    _install_timers(spent)
    from icl.run.__main__ import main

    status = main(argv)
    helpers = sys.modules.get("icl.helpers")
    for target, seconds in (helpers.busy_seconds() if helpers is not None else {}).items():
        # work done in helper processes (icl.helpers), which the timers here do not see
        spent[f"helper {target}"] = seconds
        if target.endswith(":lpips_each"):
            spent["lpips_s"] = spent.get("lpips_s", 0.0) + seconds
    out = Path(argv[argv.index("--out") + 1])
    timings: dict[str, Any] = {}
    for results in sorted(out.rglob("results.json")):
        data = json.loads(results.read_text())
        for k, v in (data.get("timings") or {}).items():
            # several benchmarks in one process (python -m icl.run --fast): stages add up, the
            # start-up is the first run's (the later ones count the earlier runs as theirs)
            timings[k] = min(timings.get(k, v), v) if k == "startup_s" else timings.get(k, 0.0) + v
        timings["model_s"] = timings.get("model_s", 0.0) + sum(
            c.get("wall_s", 0.0) for c in data.get("compute") or [] if c.get("stage") != "score")
    report.write_text(json.dumps({"status": status, "wall_s": _process_age(), "runner": timings, "timed": spent}))
    return 0


def _cpu_ticks() -> list[int]:
    """The machine's CPU time counters (``/proc/stat``: user, nice, system, idle, iowait, irq,
    softirq, steal), or an empty list where there are none."""
    try:
        with open("/proc/stat") as f:
            return [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return []


def run_scenario(name: str, root: Path, data_root: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"e2e-{name}-") as tmp:
        report = Path(tmp) / "report.json"
        argv = [*SCENARIOS[name], "--out", str(Path(tmp) / "out"), "--no-progress"]
        if data_root is not None:
            argv += ["--data-root", str(data_root)]
        env = {**os.environ, "PYTHONPATH": str(root), "PYTHONWARNINGS": "ignore"}
        t, ticks = time.perf_counter(), _cpu_ticks()
        log = Path(tmp) / "stderr.txt"
        with open(os.devnull, "wb") as devnull, open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, __file__, "--child", str(report), "--", *argv], env=env,
                                    cwd=tmp, stdout=devnull, stderr=err)
            # wait4: the process's own resource use (CPU of it and of the helpers it waited for, its
            # peak resident memory), which subprocess does not hand out
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        outside = time.perf_counter() - t
        spent = [b - a for a, b in zip(ticks, _cpu_ticks())]
        if proc.returncode or not report.is_file():
            raise SystemExit(f"{name}: exit {proc.returncode}\n{log.read_text(errors='replace')[-3000:]}")
        got: dict[str, Any] = json.loads(report.read_text())
        got["outside_s"] = outside
        got["cpu_s"] = usage.ru_utime + usage.ru_stime
        got["peak_rss_mb"] = usage.ru_maxrss / 1024  # Linux reports KiB
        if len(spent) == 8 and sum(spent):  # the hypervisor's share: time the run's CPUs were taken away
            got["steal_share"] = spent[7] / sum(spent)
        return got


def compare(names: list[str], before: Path, after: Path, pairs: int, data_root: Path | None,
            out: Path | None) -> int:
    """Each scenario ``pairs`` times in ``before`` then in ``after``, alternating, so that a
    machine whose speed drifts slows both alike; prints each pair's wall times and ratio (before
    over after: above 1, after is faster), the steal share, and the median and range."""
    import statistics

    if pairs < 1:
        raise SystemExit("--pairs must be at least 1")
    results: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        rows = results[name] = []
        for i in range(pairs):
            b = run_scenario(name, before, data_root)
            a = run_scenario(name, after, data_root)
            ratio = b["wall_s"] / a["wall_s"]
            steal = max(b.get("steal_share", 0.0), a.get("steal_share", 0.0))
            rows.append(dict(before_s=b["wall_s"], after_s=a["wall_s"], ratio=ratio, steal=steal,
                             before_cpu_s=b["cpu_s"], after_cpu_s=a["cpu_s"], cpu_ratio=b["cpu_s"] / a["cpu_s"],
                             before_rss_mb=b["peak_rss_mb"], after_rss_mb=a["peak_rss_mb"],
                             rss_ratio=b["peak_rss_mb"] / a["peak_rss_mb"]))
            print(f"{name:20s} pair {i + 1}: before {b['wall_s']:5.2f} s, after {a['wall_s']:5.2f} s, "
                  f"ratio {ratio:4.2f}x | cpu {b['cpu_s']:5.2f} s / {a['cpu_s']:5.2f} s | peak rss "
                  f"{b['peak_rss_mb']:4.0f} MB / {a['peak_rss_mb']:4.0f} MB | steal {steal:.0%}", flush=True)
        for key, what in (("ratio", "wall"), ("cpu_ratio", "cpu"), ("rss_ratio", "peak rss")):
            ratios = [r[key] for r in rows]
            label = "median" if key == "ratio" else f"{what} median"
            print(f"{name:20s} {label} {statistics.median(ratios):4.2f}x over {len(ratios)} pairs "
                  f"(range {min(ratios):4.2f}-{max(ratios):4.2f}x)", flush=True)
    if out:
        out.write_text(json.dumps(results, indent=2))
    return 0


def checkout(against: str, root: Path, tmp: Path) -> Path:
    """The "before" checkout: ``against`` itself when it is a folder, else the files of the git
    commit ``against`` of ``root``'s repository exported into ``tmp`` (``git archive``), with
    ``root``'s built native modules (``icl/_C*.so``, never committed) copied beside them: a
    comparison of the Python code, both sides on the same native build."""
    if Path(against).is_dir():
        return Path(against)
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", against], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"--against {against}: neither a folder nor a commit of {root} "
                         f"({archive.stderr.decode(errors='replace').strip().splitlines()[-1:]})")
    before = tmp / "before"
    before.mkdir()
    subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
    import shutil

    for native in (root / "icl").glob("_C*.so"):
        shutil.copy2(native, before / "icl" / native.name)
    return before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout to measure (default: this one)")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="built-in data cache (default: the runner's); a cold cache times data generation too")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--against", default=None, metavar="DIR|COMMIT",
                        help="a before/after comparison: each scenario run --pairs times, alternately in the "
                             "checkout DIR or the git COMMIT of --root's repository (before) and in --root (after); "
                             "prints every pair's wall, CPU and peak-memory ratios and their medians")
    parser.add_argument("--pairs", type=int, default=5, help="interleaved pairs per scenario with --against")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child is not None:
        return child([a for a in rest if a != "--"], args.child)
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    # an installed package has its modules' bytecode (pip compiles it at install); a checkout run
    # under PYTHONDONTWRITEBYTECODE would compile icl's modules from source in every process
    # (0.1-0.2 s of a run here), so both checkouts of a before/after get theirs first
    import compileall

    if args.against is not None:
        with tempfile.TemporaryDirectory(prefix="e2e-against-") as tmp:
            before = checkout(args.against, args.root, Path(tmp))
            for root in (args.root, before):
                compileall.compile_dir(str(root / "icl"), quiet=1)
            return compare(names, before, args.root, args.pairs, args.data_root, args.json)
    compileall.compile_dir(str(args.root / "icl"), quiet=1)
    results = {}
    for name in names:
        r = run_scenario(name, args.root, args.data_root)
        results[name] = r
        t, timed = r["runner"], r["timed"]
        # the runner's own figure time where it records one (from starting the figures to having
        # them: with helper processes, Benchmark.plots only hands them out), else the timer's
        plots = t.get("plots_s", timed.get("plots_timed_s", 0.0))
        # start-up: what precedes run(), from the runner when it records it; else the rest of
        # the wall time (report_s is not in results.json: it ends after the file is written)
        r["startup_s"] = t.get("startup_s", r["wall_s"] - t.get("plan_s", 0) - t.get("execute_s", 0)
                               - t.get("summarise_s", 0) - plots)
        lp = timed.get("lpips_s", 0.0)
        print(f"{name:20s} wall {r['wall_s']:6.1f} s | startup {r['startup_s']:5.1f} plan {t.get('plan_s', 0):5.1f} "
              f"execute {t.get('execute_s', 0):5.1f} (score {timed.get('score_batch_s', 0):5.1f}: lpips {lp:5.1f} "
              f"psnr {timed.get('psnr_s', 0):4.2f} ssim {timed.get('ssim_s', 0):4.2f}; decode "
              f"{timed.get('decode_s', 0):4.2f} store {timed.get('store_s', 0):4.2f}) tables "
              f"{t.get('summarise_s', 0):4.2f} plots {plots:5.1f} | lpips {lp / r['wall_s']:.0%} of wall"
              + (f" | steal {r['steal_share']:.0%}" if "steal_share" in r else ""), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
