"""The CoBSAT benchmark plugin (``cobsat``, protocol ``cobsat-1``; PROTOCOL §4).

Items are (task, shots, prompt) of one setting (mode, variant, instruction family, prompt lists).
Image mode sends :class:`GenerationRequest` s (interleaved ``"{x}: "`` texts and images), description
mode :class:`ChatRequest` s; the judge model answers two multiple-choice questions per answer (object
and attribute), parsed as the reference parses them. Data: the published layout under
``--data-root`` (:class:`~icl.benchmarks.cobsat.data.ReleaseImages`), or CoBSAT-lite (always for
``--fast``; ``--lite true`` otherwise), which has no action tasks.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping, Optional, Sequence

import numpy as np

from icl.benchmarks.base import Benchmark, Item, Option, comma_list, flag, int_list
from icl.benchmarks.cobsat import questions, requests
from icl.benchmarks.cobsat import release as published
from icl.benchmarks.cobsat.data import LiteImages, ReleaseImages, open_images
from icl.benchmarks.cobsat.instructions import MODES, VARIANTS, families
from icl.benchmarks.cobsat.judge import LITE_PREFIX
from icl.benchmarks.cobsat.prompts import PROMPTS, SHOTS, Prompt, prompt, prompts_csv, sha256
from icl.benchmarks.cobsat.tables import METRICS, SETTING, accuracy_table, consistency_table, read_labels, shot_curves
from icl.benchmarks.cobsat.vocab import TASKS, get_task
from icl.data.seeds import derive_seed
from icl.models.requests import ChatRequest, GenerationRequest
from icl.report.schema import Metric, ResultsSpec

if TYPE_CHECKING:
    from icl.helpers import Job  # plots hands figures to the figure helpers

FAST_PROMPTS = 2
# the reference's judge budget: evaluation_icl.py judges with load_models/call_llava.py's LLaVA-1.5,
# whose load_llava sets "max_new_tokens": 512 (temperature 0); the all-digits parse reads the whole
# answer, so a shorter budget would read a verbose judge differently
JUDGE_TOKENS = 512
DEFAULT_FAMILY = "emu2"  # in both instruction tables; its image prompt is the bare interleaving


class CoBSAT(Benchmark):
    """CoBSAT: text-to-image in-context learning with a latent object or attribute."""

    name = "cobsat"
    protocol = "cobsat-1"
    scorer_version = "2"  # 2: judge answers of the reference's 512 new tokens (1: 10)
    request_types: ClassVar[tuple[type, ...]] = (GenerationRequest,)
    # results.csv: accuracy in % per (task, setting, shots); a failed answer counts wrong
    results_spec = ResultsSpec(task="task", subset=SETTING, shots="shots", metrics=tuple(
        Metric(m, unit="%", scale=100.0) for m in METRICS))
    default_models = ("copy-last",)
    default_judge = "cobsat-judge"
    releases = published.RELEASES  # its Hub release (release.py: where it was read)
    options = (
        Option("tasks", tuple(TASKS), "tasks to run (comma list)", comma_list),
        Option("shots", SHOTS, "shot counts (0..8)", int_list),
        Option("prompts", PROMPTS, "prompts per task and shot count (the first ones of the list)", int),
        Option("legacy_prompts", False, "the reference's published prompt list (random.seed(123))", flag),
        Option("seed", 0, "global seed of the paired prompt lists", int),
        Option("gen_mode", "image", "generate the next image, or describe it (a chat model)", str, MODES),
        Option("variant", "default", "prompt variant", str, VARIANTS),
        Option("family", DEFAULT_FAMILY, "model family whose reference instruction is used", str),
        Option("max_new_tokens", 128, "new tokens of a description", int),
        Option("cot_tokens", 256, "new tokens of the chain-of-thought analysis", int),
        Option("lite", False, "run on the built-in CoBSAT-lite (always with --fast)", flag),
        Option("human_labels", "", "CSV of human labels (key, correct/object/attribute): judge consistency", str),
    )

    @classmethod
    def fast_config(cls) -> dict[str, Any]:
        return {"fast": True, "prompts": FAST_PROMPTS}

    @classmethod
    def check_release(cls, name: str, root: Path) -> dict[str, Any]:
        """Every theme's 100 images exist, its captions file parses when present (release.py)."""
        return published.check(root)

    @classmethod
    def release_summary(cls, name: str, counts: Mapping[str, Any]) -> str:
        return published.summary(dict(counts))

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(config)
        c = self.config
        c["tasks"], c["shots"] = tuple(c["tasks"]), tuple(c["shots"])
        for t in c["tasks"]:
            get_task(t)
        if list(c["shots"]) != sorted(set(c["shots"])) or any(not 0 <= s <= 8 for s in c["shots"]):
            raise ValueError(f"cobsat: shots must be distinct, increasing and in 0..8, got {c['shots']}")
        if not 1 <= c["prompts"] <= (PROMPTS if c["legacy_prompts"] else 10**9):
            raise ValueError(f"cobsat: prompts must be in 1..{PROMPTS} with the legacy list and >= 1 otherwise, "
                             f"got {c['prompts']}")
        if c["family"] not in families(c["gen_mode"]) and c["variant"] in ("default", "exact", "misleading"):
            raise ValueError(f"cobsat: no {c['gen_mode']} instruction for model family {c['family']!r}; families: "
                             f"{', '.join(families(c['gen_mode']))}")
        if c["variant"] == "cot" and c["gen_mode"] != "description":
            raise ValueError("cobsat: the two-pass chain of thought needs --gen-mode description (its first pass is a "
                             "chat answer, which an image generator cannot give)")
        # per instance (the runner reads the instance's): what this configuration sends
        self.request_types = (GenerationRequest,) if c["gen_mode"] == "image" else (ChatRequest,)  # type: ignore[misc]
        self.setting = requests.Setting(c["gen_mode"], c["variant"], c["family"])
        self._images: Optional[LiteImages | ReleaseImages] = None
        self._failures: list[tuple[str, str, Optional[str]]] = []
        self._prompts: list[Prompt] = []

    @property
    def images(self) -> LiteImages | ReleaseImages:
        if self._images is None:
            from icl.data.registry import data_root

            use_lite = self.fast or self.config["lite"]
            self._images = open_images(None if use_lite else data_root(self.data_root), use_lite)
        return self._images

    def _kind(self) -> str:
        return "legacy" if self.config["legacy_prompts"] else f"paired{self.config['seed']}"

    def task_names(self) -> list[str]:
        """The planned tasks the data has (CoBSAT-lite has no action tasks)."""
        return [t for t in self.config["tasks"] if self.images.has_theme(TASKS[t].theme)]

    # -- plan ---------------------------------------------------------------------------------
    def _missing(self, p: Prompt) -> Optional[tuple[str, str]]:
        task = TASKS[p.task]
        theta = task.latent_values[p.latent]
        for j in range(p.shots):
            attribute, obj = task.attribute_object(p.text_values[j], theta)
            why = self.images.missing(task.theme, attribute, obj)
            if why is not None:
                path = self.images.path(task.theme, attribute, obj) if isinstance(self.images, ReleaseImages) else None
                return why, str(path) if path else ""
        return None

    def items(self) -> Iterable[Item]:
        c, s = self.config, self.setting
        self._failures, self._prompts = [], []
        out = []
        for task in self.task_names():
            for shots in c["shots"]:
                for index in range(c["prompts"]):
                    p = prompt(task, shots, index, c["legacy_prompts"], c["seed"])
                    missing = self._missing(p)
                    if missing is not None:
                        self._failures.append((f"task {task}, prompt {index}, {shots} shots", missing[0],
                                               missing[1] or None))
                        continue
                    self._prompts.append(p)
                    key = f"{self.images.origin}/{s.mode}/{s.variant}/{s.family}/{self._kind()}/{task}/{shots}/{index}"
                    group = {"task": task, "shots": shots, "mode": s.mode, "variant": s.variant, "family": s.family,
                             "prompts": self._kind()}
                    out.append(Item(key, group, p))
        return out

    def data_failures(self) -> list[tuple[str, str, Optional[str]]]:
        return list(self._failures)

    def data_origin(self) -> dict[str, str]:
        return {"cobsat": self.images.describe()}

    def describe(self) -> dict[str, Any]:
        lite = self.fast or self.config["lite"]
        tasks = [t + ("" if TASKS[t].theme.drawable else " (not drawable: CoBSAT-lite skips it)") for t in TASKS]
        where = "built-in CoBSAT-lite" if lite else (
            "release under --data-root" if self.data_root else "none given: --data-root DIR, or --fast")
        return {"tasks": tasks, "data": [where], "shots": list(self.config["shots"]),
                "variants": list(VARIANTS), "families": list(families(self.config["gen_mode"]))}

    # -- requests -------------------------------------------------------------------------------
    def _seed(self, item: Item) -> int:
        return derive_seed(self.config["seed"], "cobsat", "*", item.key, "cobsat/request")

    def request(self, item: Item, privileged: bool = False) -> Any:
        c = self.config
        return requests.build(item.payload, self.setting, self.images, item.key, self._seed(item),
                              c["max_new_tokens"], c["cot_tokens"])

    def followup(self, item: Item, answers: Sequence[Any]) -> Optional[Any]:
        if self.config["variant"] != "cot" or len(answers) != 1:
            return None
        return requests.cot_answer_request(self.request(item), str(answers[0]), item.payload,
                                           self.config["max_new_tokens"])

    def judge_requests(self, item: Item, response: Any) -> Sequence[Any]:
        theme = TASKS[item.payload.task].theme
        prefix = LITE_PREFIX if self.images.origin == "lite" else "cobsat/"
        if self.config["gen_mode"] == "image":
            if not _is_image(response):
                return ()
            return [ChatRequest.user(f"{prefix}{item.key}/{a}", response, questions.question(theme, a),
                                     max_new_tokens=JUDGE_TOKENS) for a in questions.ASPECTS]
        if not isinstance(response, str):
            return ()
        return [ChatRequest.user(f"{prefix}{item.key}/{a}", questions.question(theme, a, response),
                                 max_new_tokens=JUDGE_TOKENS) for a in questions.ASPECTS]

    # -- scores ---------------------------------------------------------------------------------
    def truth(self, p: Prompt) -> dict[str, int]:
        """The true option numbers of the query's image: ``object`` and ``attribute``."""
        task = TASKS[p.task]
        attribute, obj = task.attribute_object(p.text_values[-1], task.latent_values[p.latent])
        return {"object": questions.true_option(task.theme.object, obj),
                "attribute": questions.true_option(task.theme.attribute, attribute)}

    def score(self, item: Item, response: Any, judgements: Sequence[str] = ()) -> dict[str, float]:
        want = "image" if self.config["gen_mode"] == "image" else "text"
        ok = _is_image(response) if want == "image" else isinstance(response, str)
        if not ok or len(judgements) != len(questions.ASPECTS):
            return _metrics(item.payload, 0.0, 0.0, failed=1.0)
        truth = self.truth(item.payload)
        right = {a: float(questions.chosen_option(j) == truth[a]) for a, j in zip(questions.ASPECTS, judgements)}
        return _metrics(item.payload, right["object"], right["attribute"], failed=0.0)

    def score_failure(self, item: Item, reason: str) -> Optional[dict[str, float]]:
        return _metrics(item.payload, 0.0, 0.0, failed=1.0)

    # -- tables, figures, report ----------------------------------------------------------------
    def summarise(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        tables = {"accuracy": accuracy_table(rows)}
        if self.config["human_labels"]:
            tables["consistency"] = consistency_table(rows, read_labels(self.config["human_labels"]))
        return tables

    def plots(self, tables: Mapping[str, list[dict[str, Any]]], out: Path,
              answers: Optional[Callable[[str], dict[str, Any]]] = None) -> list[Path | Job]:
        from icl import helpers

        out.mkdir(parents=True, exist_ok=True)
        return [helpers.submit("figures", shot_curves, tables.get("accuracy", []), out)]  # collected by the runner

    def summary(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        rows = tables.get("accuracy", [])
        if not rows:
            return ""
        from icl.report.tables import aligned

        table = [[model, task, "  ".join(f"{r['shots']}:{_fmt(r['overall'])}" for r in sorted(rs, key=lambda r: r["shots"]))]
                 for (model, task), rs in _by(rows, ("model", "task")).items()]
        return "\n".join([f"cobsat ({self.protocol}): overall accuracy in % by shots (failed answers count wrong)",
                          *aligned([["model", "task", "shots:accuracy"], *table])])

    def report(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        c = self.config
        lines = ["## CoBSAT", "",
                 f"Protocol {self.protocol}; mode {c['gen_mode']}, variant {c['variant']}, instruction family "
                 f"{c['family']}, prompt lists {self._kind()}. Accuracy in %; a failed generation counts wrong and "
                 "stays in the denominator. Textual: the part given as text; visual: the latent part.", "",
                 "| model | task | shots | prompts | failed | " + " | ".join(METRICS) + " |",
                 "|---" * (5 + len(METRICS)) + "|"]
        for r in tables.get("accuracy", []):
            lines.append(f"| {r['model']} | {r['task']} | {r['shots']} | {r['prompts_scored']} | {r['failed']} | "
                         + " | ".join(_fmt(r[m]) for m in METRICS) + " |")
        skipped = [t for t in c["tasks"] if t not in self.task_names()]
        if skipped:
            lines += ["", f"Not in this data (not run): {', '.join(skipped)}."]
        cons = tables.get("consistency", [])
        if cons:
            lines += ["", "Judge consistency with human labels:", ""]
            lines += [f"- {r['model']} {r['aspect']}: {r['agree']} of {r['labelled']} ({_fmt(100 * r['consistency'])}%)"
                      for r in cons]
        lines.append("")
        return "\n".join(lines)

    # -- reproducibility ------------------------------------------------------------------------
    def prompts_csv(self) -> str:
        if not self._prompts:
            self.items()
        return prompts_csv(self._prompts, self.config["legacy_prompts"])

    def write_artifacts(self, out: Path) -> dict[str, str]:
        text = self.prompts_csv()
        (out / "prompts.csv").write_text(text, encoding="utf-8")
        return {"prompts.csv": sha256(text)}

    def fingerprints(self) -> dict[str, str]:
        return {"cobsat/prompts.csv": sha256(self.prompts_csv())}

    def verdict(self, metrics: Mapping[str, float]) -> Optional[str]:
        """``object right, attribute wrong``: the judge's two answers against the truth."""
        if metrics.get("failed") or "object" not in metrics or "attribute" not in metrics:
            return None
        return f"object {_right(metrics['object'])}, attribute {_right(metrics['attribute'])}"


def _right(value: float) -> str:
    return "right" if value else "wrong"


def _metrics(p: Prompt, obj: float, attribute: float, failed: float) -> dict[str, float]:
    text_attr = TASKS[p.task].text_gives_attribute
    return {"overall": obj * attribute, "object": obj, "attribute": attribute,
            "textual": attribute if text_attr else obj, "visual": obj if text_attr else attribute, "failed": failed}


def _is_image(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim == 3 and x.shape[2] == 3 and x.dtype == np.uint8 and x.size > 0


def _by(rows: Sequence[Mapping[str, Any]], cols: tuple[str, ...]) -> dict[tuple, list[Mapping[str, Any]]]:
    out: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(tuple(r[c] for c in cols), []).append(r)
    return out


def _fmt(v: Any) -> str:
    return "nan" if isinstance(v, float) and math.isnan(v) else f"{float(v):.1f}"
