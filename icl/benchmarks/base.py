"""The seam between a benchmark and the one runner (``icl.run``).

A benchmark is a small object the runner drives; it never loops over models or writes stores:

- ``items()`` yields :class:`Item` s: keyed, independent, deterministic (the same keys and
  payloads whatever the order, subset or sharding).
- ``request(item, privileged)`` builds the typed request (:mod:`icl.models.requests`) for one
  item; ``followup(item, answers)`` may ask a second turn (two-pass chain of thought).
- ``judge_requests(item, response)``: requests for the judge model (a model like any other,
  cached the same way), when the benchmark scores through one. A benchmark may take several
  judges (``max_judges``): each gets the same requests and ``score`` is called once per judge
  with that judge's answers.
- ``score(item, response, judgements)`` returns ``{metric: float}``: pure, versioned by
  ``scorer_version`` (stored scores are keyed by it, so a new scorer rescores without calling
  any model). ``score_failure(item, reason)`` says what a failed or refused answer scores
  (None: it is left out and counted as a failure).
- ``summarise(rows)`` builds the benchmark's tables from score rows; ``plots(tables, out)``
  and ``report(tables)`` add its figures and its section of ``report.md``.
- ``results_spec`` and ``result_rows(rows)`` say how score rows map onto the common long
  ``results.csv`` (:mod:`icl.report.schema`): task, subset and shots columns, reported metrics
  with direction and unit, the query column of clustered intervals.
- ``releases`` (and ``release_aliases``) name the benchmark's published data, which
  ``python -m icl.data fetch NAME`` (and ``--prefetch``) finds through the benchmark registry
  (:mod:`icl.data.release`: a Hub dataset it downloads, a release published elsewhere it says
  where to get, a name it does not fetch and why); ``check_release(name, root)`` checks a copy
  as the benchmark reads it and ``release_summary`` says what it found. The runner's fetch holds
  the mechanism only: nothing about any benchmark's data.

Responses reach ``score`` as a ``str`` (ChatRequest) or a uint8 ``[H, W, 3]`` numpy array
(AnalogyRequest, GenerationRequest), exactly as the store keeps them, so ``rescore`` equals the
original run (with device evaluation, ``score_batch`` gets uint8 tensors on that device).

A score row (what ``summarise`` receives, one per planned item and model that has a stored
score) is a flat dict: ``model`` (the model's label), ``model_id``, ``key``, ``status`` ("ok",
or "failed" with ``reason``), ``judge`` (the judge's label; only when the run has judges: one
row per judge), the item's ``group`` columns, then one column per metric (a failed row carries
``score_failure``'s metrics, or none).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping, Optional, Sequence

from icl._parse import parse_bool
from icl.data.release import HubRelease, Release, ReleaseError
from icl.report.schema import ResultsSpec


@dataclass(frozen=True)
class Item:
    """One unit of work. ``key`` is unique within the benchmark and stable across runs;
    ``group`` holds the columns it is aggregated by (e.g. task, dataset, shots, seed);
    ``payload`` is private to the benchmark."""

    key: str
    group: Mapping[str, Any]
    payload: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Option:
    """A benchmark setting: ``--{name}`` on the command line (``_`` -> ``-``), a key in
    ``--config run.toml``, a keyword of ``icl.evaluate``. ``parse`` turns the command-line
    string into the value (e.g. a comma list into a tuple)."""

    name: str
    default: Any
    help: str
    parse: Callable[[str], Any] = str
    choices: Optional[Sequence[Any]] = None


def comma_list(text: str) -> tuple[str, ...]:
    """``"a,b, c"`` -> ``("a", "b", "c")``; a list naming nothing is an error."""
    out = tuple(p.strip() for p in text.split(",") if p.strip())
    if not out:
        raise ValueError(f"expected a comma-separated list of names, got {text!r}")
    return out


def flag(text: str) -> bool:
    """A boolean option (``true/false``, ``1/0``, ``yes/no``): :func:`icl._parse.parse_bool`."""
    return parse_bool(text, "expected a boolean")


def positive_int(text: str) -> int:
    """An integer >= 1 (``--limit``)."""
    value = int(text)
    if value < 1:
        raise ValueError(f"expected an integer >= 1, got {value}")
    return value


def judge_names(judges: Any) -> tuple[str, ...]:
    """The judges given to :meth:`Benchmark.check_judge` as a tuple of names (None: none; a
    string: one)."""
    if judges is None:
        return ()
    if isinstance(judges, str):
        return (judges,)
    return tuple(judges)


def int_list(text: str) -> tuple[int, ...]:
    """``"0,1,2"`` -> ``(0, 1, 2)``."""
    return tuple(int(p) for p in comma_list(text))


class Benchmark(ABC):
    """Base class of every benchmark plugin (see the module docstring)."""

    name: ClassVar[str] = "benchmark"
    protocol: ClassVar[str] = "benchmark-0"  # docs/protocol.md version of its pinned choices
    scorer_version: ClassVar[str] = "0"
    request_types: ClassVar[tuple[type, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()
    default_models: ClassVar[tuple[str, ...]] = ()  # what --fast and a bare run evaluate
    default_judge: ClassVar[Optional[str]] = None  # model spec of the judge, when it needs one (see default_judges)
    # how many judges a run may give (``--judge`` repeated); None: any number. Each judge scores
    # every answer on its own: rows carry a ``judge`` column and ``summarise`` combines them
    max_judges: ClassVar[Optional[int]] = 1
    # score_batch may run in the runner's scoring thread while request() builds the next batch
    thread_safe_scoring: ClassVar[bool] = False
    # labels of the reference models of this run (oracle, identity: the adapters' ``reference``
    # flag), set by the runner before ``summarise``: reported, never ranked among the others
    reference_models: set[str] = set()
    # how score rows map onto the common long results table (icl.report.schema)
    results_spec: ClassVar[ResultsSpec] = ResultsSpec()
    # the published data ``python -m icl.data fetch NAME`` knows of this benchmark, by name
    # (icl.data.release): a HubRelease it downloads, unpacks and checks (check_release), an
    # Elsewhere it says where to get, a NotPublished it says why not; a benchmark whose run
    # reads the release named like the benchmark gets it with ``--prefetch`` too
    releases: ClassVar[Mapping[str, Release]] = {}
    # other names fetch takes for them (alias -> a name of ``releases``; case-insensitive)
    release_aliases: ClassVar[Mapping[str, str]] = {}

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None:
        known = {o.name: o for o in self.options}
        config = dict(config or {})
        unknown = sorted(set(config) - set(known) - {"fast", "data_root"})
        if unknown:
            raise ValueError(f"benchmark {self.name!r} has no option(s) {', '.join(unknown)}; "
                             f"it takes: {', '.join(sorted(known)) or 'none'}")
        self.config: dict[str, Any] = {o.name: o.default for o in self.options}
        for name, value in config.items():
            o = known.get(name)
            if o is not None and o.parse is flag and not isinstance(value, str):
                try:  # TOML/Python values: a bool or 1/0, nothing else
                    value = parse_bool(value, f"benchmark {self.name!r}, option {name!r}")
                except ValueError as exc:
                    raise ValueError(str(exc)) from None
            if o is not None and isinstance(value, str) and o.parse is not str:
                try:  # a string from Python or a config file, parsed like the command line's
                    value = o.parse(value)
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"benchmark {self.name!r}, option {name!r}: {exc}") from None
            if o is not None and o.choices and value not in o.choices:
                raise ValueError(f"benchmark {self.name!r}, option {name!r}: {value!r} is not one of "
                                 f"{', '.join(map(str, o.choices))}")
            self.config[name] = value
        self.fast: bool = bool(self.config.pop("fast", False))
        self.data_root: Optional[Path] = Path(self.config.pop("data_root")) if self.config.get("data_root") else None
        self.config.pop("data_root", None)

    @classmethod
    def models_by_default(cls, options: Mapping[str, Any]) -> tuple[str, ...]:
        """Model specs a run without ``--models`` evaluates, given the run's benchmark ``options``
        (those the user set): ``default_models``, unless an option stands in for the models
        (best50's ``predictions``). The one answer for the command line, the plan and the check."""
        return cls.default_models

    @property
    def default_judges(self) -> tuple[str, ...]:
        """Model specs of the judges a run without ``--judge`` uses: ``default_judge`` (none when
        it is None). A benchmark taking several judges may name more, e.g. for its fast run
        (``self.fast``); ``check_judge`` sees them like judges given on the command line."""
        return (self.default_judge,) if self.default_judge else ()

    @classmethod
    def fast_config(cls) -> dict[str, Any]:
        """The settings of the smoke run on built-in data (``python -m icl.run --fast``)."""
        return {"fast": True}

    @classmethod
    def check_release(cls, name: str, root: Path) -> dict[str, Any]:
        """The checks this benchmark makes of a local copy of its Hub release ``name`` (one of
        ``releases``), unpacked at ``root``: fetch calls it before the folder is put in place
        and again on a later fetch into it. Returns counts of what was found (JSON values:
        recorded in ``fetch-manifest.json`` and compared next time); raises
        :class:`~icl.data.release.ReleaseError` (one line naming what is wrong and where).
        The default counts the files of the release's folders (fetch has already verified each
        download against the Hub's hashes); a benchmark overrides it with the checks it makes
        of its data."""
        release = cls.releases.get(name)
        folders = release.folders if isinstance(release, HubRelease) else ()
        missing = [f for f in folders if not (Path(root) / f).is_dir()]
        if not folders:
            raise ReleaseError(f"{name}: benchmark {cls.name!r} declares no Hub release of that name with folders")
        if missing:
            raise ReleaseError(f"{name} release at {root}: no folder {', '.join(missing)}")
        return {"files": sum(1 for f in folders for p in (Path(root) / f).rglob("*") if p.is_file())}

    @classmethod
    def release_summary(cls, name: str, counts: Mapping[str, Any]) -> str:
        """``counts`` (from :meth:`check_release`) in a few words, e.g. ``"5 themes, 500 images"``
        (default: each whole-number count as ``"N key"``)."""
        return ", ".join(f"{v} {k}" for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool))

    @abstractmethod
    def items(self) -> Iterable[Item]:
        """Every plan item of this configuration, deterministic and order-free."""

    @abstractmethod
    def request(self, item: Item, privileged: bool = False) -> Any:
        """The typed request for ``item``; ``privileged`` models (oracles) may get the answer."""

    def refuses(self, adapter: Any) -> Optional[str]:
        """Why this benchmark, as configured, cannot serve the model ``adapter`` (a sentence), or
        None. The runner refuses such a model before the run, in one line (``--check`` lists it),
        rather than stopping it when its first batch fails. The default serves every model: one
        that serves none of the request types sent is refused by the runner itself, and a
        privileged reference baseline gets the ground truth in every request it is sent
        (``request(item, privileged=True)``); a benchmark whose configuration cannot give it that
        says so here."""
        return None

    def request_type(self, item: Item) -> type:
        """The request type ``request(item)`` builds: a model is asked only for the items whose
        type it serves. With one declared type that is it; otherwise the request is built and its
        type taken (benchmarks sending several types override this to answer without building)."""
        if len(self.request_types) == 1:
            return self.request_types[0]
        return type(self.request(item))

    def prompt_size(self, item: Item) -> Optional[tuple[int, int]]:
        """``(images, text characters)`` of ``request(item)``'s prompt, known without reading an
        image: how ``--check`` finds the longest prompts of a (task, shots) cell cheaply
        (:mod:`icl.run.planning.check_context`). None (the default): the check builds the request and
        counts them there."""
        return None

    def item_kind(self, item: Item) -> str:
        """How skipped items are named when a model cannot serve them (default: the ``task`` column)."""
        return str(item.group.get("task", self.name))

    def followup(self, item: Item, answers: Sequence[Any]) -> Optional[Any]:
        """A further request after ``answers`` (the responses so far), or None when done."""
        return None

    def judge_requests(self, item: Item, response: Any) -> Sequence[Any]:
        """Requests for the judge model about ``response`` (none by default)."""
        return ()

    @abstractmethod
    def score(self, item: Item, response: Any, judgements: Sequence[str] = ()) -> dict[str, float]:
        """Metrics of one response (the last answer when there were follow-ups)."""

    def verdict(self, metrics: Mapping[str, float]) -> Optional[str]:
        """What one judged answer's scores mean, in words (``"object right, attribute wrong"``),
        shown in the report's gallery beside the judge's raw answers; None (the default): the
        gallery shows the verdict metric's value."""
        return None

    def score_failure(self, item: Item, reason: str) -> Optional[dict[str, float]]:
        """Scores of an item whose model call failed (``reason``: "error", "timeout",
        "overflow", "invalid"); None leaves it out of the means and counts it as a failure."""
        return None

    def score_batch(self, items: Sequence[Item], responses: Sequence[Any],
                    judgements: Sequence[Sequence[str]], device: Optional[str] = None) -> list[dict[str, float]]:
        """``score`` over a batch; benchmarks with batched (e.g. GPU) scorers override it
        (``device``: where tensor responses lie, with device evaluation). A value may be an
        :class:`icl.helpers.Deferred` (computed by a helper process): the runner scores the
        next batches meanwhile and stores it once there."""
        return [self.score(i, r, j) for i, r, j in zip(items, responses, judgements)]

    def helper_pools(self, host: bool) -> tuple[str, ...]:
        """Helper process pools (:data:`icl.helpers.POOLS`) this benchmark's scoring submits to,
        started when the run begins so that their imports overlap it (``host``: predictions are
        scored on the host, not on a device). The runner starts ``figures`` itself for benchmarks
        that draw plots."""
        return ()

    @abstractmethod
    def summarise(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """Tables (name -> rows) from score rows; the runner writes each as ``{name}.csv``."""

    def result_rows(self, rows: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
        """The score rows the common results table is built from, by ``results_spec`` (default:
        ``rows`` as they are; a benchmark may add derived columns, e.g. the query of a key)."""
        return rows

    def plots(self, tables: Mapping[str, list[dict[str, Any]]], out: Path,
              answers: Optional[Callable[[str], dict[str, Any]]] = None) -> list[Any]:
        """Figures written under ``out``; returns their paths, or jobs whose ``result()`` is a
        list of paths (figures handed to the figure helpers, :func:`icl.helpers.submit`: the
        runner writes its other files meanwhile and collects them, in order). ``answers(item_key)``
        gives the stored responses of that item by model label (for qualitative figures). Called
        after ``summarise`` and before ``result_files``."""
        return []

    def report(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        """This benchmark's markdown section of ``report.md``."""
        return ""

    def summary(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        """A few lines for the terminal after a run."""
        return ""

    def fingerprints(self) -> dict[str, str]:
        """Hashes of what the results depend on besides the code: datasets, context lists,
        prompt lists (name -> SHA-256), recorded in ``results.json``."""
        return {}

    def write_artifacts(self, out: Path) -> dict[str, str]:
        """Write the plan's frozen lists (contexts, prompts) into ``out`` after ``items()``;
        returns file name -> SHA-256 (recorded in ``results.json``)."""
        return {}

    def data_origin(self) -> dict[str, str]:
        """Where each dataset of the plan came from, name -> ``"built-in synthetic"`` or
        ``"release ..."`` (with its digest): every report says which results are synthetic."""
        return {}

    def check_judge(self, judges: Any, asked: Optional[Sequence[type]] = None) -> None:
        """Raise ValueError (one line) when the run's judges cannot judge this configuration's
        data. ``judges``: the registry names of the judge models (a sequence; a single name or
        None, as earlier versions passed, is read as one judge or none); ``asked``: the request
        types some model of the run serves (the others are never asked, so never judged).

        This base check refuses more judges than ``max_judges`` declares; an override calls
        ``super().check_judge(judges, asked)`` first (:func:`judge_names` normalises ``judges``)."""
        names = judge_names(judges)
        if self.max_judges is not None and len(names) > self.max_judges:
            raise ValueError(f"benchmark {self.name!r} takes {self.max_judges} judge(s); got {len(names)} "
                             f"({', '.join(names)}): give one --judge")

    def judge_probe(self, items: Sequence[Item], asked: Optional[Sequence[type]] = None) -> list[Any]:
        """Judge requests about a stand-in answer (a black image, or a short text) of the first
        planned item of each request type some model is asked (``asked``; None: every type): what
        the run's judges will be asked, built before any generation so the runner can refuse a
        judge that cannot take them (``Adapter.would_refuse``). Empty when nothing is judged."""
        import numpy as np

        from icl.models.requests import ChatRequest

        wanted = [t for t in self.request_types if asked is None or t in asked]
        out: list[Any] = []
        seen: set[type] = set()
        for item in items:
            if len(seen) == len(wanted):
                break
            try:
                kind = self.request_type(item)
                if kind in seen or kind not in wanted:
                    continue
                request = self.request(item)
            except Exception:  # a data error: the run reports it per item; probe the next one
                continue
            seen.add(kind)
            if issubclass(kind, ChatRequest):
                stand_in: Any = "a stand-in answer"
            else:
                h, w = getattr(request, "size", None) or (64, 64)
                stand_in = np.zeros((min(int(h), 64), min(int(w), 64), 3), np.uint8)
            out += list(self.judge_requests(item, stand_in))
        return out

    def result_files(self, rows: Sequence[Mapping[str, Any]],
                     answers: Callable[[str], dict[str, Any]]) -> dict[str, str]:
        """Per-run files written after scoring (name -> text; e.g. per-item predictions), from the
        score ``rows`` and ``answers(item_key)`` (the stored final answers by model label)."""
        return {}

    def data_failures(self) -> list[tuple[str, str, Optional[str]]]:
        """Data the plan could not use, found by ``items()``: (where, message, path)."""
        return []

    def describe(self) -> dict[str, Any]:
        """What ``--list`` shows (e.g. tasks, datasets present), name -> list of strings."""
        return {}
