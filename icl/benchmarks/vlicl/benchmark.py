"""The VL-ICL benchmark plugin (``vlicl``, protocol ``vlicl-1``; PROTOCOL §3).

Items are (seed, task, shots, query) episodes of one setting (input variant, description level,
direct or two-pass chain of thought). Image-to-text episodes become :class:`ChatRequest` s
(:func:`~icl.benchmarks.vlicl.episodes.chat_request`), text-to-image ones
:class:`GenerationRequest` s whose images the judge model is asked about. Data: the published
release under ``data_root`` (:func:`~icl.benchmarks.vlicl.records.load_published`), else the
built-in procedural versions (:mod:`icl.benchmarks.vlicl.builtin`; always for ``--fast``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping, Optional, Sequence

import numpy as np

from icl.benchmarks.base import Benchmark, Item, Option, comma_list, flag, int_list, judge_names
from icl.benchmarks.vlicl import builtin
from icl.benchmarks.vlicl import release as published
from icl.benchmarks.vlicl.episodes import (COT_TOKENS, MAX_NEW_TOKENS, Episode, build_episode, chat_request,
                                           generation_request, inputs, request_seed, support_rows)
from icl.benchmarks.vlicl.plots import efficiency_front, shot_curves
from icl.benchmarks.vlicl.predictions import prediction_files, prompt_text
from icl.benchmarks.vlicl.records import TaskData, check_real_names, load_published, missing_folders, present_tasks
from icl.benchmarks.vlicl.reference import FAMILIES, format_answer, reference_request
from icl.benchmarks.vlicl.scoring import i2t_correct, judge_says_yes
from icl.benchmarks.vlicl.summary import (SETTING, accuracy_tables, capability_table, item_key, paired_table, query_of,
                                          rank_intervals, rank_table, summary_table)
from icl.benchmarks.vlicl.tasks import (COT_PROMPT, DESCRIPTION_LEVELS, I2T, JUDGE_TWICE, MANY_SHOTS,
                                        PER_CLASS, TASKS, get_task, judge_prompt)
from icl.models.requests import ChatRequest, GenerationRequest
from icl.report.schema import Metric, ResultsSpec
from icl.report.tables import csv_text

if TYPE_CHECKING:
    from icl.helpers import Job  # plots hands figures to the figure helpers

VARIANTS = ("image", "text", "real_names")
PARSE = ("legacy", "lenient", "both")
PROMPT_STYLES = ("chat", "reference")
EFFICIENCY = ("all", "fitting")
TEXTOCR_RULES = ("reference", "keep_dots")
BUILTIN_JUDGE = "vlicl-judge"
FAST_QUERIES = 4
FAST_POOL = max(MANY_SHOTS)  # records are cheap: images are drawn only when shown
JUDGE_TOKENS = 5  # the reference judge's budget


# why a variant leaves tasks out (named in report.md; an error when --tasks names them): what they lack
VARIANT_WHY = {
    "text": "no text version (neither the release nor the reference code's utils/utils.py "
            "load_text_data names a folder for them)",
    "real_names": "no real class names (only open_mi's MiniImageNet classes have them)",
}


class VLICL(Benchmark):
    """VL-ICL Bench: six image-to-text and four text-to-image few-shot tasks, shot curves."""

    name = "vlicl"
    protocol = "vlicl-1"
    scorer_version = "3"  # 2: TextOCR keep-dots metric; 3: open_t2i_mi asks the reference code's judge question
    request_types: ClassVar[tuple[type, ...]] = (ChatRequest, GenerationRequest)
    # results.csv: accuracy in % per (task, setting, shots), a query's seeds resampled together
    results_spec = ResultsSpec(task="task", subset=SETTING, shots="shots", cluster="query", data="task", metrics=(
        Metric("accuracy", unit="%", scale=100.0, column="correct"),
        Metric("latent", unit="%", scale=100.0), Metric("non_latent", unit="%", scale=100.0)))
    default_models = ("copy-last",)
    default_judge = "vlicl-judge"
    # its Hub release and the names fetch also takes for it (release.py: where each was read)
    releases = published.RELEASES
    release_aliases = published.ALIASES
    options = (
        Option("tasks", (), "tasks to run (comma list; default: every task, or with data_root every task "
               "whose folder the release holds)", comma_list),
        Option("seeds", (0, 1, 2), "evaluation seeds (support sets differ per seed)", int_list),
        Option("shots", (), "shot grid for every task (default: each task's own grid)", int_list),
        Option("many_shot", False, "add the many-shot points 16, 32, 64", flag),
        Option("description", "detailed", "task description level", str, DESCRIPTION_LEVELS),
        Option("variant", "image", "inputs: images, their text versions, or real-name MiniImageNet", str, VARIANTS),
        Option("cot", False, "two-pass chain of thought (image-to-text tasks)", flag),
        Option("parse", "legacy", "answer parsing of PROTOCOL §3.2 (both: report the two)", str, PARSE),
        Option("queries", 0, "at most this many queries per task (0: all)", int),
        Option("cot_tokens", COT_TOKENS, "new tokens of the chain-of-thought pass", int),
        Option("prompt_style", "chat", "chat: canonical chat turns, serialised by the adapter; reference: the "
               "single prompt the reference code builds for --reference-family", str, PROMPT_STYLES),
        Option("reference_family", "llava", "model family of --prompt-style reference", str, tuple(FAMILIES)),
        Option("repeat", 1, "show the drawn support set this many times (the source's appendix B.4)", int),
        Option("efficiency", "all", "summaries over all shot counts, or only those that fit the context",
               str, EFFICIENCY),
        Option("textocr", "reference", "TextOCR answer rule: reference (cut at the first '.') or keep_dots",
               str, TEXTOCR_RULES),
    )

    @classmethod
    def check_release(cls, name: str, root: Path) -> dict[str, Any]:
        """Every task folder's records load and validate, every image they name exists (release.py)."""
        return published.check(root)

    @classmethod
    def release_summary(cls, name: str, counts: Mapping[str, Any]) -> str:
        return published.summary(dict(counts))

    def __init__(self, config: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(config)
        c = self.config
        c["tasks"], c["seeds"], c["shots"] = tuple(c["tasks"]), tuple(c["seeds"]), tuple(c["shots"])
        for t in c["tasks"]:
            get_task(t)
        if not isinstance(c["repeat"], int) or c["repeat"] < 1:
            raise ValueError(f"vlicl: repeat must be a positive integer, got {c['repeat']!r}")
        if c["prompt_style"] == "reference" and (c["variant"] == "text" or c["cot"]):
            raise ValueError("vlicl: --prompt-style reference reproduces the reference code's image-to-text prompt; "
                             "it has no text-only or chain-of-thought layout (use --prompt-style chat)")
        self.absent: list[str] = []  # tasks asked for (or by default) whose release folder is missing
        self.not_in_variant: list[str] = []  # tasks the variant has no version of (VARIANT_WHY)
        self.judge_name: Optional[str] = None  # set by check_judge
        if any(s < 0 for s in c["shots"]) or list(c["shots"]) != sorted(set(c["shots"])):
            raise ValueError(f"vlicl: shots must be distinct non-negative and increasing, got {c['shots']}")
        if c["queries"] < 0:
            raise ValueError(f"vlicl: queries must be >= 0, got {c['queries']}")
        self._data: dict[str, TaskData] = {}
        # what this configuration sends: a chat model can run the image-to-text tasks alone
        sent = {TASKS[t].direction for t in self.task_ids()}
        self.request_types = (  # type: ignore[misc]  # per instance: the runner reads the instance's
            ((ChatRequest,) if I2T in sent else ()) + ((GenerationRequest,) if sent - {I2T} else ()))

    # -- plan ---------------------------------------------------------------------------------
    @property
    def release(self) -> bool:
        """Whether the data is the published release (else the built-in procedural data, which
        serves ``--fast`` only: planning a real run without ``--data-root`` is refused)."""
        return self.data_root is not None and not self.fast

    def _require_data(self) -> None:
        if self.data_root is None and not self.fast:
            raise ValueError("vlicl needs the published VL-ICL release: --data-root DIR (its layout: docs/vlicl.md), "
                             "or --fast for the built-in synthetic data")

    def task_ids(self) -> list[str]:
        """The tasks this setting runs (text versions exist for seven tasks, real names for one);
        on the release, the asked (or by default all) tasks whose folder is present."""
        if getattr(self, "_task_ids", None) is None:
            tasks = list(self.config["tasks"]) or list(TASKS)
            variant = self.config["variant"]
            keep = {"text": lambda t: TASKS[t].has_text, "real_names": lambda t: t == "open_mi"}.get(variant)
            if keep is not None:
                self.not_in_variant = [t for t in tasks if not keep(t)]
                tasks = [t for t in tasks if keep(t)]
                if self.config["tasks"] and self.not_in_variant:
                    verb = "has" if len(self.not_in_variant) == 1 else "have"
                    raise ValueError(f"vlicl: --variant {variant}: {', '.join(self.not_in_variant)} {verb} "
                                     f"{VARIANT_WHY[variant]}; leave them out of --tasks")
            if self.release:
                assert self.data_root is not None
                if not self.data_root.is_dir():
                    raise ValueError(f"vlicl: data_root {self.data_root} is not a folder")
                text_only = self.config["variant"] == "text"
                tasks, self.absent = present_tasks(self.data_root, tasks, text_only)
                if self.config["tasks"] and self.absent:
                    raise ValueError(f"vlicl: the release at {self.data_root} has no folder for "
                                     f"{missing_folders(self.absent, text_only)} "
                                     "(asked for with --tasks)")
                if not tasks:
                    raise ValueError(f"vlicl: no VL-ICL task folder under {self.data_root} (looked for "
                                     f"{missing_folders(self.absent, text_only)})")
            self._task_ids: Optional[list[str]] = tasks
        return list(self._task_ids or [])

    def shot_grid(self, task: str) -> tuple[int, ...]:
        grid = tuple(self.config["shots"]) or TASKS[task].shots
        if self.config["many_shot"]:
            grid = tuple(sorted(set(grid) | set(MANY_SHOTS)))
        return grid

    def data(self, task: str) -> TaskData:
        """The records of ``task`` (loaded once)."""
        self._require_data()
        if task not in self._data:
            text = self.config["variant"] == "text"
            if self.release:
                assert self.data_root is not None
                self._data[task] = load_published(self.data_root, task, text_only=text)
            else:
                # Pools never depend on the shot grid (a draw from a bigger pool is another draw);
                # per-class images only extend (see builtin._image_rng).
                most = max(self.shot_grid(task))
                n = FAST_QUERIES if self.fast else None
                pool = FAST_POOL if self.fast else None
                if task == "cobsat":
                    pool = max(MANY_SHOTS)
                self._data[task] = builtin.generate(task, n, pool, per_class=max(5, most), text_only=text)
            if self.config["variant"] == "real_names":
                check_real_names(self._data[task])
        return self._data[task]

    def queries(self, task: str) -> list[dict[str, Any]]:
        """The query records this configuration runs (the first ``queries`` of the file, or all)."""
        qs = self.data(task).queries
        return qs[:self.config["queries"]] if self.config["queries"] else qs

    def unavailable(self, task: str, shots: int) -> Optional[str]:
        """Why the data cannot supply ``shots`` for every query of ``task`` (None when it can).
        Such shot counts are left out of the plan and listed in the report, never half run."""
        data = self.data(task)
        if shots == 0:
            return None
        queries = self.queries(task)
        if task in PER_CLASS:
            fewest = min((len(q["support"][c]["images"]) for q in queries for c in q["classes"]), default=0)
            return None if fewest >= shots else f"{fewest} support images per class"
        if task == "cobsat":
            fewest = min((len(data.pool("task", "latent", q["latent"], like=q)) for q in queries), default=0)
            return None if fewest >= shots else f"{fewest} support records share a query's latent value"
        return None if len(data.support) >= shots else f"a support pool of {len(data.support)}"

    def cot_mode(self, task: str) -> str:
        """``two_pass`` (chain of thought on an image-to-text task) or ``direct``."""
        return "two_pass" if self.config["cot"] and TASKS[task].direction == I2T else "direct"

    def prompt_label(self, task: str) -> str:
        """``chat``, or ``reference:{family}`` for image-to-text tasks in the reference style."""
        c = self.config
        if c["prompt_style"] == "reference" and TASKS[task].direction == I2T:
            return f"reference:{c['reference_family']}"
        return "chat"

    def items(self) -> Iterable[Item]:
        c = self.config
        for task in self.task_ids():
            queries = self.queries(task)
            cot = self.cot_mode(task)
            prompt = self.prompt_label(task)
            # the default setting keeps its historical keys; others add a segment to the cot part
            style = "+".join(([prompt] if prompt != "chat" else []) + ([f"x{c['repeat']}"] if c["repeat"] > 1 else []))
            grid = [k for k in self.shot_grid(task) if self.unavailable(task, k) is None]
            for seed in c["seeds"]:
                for shots in grid:
                    for q in queries:
                        group = {"task": task, "shots": shots, "seed": seed, "variant": c["variant"],
                                 "description": c["description"], "cot": cot, "prompt": prompt,
                                 "repeat": c["repeat"]}
                        key = item_key(task, c["variant"], c["description"], cot + (f"+{style}" if style else ""),
                                       seed, shots, q["id"])
                        yield Item(key, group, (task, seed, shots, q["id"]))

    def episode(self, item: Item) -> Episode:
        task, seed, shots, qid = item.payload
        return build_episode(self.data(task), qid, shots, seed, self.config["variant"] == "real_names",
                             self.config["repeat"])

    # -- requests -------------------------------------------------------------------------------
    def request_type(self, item: Item) -> type:
        return ChatRequest if TASKS[item.payload[0]].direction == I2T else GenerationRequest

    def request(self, item: Item, privileged: bool = False) -> Any:
        task, seed, shots, qid = item.payload
        ep = self.episode(item)
        data = self.data(task)
        desc = TASKS[task].description(self.config["description"])
        rseed = request_seed(seed, task, qid, shots)
        if TASKS[task].direction != I2T:
            size = builtin.image_size(task) if data.origin == "builtin" else None
            return generation_request(data, ep, item.key, desc, rseed, size)
        if self.prompt_label(task) != "chat":
            # inputs are images here: the reference style has no text-only variant (refused in __init__)
            shots = [(inputs(data, d), d.question, format_answer(d.answer)) for d in ep.support]
            request = reference_request(self.config["reference_family"], item.key, desc, shots,
                                        (inputs(data, ep.query), ep.query.question),  # type: ignore[arg-type]
                                        rseed, MAX_NEW_TOKENS)
        else:
            cot = COT_PROMPT if self.cot_mode(task) == "two_pass" else None
            request = chat_request(data, ep, item.key, desc, rseed, cot=cot, cot_tokens=self.config["cot_tokens"])
        if privileged:  # the oracle answers the truth as a support answer is written: the parser's round trip
            request = dataclasses.replace(request, oracle_answer=format_answer(self.truth(item)))
        return request

    def refuses(self, adapter: Any) -> Optional[str]:
        """A privileged baseline (the oracle) answers with the ground truth of each request; the
        second pass of the two-pass chain of thought is built from the first answer alone
        (:meth:`followup`) and carries none, so ``--cot`` cannot serve it."""
        serves_chat = any(issubclass(ChatRequest, t) for t in getattr(adapter, "serves", ()))
        if getattr(adapter, "privileged", False) and serves_chat and any(
                self.cot_mode(t) == "two_pass" for t in self.task_ids()):
            return ("the two-pass chain of thought (--cot) sends a second request that carries no ground truth for "
                    "a privileged baseline to answer with; run it without --cot")
        return None

    def prompt_size(self, item: Item) -> Optional[tuple[int, int]]:
        """``(images, text characters)`` of an image-to-text prompt from its episode (image
        references, questions, answers), no image read; None for text-to-image items. The
        description, the chain-of-thought prompt and the layout are the same across a (task, shots)
        cell, so they are left out."""
        task = item.payload[0]
        if TASKS[task].direction != I2T:
            return None
        ep = self.episode(item)
        shown = ep.support + (ep.query,)
        images = 0 if self.data(task).text_only else sum(len(d.images) for d in shown)
        chars = sum(len(d.question) + sum(len(t) for t in d.texts) for d in shown)
        return images, chars + sum(len(format_answer(d.answer)) for d in ep.support)

    def followup(self, item: Item, answers: Sequence[Any]) -> Optional[Any]:
        task, seed, shots, qid = item.payload
        if self.cot_mode(task) != "two_pass" or len(answers) != 1:
            return None
        desc = TASKS[task].description(self.config["description"])
        return chat_request(self.data(task), self.episode(item), f"{item.key}/answer", desc,
                            request_seed(seed, task, qid, shots), rationale=str(answers[0]))

    def concepts(self, item: Item) -> list[str]:
        task, _, _, qid = item.payload
        truth = self.data(task).by_id[qid]["answer"]
        return [str(t) for t in truth] if TASKS[task].scoring == JUDGE_TWICE else [str(truth)]

    def judge_requests(self, item: Item, response: Any) -> Sequence[Any]:
        task = item.payload[0]
        if TASKS[task].direction == I2T or not _is_image(response):
            return ()
        return [ChatRequest.user(f"{item.key}/judge{i}", response, judge_prompt(task).format(concept=c),
                                 max_new_tokens=JUDGE_TOKENS, min_new_tokens=1)
                for i, c in enumerate(self.concepts(item))]

    # -- scores ---------------------------------------------------------------------------------
    def _zero(self, task: str) -> dict[str, float]:
        out = {"correct": 0.0, "failed": 0.0, "overflow": 0.0}
        if TASKS[task].scoring == JUDGE_TWICE:
            out.update(latent=0.0, non_latent=0.0)
        if TASKS[task].direction == I2T:
            out["correct_lenient"] = 0.0
        if task == "textocr":
            out["correct_keep_dots"] = 0.0
        return out

    def score(self, item: Item, response: Any, judgements: Sequence[str] = ()) -> dict[str, float]:
        task, _, _, qid = item.payload
        out = self._zero(task)
        if TASKS[task].direction == I2T:
            if not isinstance(response, str):
                out["failed"] = 1.0
                return out
            truth = self.truth(item)
            # both parse modes (and both TextOCR rules), whatever the options (they pick what the
            # tables report): a stored score never depends on the configuration
            out["correct"] = float(i2t_correct(task, response, truth, "legacy"))
            out["correct_lenient"] = float(i2t_correct(task, response, truth, "lenient"))
            if task == "textocr":
                out["correct_keep_dots"] = float(i2t_correct(task, response, truth, "legacy", keep_dots=True))
            return out
        want = len(self.concepts(item))
        if not _is_image(response) or len(judgements) != want:
            out["failed"] = 1.0
            return out
        verdicts = [judge_says_yes(j) for j in judgements]
        out["correct"] = float(all(verdicts))
        if TASKS[task].scoring == JUDGE_TWICE:
            out["latent"], out["non_latent"] = float(verdicts[0]), float(verdicts[1])
        return out

    def verdict(self, metrics: Mapping[str, float]) -> Optional[str]:
        """``correct`` / ``wrong`` (the judge's yes or no); for the tasks judged twice, each concept."""
        if metrics.get("failed") or metrics.get("overflow") or "correct" not in metrics:
            return None
        if "latent" in metrics and "non_latent" in metrics:
            return (f"latent concept {_right(metrics['latent'])}, other concept {_right(metrics['non_latent'])}")
        return "correct" if metrics["correct"] else "wrong"

    def truth(self, item: Item) -> Any:
        """The ground truth of an image-to-text item (the real name in the real-name variant)."""
        task, _, _, qid = item.payload
        q = self.data(task).by_id[qid]
        return q["real_name"] if self.config["variant"] == "real_names" else q["answer"]

    def score_failure(self, item: Item, reason: str) -> Optional[dict[str, float]]:
        """An overflow is a result (wrong, flagged); a failed text-to-image generation is
        incorrect and stays in the denominator (PROTOCOL §3.2); any other failure (an
        image-to-text answer that errored) is counted and kept out of the means."""
        task = item.payload[0]
        if reason != "overflow" and TASKS[task].direction == I2T:
            return None
        out = self._zero(task)
        out["overflow"] = float(reason == "overflow")
        out["failed"] = 1.0 - out["overflow"]
        return out

    def data_origin(self) -> dict[str, str]:
        if not self.release:
            return {t: f"built-in synthetic (generator digest {self.data(t).digest[:16]})" for t in self.task_ids()}
        return {t: f"release {self.data(t).origin} (sha256 {self.data(t).digest[:16]})" for t in self.task_ids()}

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tasks": [f"{t} ({'image-to-text' if TASKS[t].direction == I2T else 'text-to-image'})"
                                         for t in TASKS]}
        if self.fast:
            out["data"] = ["built-in synthetic (--fast)"]
        elif self.data_root is None:
            out["data"] = ["none given: --data-root DIR (the published release), or --fast"]
        else:
            out["data"] = [f"release at {self.data_root}: {', '.join(self.task_ids())}"
                           + (f"; absent: {', '.join(self.absent)}" if getattr(self, "absent", None) else "")]
        return out

    # -- tables, figures, report ----------------------------------------------------------------
    def _scored(self, rows: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
        """(rows as parsed by ``--parse``'s default mode, rows parsed leniently), with a score."""
        scored: list[Mapping[str, Any]] = [r for r in rows if "correct" in r]  # failures stay out of the means
        if self.config["textocr"] == "keep_dots":
            scored = [{**r, "correct": r.get("correct_keep_dots", r["correct"]),
                       "correct_lenient": r.get("correct_keep_dots", r.get("correct_lenient", r["correct"]))}
                      if r.get("task") == "textocr" else r for r in scored]
        lenient: list[Mapping[str, Any]] = [{**r, "correct": r.get("correct_lenient", r["correct"])} for r in scored]
        return (lenient if self.config["parse"] == "lenient" else scored), lenient

    def result_rows(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Scored rows in the default parse mode with their query (the cluster of their seeds),
        and the failed rows without a score (counted in ``n_failed``)."""
        scored, _ = self._scored(rows)
        return [{**r, "query": query_of(r)} for r in scored] + [dict(r) for r in rows if "correct" not in r]

    def summarise(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        tables: dict[str, list[dict[str, Any]]] = {}
        default, lenient = self._scored(rows)
        mode = self.config["parse"]
        variants = [("", default)] + ([("_lenient", lenient)] if mode == "both" else [])
        for suffix, rs in variants:
            per_seed, acc = accuracy_tables(rs)
            summ = summary_table(acc, fitting=self.config["efficiency"] == "fitting")
            tables[f"accuracy_seed{suffix}"] = per_seed
            tables[f"accuracy{suffix}"] = acc
            tables[f"shot_summary{suffix}"] = summ
            tables[f"ranks{suffix}"] = rank_table(summ, rank_intervals(rs, summ))
            tables[f"capabilities{suffix}"] = capability_table(summ)
            if len({r["model"] for r in rs}) > 1:
                tables[f"paired{suffix}"] = paired_table(rs)
        return tables

    def plots(self, tables: Mapping[str, list[dict[str, Any]]], out: Path,
              answers: Optional[Callable[[str], dict[str, Any]]] = None) -> list[Path | Job]:
        from icl import helpers

        out.mkdir(parents=True, exist_ok=True)
        jobs: list[Path | Job] = [  # in helper processes
            helpers.submit("figures", shot_curves, tables.get("accuracy", []), out),
            helpers.submit("figures", efficiency_front, tables.get("shot_summary", []), out)]
        return jobs  # collected by the runner (icl.run.outputs.files.Plots)

    def summary(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        rows = tables.get("shot_summary", [])
        if not rows:
            return ""
        from icl.report.tables import aligned

        table = [[r["model"], r["task"], _fmt(r["zero_shot"]), _fmt(r["peak"]), _fmt(r["efficiency"])] for r in rows]
        return "\n".join([f"vlicl ({self.protocol}): zero-shot / peak / ICL efficiency, accuracy in %",
                          *aligned([["model", "task", "zero-shot", "peak", "efficiency"], *table], right=[2, 3, 4])])

    def origin_lines(self) -> list[str]:
        """Where the data came from: built-in (generator version) or the release (folder, digest)."""
        if not self.release:
            return self._variant_lines() + [f"- data: built-in procedural data (generator digests: "
                    f"{', '.join(f'{t} `{self.data(t).digest[:16]}`' for t in self.task_ids())}); not the benchmark's "
                    "real data"]
        lines = self._variant_lines() + [f"- data: the published release at `{self.data_root}`"]
        lines += [f"  - {t}: `{self.data(t).origin}`, SHA-256 `{self.data(t).digest}`" for t in self.task_ids()]
        if self.absent:
            text = self.config["variant"] == "text"  # name the text folders looked for
            absent = [f"{t} (no {' or '.join(TASKS[t].text_folders)})" if text else t for t in self.absent]
            lines.append(f"- absent from the release (not run): {', '.join(absent)}")
        return lines

    def _variant_lines(self) -> list[str]:
        self.task_ids()
        if not self.not_in_variant:
            return []
        variant = self.config["variant"]
        return [f"- not run with --variant {variant}: {', '.join(self.not_in_variant)} ({VARIANT_WHY[variant]})"]

    def check_judge(self, judges: Any, asked: Optional[Sequence[type]] = None) -> None:
        """Refuse a judge that cannot judge this data: the built-in ``vlicl-judge`` recognises only
        the built-in drawings, so the release's text-to-image tasks need a vision-language judge
        (when some model of the run generates images at all). One judge (``max_judges``)."""
        super().check_judge(judges, asked)
        judge = next(iter(judge_names(judges)), None)
        self.judge_name = judge
        if asked is not None and not any(issubclass(t, GenerationRequest) for t in asked):
            return  # no model is asked for an image: nothing to judge
        t2i = [t for t in self.task_ids() if TASKS[t].direction != I2T]
        if self.release and t2i and judge in (None, BUILTIN_JUDGE):
            raise ValueError(f"vlicl: the text-to-image tasks {', '.join(t2i)} on release data need a vision-language "
                             f"judge: give --judge (e.g. hf-vlm:weights=PATH); {BUILTIN_JUDGE} recognises only the "
                             f"built-in drawings. Or leave them out with --tasks")

    def report(self, tables: Mapping[str, list[dict[str, Any]]]) -> str:
        c = self.config
        lines = ["## VL-ICL Bench", "",
                 f"Protocol {self.protocol}; parse mode {c['parse']}; TextOCR rule {c['textocr']}; prompt style "
                 f"{c['prompt_style']}" + (f" ({c['reference_family']})" if c["prompt_style"] == "reference" else "")
                 + (f"; support set shown {c['repeat']} times" if c["repeat"] > 1 else "")
                 + f"; efficiency over {c['efficiency']} shot counts.", ""]
        lines += self.origin_lines()
        lines.append("- failures: a failed text-to-image generation counts as wrong and stays in the denominator "
                     "(PROTOCOL §3.2); an image-to-text answer that failed is counted in the failures and left out "
                     "of the means")
        if any(TASKS[t].direction != I2T for t in self.task_ids()):
            named = f"`{self.judge_name}`" if self.judge_name else "the run's judge"
            lines.append(f"- judge of the text-to-image tasks: {named} (its identity is `judge` in results.json)")
        lines += ["", "Accuracy in % (mean over seeds; efficiency signed). Zero-shot / peak / efficiency per task "
                  "(* = a shot count of the curve overflowed the context: its queries count as wrong):", ""]
        summ = tables.get("shot_summary", [])
        settings = sorted({tuple(r.get(c) for c in SETTING) for r in summ}, key=str)
        for setting in settings:
            rs = [r for r in summ if tuple(r.get(c) for c in SETTING) == setting]
            tasks = [t for t in TASKS if any(r["task"] == t for r in rs)]
            models = sorted({r["model"] for r in rs})
            lines += [f"Setting: {', '.join(f'{k}={v}' for k, v in zip(SETTING, setting))}", "",
                      "| model | " + " | ".join(tasks) + " |", "|---" * (len(tasks) + 1) + "|"]
            for m in models:
                cells = []
                for t in tasks:
                    r = next((r for r in rs if r["model"] == m and r["task"] == t), None)
                    cells.append("-" if r is None else "/".join(_fmt(r[k]) for k in ("zero_shot", "peak", "efficiency"))
                                 + ("*" if r.get("overflow_shots") else ""))
                lines.append(f"| {m} | " + " | ".join(cells) + " |")
            lines.append("")
        ranks = tables.get("ranks", [])
        if ranks:
            lines += ["Average ranks over tasks (1 = best; zero-shot / peak / efficiency):", ""]
            for r in sorted(ranks, key=lambda r: (str(r["direction"]), str(r["description"]), str(r["model"]))):
                lines.append(f"- {r['direction']} ({r['tasks']} tasks, {r['variant']}, {r['description']}, {r['cot']}): "
                             f"{r['model']} {_fmt(r['zero_shot_rank'])} / {_fmt(r['peak_rank'])} / "
                             f"{_fmt(r['efficiency_rank'])}"
                             + (f" (overflow: {r['overflow_shots']})" if r.get("overflow_shots") else ""))
            lines.append("")
        missing = [(t, k, why) for t in self.task_ids() for k in self.shot_grid(t)
                   if (why := self.unavailable(t, k)) is not None]
        if missing:
            lines += ["Shot counts the data cannot supply (not run):", ""]
            lines += [f"- {t} {k}-shot: {why}" for t, k, why in missing]
            lines.append("")
        over = [r for r in tables.get("accuracy", []) if r.get("overflow")]
        if over:
            lines += ["Context overflow (queries recorded as wrong, never truncated; `--efficiency fitting` "
                      "summarises over the shot counts that fit):", ""]
            lines += [f"- {r['model']} {r['task']} {r['shots']}-shot: {r['overflow']} of {r['queries'] * r['seeds']}"
                      for r in over]
            lines.append("")
        return "\n".join(lines)

    # -- reproducibility ------------------------------------------------------------------------
    def episodes_csv(self) -> str:
        """Every episode's support list as CSV (``task, seed, shots, query_id, rank, support_id,
        protocol``): byte-identical whenever the plan is. Written by the one table writer
        (:func:`icl._csv.csv_text`): a release id a spreadsheet would run as a formula
        (``=``, ``+``, ``-``, ``@``, ...) gets a leading ``'``."""
        rows: list = []
        seen = set()
        for item in self.items():
            task, seed, shots, qid = item.payload
            if (task, seed, shots, qid) in seen:
                continue
            seen.add((task, seed, shots, qid))
            rows.extend(support_rows(self.episode(item), self.protocol))
        return csv_text(rows, ["task", "seed", "shots", "query_id", "rank", "support_id", "protocol"])

    def prompt_text(self, item: Item) -> str:
        """The item's prompt as text (see :func:`~icl.benchmarks.vlicl.predictions.prompt_text`)."""
        return prompt_text(self, item)

    def result_files(self, rows: Sequence[Mapping[str, Any]],
                     answers: Callable[[str], dict[str, Any]]) -> dict[str, str]:
        """``predictions.jsonl`` and ``prompts.jsonl`` (:mod:`icl.benchmarks.vlicl.predictions`)."""
        return prediction_files(self, rows, answers)

    def write_artifacts(self, out: Path) -> dict[str, str]:
        text = self.episodes_csv()
        (out / "episodes.csv").write_text(text, encoding="utf-8")
        return {"episodes.csv": hashlib.sha256(text.encode()).hexdigest()}

    def fingerprints(self) -> dict[str, str]:
        out = {f"vlicl/{t}/records": self.data(t).digest for t in self.task_ids()}
        out["vlicl/episodes.csv"] = hashlib.sha256(self.episodes_csv().encode()).hexdigest()
        return out


def _is_image(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim == 3 and x.shape[2] == 3 and x.dtype == np.uint8 and x.size > 0


def _fmt(v: Any) -> str:
    return "nan" if isinstance(v, float) and math.isnan(v) else f"{float(v):.2f}".rstrip("0").rstrip(".")





def _right(value: float) -> str:
    return "right" if value else "wrong"
