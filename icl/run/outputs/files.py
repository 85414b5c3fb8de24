"""The common files every run writes: one CSV per summary table, results.json, report.md,
report.html and plots/. Each file is written to a unique temporary name beside it and renamed
(:mod:`icl.store.atomic`), so a killed run never leaves a truncated file behind.

A run's output folder belongs to one benchmark and holds no links: :func:`claim_folder`
(called while holding the folder's lock) refuses a folder holding another benchmark's run or
any symbolic link (a benchmark's own writer might follow it), and removes the temporary files
of a killed writer. Every benchmark needs its own ``--out``; ``--fast`` without a benchmark
gives each its own sub-folder.

Files a benchmark writes itself (its artifacts such as ``contexts.csv``, its plots and sample
images) are written into a private staging folder inside ``out`` (:func:`staged`, a fresh
``mkdtemp`` name) and then moved to their places with ``os.replace``: whatever writer the
benchmark uses, each file appears whole, and a link planted under its name is replaced, never
written through.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

from icl.benchmarks.base import Benchmark
from icl.report.schema import COLUMNS, COMPARISON_COLUMNS
from icl.report.reproduction import COLUMNS as REPRODUCTION_COLUMNS
from icl.report.reproduction import markdown as reproduction_markdown
from icl.report.html import report_html, report_title, synthetic_note
from icl.report.tables import csv_text, jsonable
from icl.store.atomic import STAGING_PREFIX, OutputWriteError, remove_stale_temporaries, write_text
from icl.run.errors import ConfigError
from icl.run.outputs.meta import git_revision, package_versions
from icl.run.scaleout.shard import note as shard_note
from icl.store import Failure
from icl.store.sqlite import stored_benchmarks

DEFAULT_STORE = "store.sqlite"
COMMON_COLUMNS = {"results": COLUMNS, "comparisons": COMPARISON_COLUMNS, "reproduction": REPRODUCTION_COLUMNS}


INCOMPLETE = "INCOMPLETE"


@contextmanager
def replacing(out: Path, command: Optional[Sequence[str]]) -> Iterator[None]:
    """Around the writing of a run's output files (a run's, a ``rescore``'s, a ``merge``'s):
    ``out/INCOMPLETE`` says so first, naming the command, and is removed only once the last
    file (report.html) is in place. A writer cut short (a signal, a full disk, a kill) leaves it:
    the folder then holds files of two runs (a new results.json beside the old report.html),
    and says so; rerunning the command finishes the set (and removes one left by another)."""
    marker = out / INCOMPLETE
    out.mkdir(parents=True, exist_ok=True)
    words = " ".join(command or ["python -m icl.run"])
    write_text(marker, f"This folder's output files are being replaced by: {words}\n"
                       f"(started {time.strftime('%Y-%m-%d %H:%M:%S')}). While this file is here, they are not one "
                       f"set: results.json, the tables, the figures, report.md and report.html may come from "
                       f"different runs. Run the same command again to finish them.\n")
    yield
    marker.unlink(missing_ok=True)


def claim_folder(out: Path, benchmark: str) -> None:
    """Make ``out`` ready for ``benchmark``'s files, or raise :class:`ConfigError` (one line):
    no symbolic link anywhere under it, no other benchmark's run (its results.json, or a run
    its store.sqlite records for this folder); then remove stale temporary files. Call it
    while holding the folder's lock."""
    why = folder_refusal(out, benchmark)
    if why is not None:
        raise ConfigError(why)
    remove_stale_temporaries(out)


def folder_refusal(out: Path, benchmark: str) -> Optional[str]:
    """Why :func:`claim_folder` would refuse ``out`` for ``benchmark`` (None: it would not);
    reads only (``--check`` asks it too)."""
    for root, dirs, names in os.walk(out):  # links to folders are listed, never entered
        for name in sorted(dirs + names):
            p = Path(root) / name
            if p.is_symlink():
                return (f"output folder {out} holds a symbolic link {p.relative_to(out)} (to "
                        f"{os.readlink(p)}); icl never writes through links: remove it or choose "
                        f"another output folder (--out)")
    others = set()
    try:
        recorded = json.loads((out / "results.json").read_text(encoding="utf-8"))
        if isinstance(recorded, dict) and isinstance(recorded.get("benchmark"), str):
            others.add(recorded["benchmark"])
    except (OSError, ValueError):  # none yet (or unreadable: rewritten by this run)
        pass
    others |= stored_benchmarks(out / DEFAULT_STORE, out)  # runs of this folder (a shared store may hold others)
    others.discard(benchmark)
    if others:
        return (f"output folder {out} holds a {', '.join(sorted(others))} run; every benchmark needs its "
                f"own output folder: choose another --out (--fast gives each benchmark its own sub-folder)")
    return None


@contextmanager
def staged(out: Path) -> Iterator[Callable[[Path], Path]]:
    """A private folder inside ``out`` for a benchmark's own writers: yields ``stage(path)``,
    which maps a path under ``out`` to its place in the staging folder. When the block ends
    every file written there replaces its namesake under ``out`` (``os.replace``); the staging
    folder is removed either way. Use :func:`published` for the final paths."""
    folder = Path(tempfile.mkdtemp(dir=out, prefix=STAGING_PREFIX))
    try:
        yield lambda path: folder / Path(path).relative_to(out)
        for root, _dirs, names in os.walk(folder):
            for name in sorted(names):
                src = Path(root) / name
                if src.is_symlink():  # a writer never makes links; one is not published
                    continue
                dst = out / src.relative_to(folder)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def published(out: Path, stage_folder: Path, paths: Sequence[Path]) -> list[Path]:
    """``paths`` written under the staging folder ``stage_folder``, as their places under ``out``."""
    return [out / Path(p).relative_to(stage_folder) for p in paths]


def write_artifacts(bench: Benchmark, out: Path) -> dict[str, str]:
    """The benchmark's frozen lists written into ``out`` through a staging folder (:func:`staged`)."""
    with staged(out) as stage:
        return dict(bench.write_artifacts(stage(out)))


def provenance() -> dict[str, Any]:
    """Git revision (or the installed version), library versions, backends that ran, CUDA."""
    import icl

    from icl._lazy import plugin_distributions

    info: dict[str, Any] = dict(git_revision=git_revision(), icl_version=icl.__version__,
                                packages=package_versions(), plugins=plugin_distributions(),
                                created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    for name in ("transformers", "diffusers"):
        if name in sys.modules:  # recorded when a model used them
            info["packages"][name] = getattr(sys.modules[name], "__version__", None)
    from icl._modules import imported

    torch = imported("torch")  # not one still being imported by another thread
    if torch is not None:
        cuda = dict(torch=torch.__version__, cuda=torch.version.cuda)
        if torch.cuda.is_initialized():
            cuda["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda"] = cuda
    if "icl.ops" in sys.modules:  # the backend that ran each kernel in this process
        info["backends"] = sys.modules["icl.ops"].backends_used()
    return info


class Plots:
    """A benchmark's figures on their way (:func:`start_plots`): ``Benchmark.plots`` has run and
    may have handed its figures to helper processes (it returns paths, or jobs whose
    ``result()`` is a list of paths), so that the run writes its other files meanwhile.
    :meth:`files` waits for them and publishes them from the staging folder; :meth:`abandon`
    (a run that fails before) waits for them and publishes nothing."""

    def __init__(self, out: Path, bench: Benchmark, tables: Mapping[str, list[dict[str, Any]]],
                 answers: Optional[Callable[[str], dict[str, Any]]], enabled: bool) -> None:
        from contextlib import ExitStack

        self.out, self.started = out, time.perf_counter()
        self._stack = ExitStack()
        self._parts: list[Any] = []
        if not enabled:
            return
        out.mkdir(parents=True, exist_ok=True)
        stage = self._stack.enter_context(staged(out))  # the benchmark's own writers: whole files, never a link
        self._stage = stage(out)
        try:
            self._parts = list(bench.plots(tables, stage(out / "plots"), answers))
        except BaseException:
            self.abandon()
            raise

    def files(self) -> list[Path]:
        """The figures' paths under ``out``, in the benchmark's order, once all are written."""
        from icl.report.plots import collect

        try:
            paths = collect(self._parts)
        except OutputWriteError as exc:  # a figure that could not be written, named where it was to go
            self.abandon()
            raise self._named_for_out(exc) from None
        except BaseException:
            self.abandon()
            raise
        self._stack.close()  # publishes the staging folder
        return published(self.out, self._stage, paths) if self._parts else []

    def _named_for_out(self, exc: OutputWriteError) -> OutputWriteError:
        """``exc`` naming the figure's place under ``out``, not the staging folder (removed)."""
        try:
            place = published(self.out, self._stage, [exc.path])[0]
        except (AttributeError, ValueError, TypeError):  # not a file of the staging folder
            return exc
        return OutputWriteError(place, OSError(exc.errno, exc.strerror))

    def abandon(self) -> None:
        """Nothing published; the figure helpers are given 2 s, then killed (a run that stops
        on SIGTERM never waits for a stuck helper), so nothing still writes into the staging
        folder when it is removed; a figure not started is not drawn here."""
        for part in self._parts:
            try:
                if hasattr(part, "settle"):
                    part.settle(2.0)
                elif hasattr(part, "result"):
                    part.result()
            except Exception:
                pass
        self._parts = []
        self._stack.__exit__(RuntimeError, RuntimeError("abandoned"), None)  # removed, nothing published


def start_plots(out: Path, bench: Benchmark, tables: Mapping[str, list[dict[str, Any]]],
                answers: Optional[Callable[[str], dict[str, Any]]], enabled: bool = True) -> Plots:
    """The benchmark's figures, started (see :class:`Plots`); nothing when ``enabled`` is false."""
    return Plots(out, bench, tables, answers, enabled)


def write_outputs(out: Path, bench: Benchmark, tables: Mapping[str, list[dict[str, Any]]], meta: Mapping[str, Any],
                  failures: Sequence[Failure], answers: Optional[Callable[[str], dict[str, Any]]],
                  plots: Union[bool, Plots] = True) -> list[Path]:
    """Write every common file of a run into ``out``; returns their paths. ``plots``: whether to
    draw the figures, or the figures already started (:func:`start_plots`)."""
    out.mkdir(parents=True, exist_ok=True)
    started = plots if isinstance(plots, Plots) else None
    try:
        files = []
        for name, rows in tables.items():
            path = out / f"{name}.csv"
            write_text(path, csv_text(rows, COMMON_COLUMNS.get(name)))  # the common tables: a header even when empty
            files.append(path)
        if started is None:
            started = start_plots(out, bench, tables, answers, bool(plots))
    except BaseException:
        if started is not None:
            started.abandon()
        raise
    plot_files = started.files()
    if isinstance(meta.get("timings"), dict):
        meta["timings"]["plots_s"] = time.perf_counter() - started.started
    data = {**meta, **provenance(), "tables": {n: f"{n}.csv" for n in tables},
            "failures": dict(count=len(failures), items=[f.message for f in failures[:1000]])}
    write_text(out / "results.json", json.dumps(jsonable(data), indent=2, sort_keys=True, allow_nan=False) + "\n")
    files.append(out / "results.json")
    write_text(out / "report.md", report_markdown(bench, tables, data, failures,
                                                  [str(p.relative_to(out)) for p in plot_files if p.suffix != ".svg"]))
    files.append(out / "report.md")
    write_text(out / "report.html", report_html(bench.name, tables, jsonable(data), failures, plot_files, out))
    files.append(out / "report.html")
    return files + list(plot_files)


def report_markdown(bench: Benchmark, tables: Mapping[str, list[dict[str, Any]]], meta: Mapping[str, Any],
                    failures: Sequence[Failure], plots: Sequence[str]) -> str:
    config = meta.get("config", {})
    data = meta.get("data") or {}
    lines = ["# " + report_title(bench.name, meta), ""]  # synthetic data never passed off as the benchmark
    for name, origin in data.items():
        lines.append(f"- **data** `{name}`: {origin}")
    if meta.get("shard"):  # a shard's tables cover its items only
        lines.append(f"- **partial**: {shard_note(meta['shard'])}")
    for key in ("protocol", "git_revision", "icl_version", "created", "device", "run_id"):
        if meta.get(key) is not None:
            lines.append(f"- **{key}**: `{meta[key]}`")
    if config.get("options"):
        lines.append("- **options**: " + ", ".join(f"{k}=`{v}`" for k, v in config["options"].items()))
    for label, m in (meta.get("models") or {}).items():
        lines.append(f"- **model** `{label}`: id `{m['model_id']}`" + (" (reference, not ranked)" if m.get("reference")
                                                                           else ""))
    for label, kinds in (meta.get("not_applicable") or {}).items():
        lines.append(f"- **not applicable** to `{label}` (it does not serve their request type; not scored): "
                     + ", ".join(f"{k} {n} items" for k, n in sorted(kinds.items())))
    for label, cells in (meta.get("refused") or {}).items():
        lines.append(f"- **not applicable** to `{label}` (it refuses them; stored, not scored): "
                     + "; ".join(f"{c} {r['items']} items ({r['why']})" for c, r in sorted(cells.items())))
    for label, why in (meta.get("stopped_models") or {}).items():
        lines.append(f"- **stopped** `{label}`: {why}")
    for j in meta.get("judges") or ([dict(label="judge", judge_id=meta["judge_id"])] if meta.get("judge_id") else []):
        lines.append(f"- **judge** `{j['label']}`: id `{j['judge_id']}`")
    for name, sha in (meta.get("artifacts") or {}).items():
        lines.append(f"- **{name}** SHA-256: `{sha}`")
    counts = meta.get("counts") or {}
    if counts:
        lines.append("- **counts**: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    lines.append("")
    section = bench.report(tables)
    if section:
        lines += [section, ""]
    if "reproduction" in tables:  # the benchmark ships the papers' numbers
        lines += [reproduction_markdown(tables["reproduction"], bool(synthetic_note(data))), ""]
    if failures:
        lines += [f"## Failures ({len(failures)})", ""] + [f"- [{f.stage}] {f.message}" for f in failures[:200]]
        if len(failures) > 200:
            lines.append(f"- ... and {len(failures) - 200} more (see the store's failures table)")
        lines.append("")
    compute = meta.get("compute") or []
    if compute:
        lines += ["## Compute", "", "| model | stage | device | samples | wall s | samples/s | peak memory MiB |",
                  "|---|---|---|---|---|---|---|"]
        for c in compute:
            mem = c.get("peak_memory_bytes")
            mem_s = "-" if mem is None else f"{mem / 2**20:.1f} ({c.get('memory_kind')})"
            rate = c.get("samples_per_s")
            rate_s = "-" if rate is None or not math.isfinite(rate) else f"{rate:.1f}"
            lines.append(f"| {c['model']} | {c['stage']} | {c['device']} | {c['samples']} | {c['wall_s']:.3f} | "
                         f"{rate_s} | {mem_s} |")
        lines.append("")
    per_sample = meta.get("compute_per_sample") or {}
    if per_sample:
        lines += ["## Compute per sample", "", "Model seconds per item are a batch's time over its items; answers "
                  "reused from the store are not measured. Peak memory: the highest of the items' calls "
                  "(counter named); energy from NVML where the GPU reports it.", "",
                  "| model | items | measured | s/item mean | median | p95 | peak memory MiB | energy J/item |",
                  "|---|---|---|---|---|---|---|---|"]
        def num(v: Any, fmt: str) -> str:
            return "-" if v is None else format(v, fmt)

        for label, c in per_sample.items():
            mem = c.get("peak_memory_bytes")
            mem_s = "-" if mem is None else f"{mem / 2**20:.1f} ({c.get('memory_kind')})"
            lines.append(f"| {label} | {c['items']} | {c['measured']} | {num(c.get('model_s_mean'), '.4f')} | "
                         f"{num(c.get('model_s_median'), '.4f')} | {num(c.get('model_s_p95'), '.4f')} | {mem_s} | "
                         f"{num(c.get('energy_j_mean'), '.3f')} |")
        lines.append("")
    if plots:
        lines += ["## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in plots] + [""]
    return "\n".join(lines)
