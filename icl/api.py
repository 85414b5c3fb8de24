"""``icl.evaluate``: the runner from Python (notebooks), with the same store and files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence, Union

from icl.run.planning.config import ModelSpec, RunConfig, parse_models

_COMMON = ("judge", "fast", "data_root", "name", "out", "store", "device", "dtype", "evaluate", "overlap", "plots",
           "progress", "trace_memory")

ModelsArg = Union[str, Sequence[Union[str, ModelSpec, tuple]], None]


def _specs(models: ModelsArg) -> Optional[list[ModelSpec]]:
    if models is None:
        return None
    if isinstance(models, str):
        return parse_models(models)
    out = []
    for m in models:
        if isinstance(m, ModelSpec):
            out.append(m)
        elif isinstance(m, tuple):  # (name, {args})
            out.append(ModelSpec(m[0], dict(m[1]) if len(m) > 1 else {}))
        else:
            out += parse_models(str(m))
    return out


def _judges(judge: Any) -> list[ModelSpec]:
    """``judge=``: one judge (a spec string, ``ModelSpec`` or ``(name, {args})``) or a list of them."""
    if judge is None:
        return []
    return _specs([judge] if isinstance(judge, (str, ModelSpec, tuple)) else judge) or []


class Results(list):
    """A run's table as a list of row dicts (what ``icl.evaluate`` returns, always): ``table``
    (its name), ``outcome`` (the run's :class:`~icl.run.runner.Outcome`: every table, failures,
    timings, the output folder), ``summary`` (what the command line would have printed) and
    :meth:`to_pandas`."""

    def __init__(self, rows: Sequence[dict], table: str, outcome: Any, summary: str = "") -> None:
        super().__init__(rows)
        self.table, self.outcome, self.summary = table, outcome, summary

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (``attrs["outcome"]`` holds the outcome); needs pandas."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(f"{exc}: Results.to_pandas needs pandas (pip install pandas)") from None
        frame = pd.DataFrame(list(self))
        frame.attrs["outcome"] = self.outcome
        return frame


def evaluate(benchmark: str, models: ModelsArg = None, *, table: Optional[str] = None, verbose: bool = False,
             **options: Any) -> Results:
    """Run ``benchmark`` (e.g. "vibe", "best50", "vlicl") for ``models`` and return its
    ``table`` (by default "results": the long table of every benchmark, :mod:`icl.report.schema`;
    or any of its own tables, e.g. "vibe_results") as :class:`Results`: a list of row dicts with ``.to_pandas()``, ``.outcome`` and
    ``.summary``.

    ``models``: ``"oracle,painter:weights=/w/p.pth"``, a list of such strings, ``ModelSpec`` s or
    ``(name, {args})`` tuples; None runs the benchmark's defaults. ``options``: the runner's
    settings (``out``, ``device``, ``dtype``, ``fast``, ``data_root``, ``judge`` (one or a list), ``plots``,
    ``progress``, ...) and the benchmark's own options (``tasks``, ``shots``, ``limit``, ...).
    Files go to ``out`` (default ``./runs/<name>``) exactly as on the command line; a rerun
    computes only what is missing. Quiet: nothing is printed unless ``verbose`` (the text is in
    ``.summary``); the caller's matplotlib state is never touched."""
    import io

    from icl.run.runner import run

    common = {k: options.pop(k) for k in list(options) if k in _COMMON}
    judge = common.pop("judge", None)
    for key in ("data_root", "out", "store"):
        if common.get(key) is not None:
            common[key] = Path(common[key])
    common.setdefault("progress", False)
    config = RunConfig(benchmark=benchmark, options=options, models=_specs(models),
                       judges=_judges(judge), **common)
    text = io.StringIO()
    outcome = run(config, None if verbose else text, None if verbose else text)
    if table is None:
        table = "results" if "results" in outcome.tables else next(iter(outcome.tables), "results")
    rows = outcome.tables.get(table)
    if rows is None:
        raise KeyError(f"benchmark {benchmark!r} has no table {table!r}; it has: {', '.join(outcome.tables)}")
    return Results(rows, table, outcome, text.getvalue())
