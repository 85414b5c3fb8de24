"""Run settings, model specifications and their parsing (command line, ``run.toml``, Python).

A model is given as ``NAME`` or ``NAME:key=value,key=value`` (``--models painter:weights=/p/x.pth,
dtype=bf16,copy-target``: a comma followed by ``key=`` continues the arguments of the model before
it) and/or with ``--model-arg NAME:key=value`` (repeatable). Values are read as JSON scalars when
they parse (``3``, ``0.5``, ``true``, ``null``), else kept as strings. Quoting rule: a value that
starts with ``{``, ``[``, ``"`` or ``'`` runs to its matching close, commas included
(``sd:call_args={"guidance_rescale":0.7,"eta":0.5},steps=4``); a value in quotes is the string
inside them (``x="3"`` is the string ``3``, ``x='a,b'`` is ``a,b``).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from icl.run.errors import ConfigError

# Arguments the runner applies to any adapter (unless its __init__ takes them itself).
RUNNER_MODEL_ARGS = ("dtype", "batch_size", "timeout", "published_as")  # never in the identity


@dataclass(frozen=True)
class ModelSpec:
    """A model name and its arguments; ``label`` names it in tables (name, plus the arguments
    when there are any)."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        if not self.args:
            return self.name
        return self.name + "[" + ",".join(f"{k}={_show(v)}" for k, v in sorted(self.args.items())) + "]"


def _show(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def parse_value(text: str) -> Any:
    """A model-argument value: the string inside quotes (``"..."`` or ``'...'``), a JSON scalar when
    it parses, else the string itself (a JSON object or list stays text: its adapter reads it)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        if text[0] == '"':
            try:
                return str(json.loads(text))
            except ValueError:
                pass
        return text[1:-1]
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, bool)) or value is None else text


_ARG = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_CLOSE = {"{": "}", "[": "]", '"': '"', "'": "'"}


def split_models(text: str) -> list[str]:
    """The comma-separated parts of a model list, a value that starts with ``{``, ``[``, ``"`` or
    ``'`` (right after ``=``) kept whole up to its matching close (JSON nesting and quotes inside
    it honoured)."""
    parts: list[str] = []
    stack: list[str] = []  # the closers still open, innermost last
    start, i = 0, 0
    while i < len(text):
        c = text[i]
        if stack and stack[-1] in "\"'":  # inside a quoted string
            if c == "\\" and stack[-1] == '"':
                i += 1
            elif c == stack[-1]:
                stack.pop()
        elif stack:  # inside a JSON object or list
            if c in '{["':
                stack.append(_CLOSE[c])
            elif c in "}]":
                if c != stack[-1]:
                    raise ConfigError(f"model list {text!r}: {c!r} at {i} closes {stack[-1]!r}")
                stack.pop()
        elif c == ",":
            parts.append(text[start:i])
            start = i + 1
        elif c in _CLOSE and i and text[i - 1] == "=":
            stack.append(_CLOSE[c])
        i += 1
    if stack:
        raise ConfigError(f"model list {text!r}: unclosed {stack[0]!r} (a value that starts with {{, [, \" or ' "
                          f"runs to its matching close)")
    return parts + [text[start:]]


def parse_models(text: str) -> list[ModelSpec]:
    """``"a,b:x=1,y=2,c"`` -> [a, b(x=1, y=2), c]; see the module's quoting rule."""
    specs: list[tuple[str, dict[str, Any]]] = []
    for part in (p.strip() for p in split_models(text)):
        if not part:
            continue
        if _ARG.match(part) and specs:  # continues the previous model's arguments
            key, _, value = part.partition("=")
            specs[-1][1][key] = parse_value(value)
            continue
        name, sep, first = part.partition(":")
        name = name.strip()
        if not name:
            raise ConfigError(f"model list {text!r}: empty model name in {part!r}")
        args: dict[str, Any] = {}
        if sep:
            if not _ARG.match(first):
                raise ConfigError(f"model {name!r}: expected key=value after ':', got {first!r}")
            key, _, value = first.partition("=")
            args[key] = parse_value(value)
        specs.append((name, args))
    if not specs:
        raise ConfigError(f"model list {text!r} names no model")
    return [ModelSpec(n, a) for n, a in specs]


def apply_model_args(specs: Sequence[ModelSpec], pairs: Sequence[str]) -> list[ModelSpec]:
    """Add ``NAME:key=value`` (or ``key=value`` for every model) from ``--model-arg``."""
    out = [dict(s.args) for s in specs]
    names = [s.name for s in specs]
    for pair in pairs:
        target, sep, rest = pair.partition(":")
        if sep and not _ARG.match(pair):
            if target not in names:
                raise ConfigError(f"--model-arg {pair!r}: model {target!r} is not in --models ({', '.join(names)})")
            which = [i for i, n in enumerate(names) if n == target]
        else:
            which, rest = list(range(len(specs))), pair
        if not _ARG.match(rest):
            raise ConfigError(f"--model-arg {pair!r}: expected [MODEL:]key=value")
        key, _, value = rest.partition("=")
        for i in which:
            out[i][key] = parse_value(value)
    return [ModelSpec(s.name, a) for s, a in zip(specs, out)]


def parse_shard(text: Any, where: str = "--shard") -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)``: shard I of N, counted from 0 (``0 <= I < N``), as
    ``$SLURM_ARRAY_TASK_ID`` counts with ``sbatch --array=0-(N-1)``."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not match:
        raise ConfigError(f"{where} {text!r}: expected I/N with integers, e.g. 0/4 (shard I of N, counted from 0)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise ConfigError(f"{where} {text!r}: the number of shards N must be at least 1")
    if index >= count:
        raise ConfigError(f"{where} {text!r}: the shard index must be in 0..{count - 1} (counted from 0, as "
                          f"$SLURM_ARRAY_TASK_ID with --array=0-{count - 1})")
    return index, count


def closest(name: str, known: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` when a known name is close, else the known names."""
    near = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    hint = f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""
    return hint + (f"; known: {', '.join(known)}" if known else "")


@dataclass
class RunConfig:
    """Everything one run needs. ``options`` are the benchmark's own settings (its
    ``Benchmark.options``); ``models`` None means the benchmark's defaults."""

    benchmark: str
    options: dict[str, Any] = field(default_factory=dict)
    models: Optional[list[ModelSpec]] = None
    judges: list[ModelSpec] = field(default_factory=list)  # empty: the benchmark's default judge, if any
    fast: bool = False
    data_root: Optional[Path] = None
    name: Optional[str] = None
    out: Optional[Path] = None
    store: Optional[Path] = None
    device: str = "auto"
    dtype: Optional[str] = None
    evaluate: str = "auto"
    overlap: bool = True
    plots: bool = True
    progress: bool = True
    trace_memory: bool = False
    # (I, N): run only the plan items of shard I of N (:mod:`icl.run.scaleout.shard`); None: the whole plan
    shard: Optional[tuple[int, int]] = None
    # samples.jsonl (icl.run.outputs.samples): None is on for runs under 100k planned items x models
    log_samples: Optional[bool] = None
    # scale-out (icl.run.execution.pool): a Ray address, or "auto"; None runs the models in this process
    ray: Optional[str] = None
    workers: Optional[int] = None  # Ray workers (default: one per GPU of the cluster, else one)
    judge_workers: Optional[int] = None  # Ray workers of the judge (None: the judge runs in this process)
    gpus_per_worker: int = 1  # GPUs each model worker sees (a model spread over them with device_map)
    worker_retries: int = 2  # resends of a batch whose worker died, before its items fail
    # --check (``check = true`` in run.toml): check the run, run nothing (icl.run.planning.check); never in results.json
    check: bool = False
    # --calibrate N (with --check): run N items per model without stored compute for real, in a
    # scratch store, to estimate its time (icl.run.planning.check_cost); never in results.json
    calibrate: Optional[int] = None
    command: Optional[list[str]] = None
    # this run is the whole process (one benchmark from the command line): its printed time and
    # results.json's startup_s include the interpreter's start and imports
    whole_process: bool = False

    @property
    def run_name(self) -> str:
        return self.name or (f"{self.benchmark}-fast" if self.fast else self.benchmark)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out is not None else Path("runs") / self.run_name

    @property
    def store_path(self) -> Path:
        return Path(self.store) if self.store is not None else self.out_dir / "store.sqlite"

    def resolved(self) -> dict[str, Any]:
        """Plain data for results.json (and ``rescore``); ``shard`` only when the run is one."""
        shard = {} if self.shard is None else dict(shard=f"{self.shard[0]}/{self.shard[1]}")
        return dict(
            benchmark=self.benchmark, options={k: _plain(v) for k, v in sorted(self.options.items())},
            models=None if self.models is None else [dict(name=m.name, args=dict(m.args)) for m in self.models],
            judges=[dict(name=j.name, args=dict(j.args)) for j in self.judges],
            fast=self.fast, data_root=None if self.data_root is None else str(self.data_root), name=self.run_name,
            out=str(self.out_dir), store=str(self.store_path), device=self.device, dtype=self.dtype,
            evaluate=self.evaluate, overlap=self.overlap, plots=self.plots, log_samples=self.log_samples, **shard,
            **(dict(ray=self.ray, workers=self.workers, judge_workers=self.judge_workers,
                    gpus_per_worker=self.gpus_per_worker, worker_retries=self.worker_retries) if self.ray else {}),
        )

    @classmethod
    def from_resolved(cls, data: Mapping[str, Any]) -> "RunConfig":
        def spec(d: Optional[Mapping[str, Any]]) -> Optional[ModelSpec]:
            return None if d is None else ModelSpec(d["name"], dict(d.get("args") or {}))

        models = data.get("models")
        judges = data.get("judges")
        if judges is None:  # runs of earlier versions recorded one ``judge``
            judges = [data["judge"]] if data.get("judge") else []
        return cls(benchmark=data["benchmark"], options=dict(data.get("options") or {}),
                   models=None if models is None else [spec(m) for m in models],  # type: ignore[misc]
                   judges=[spec(j) for j in judges], fast=bool(data.get("fast")),  # type: ignore[misc]
                   data_root=Path(data["data_root"]) if data.get("data_root") else None, name=data.get("name"),
                   out=Path(data["out"]) if data.get("out") else None,
                   store=Path(data["store"]) if data.get("store") else None, device=data.get("device", "auto"),
                   dtype=data.get("dtype"), evaluate=data.get("evaluate", "auto"),
                   overlap=bool(data.get("overlap", True)), plots=bool(data.get("plots", True)),
                   shard=parse_shard(data["shard"], "shard") if data.get("shard") else None,
                   log_samples=data.get("log_samples"))


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, Path):
        return str(v)
    return v
