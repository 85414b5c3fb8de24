"""CoBSAT prompt lists (PROTOCOL §4) and ``prompts.csv``.

A prompt of task T at N shots is N demonstrations and a query, each a text value (the query's
last), and one latent value shared by all of them.

- Paired (default): prompt i draws, from ``derive_seed(seed, "cobsat", "*", task, "cobsat/{task}/{i}")``,
  a permutation of the ten text values and one latent value; at N shots it takes the first N + 1
  text values. The latent value of prompt i is the same at every N. The misleading variant's
  (wrong) latent values come from a later draw of the same generator: ``N + 1`` of the nine others.
- Legacy (``--legacy-prompts``): the reference's published list
  (``load_datasets/prompts_list_default.json``), which is ``random.seed(123)`` then, 1,000 times,
  ``shuffle(x)`` and ``shuffle(theta)`` on ``list(range(10))`` (copied after each round); prompt i
  at N shots takes ``x[0..N]`` and the latent value ``theta[N + 1]``, which changes with N (the
  misleading variant prints ``theta[0..N]``).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from icl.benchmarks.cobsat.vocab import TASKS, display
from icl.data.seeds import rng

SHOTS = (0, 2, 4, 6, 8)
PROMPTS = 1000
LEGACY_SEED = 123
CSV_COLUMNS = ("task", "shots", "index", "text_values", "latent", "prompts")


@dataclass(frozen=True)
class Prompt:
    """Indices into the task's vocabularies: ``text`` (demonstrations then the query) and ``latent``."""

    task: str
    shots: int
    index: int
    text: tuple[int, ...]
    latent: int
    misleading: tuple[int, ...] = ()  # latent indices the misleading variant prints, one per item

    @property
    def text_values(self) -> tuple[str, ...]:
        vals = TASKS[self.task].text_values
        return tuple(vals[i] for i in self.text)

    @property
    def latent_value(self) -> str:
        return TASKS[self.task].latent_values[self.latent]


@lru_cache(maxsize=1)
def legacy_lists(n: int = PROMPTS) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """The reference's ``(x_list, theta_list)`` pairs, rebuilt from its rule (``gen_prompts.py``)."""
    state = random.Random(LEGACY_SEED)  # the same Mersenne Twister stream as random.seed(123)
    x, theta = list(range(10)), list(range(10))
    out = []
    for _ in range(n):
        state.shuffle(x)
        state.shuffle(theta)
        out.append((tuple(x), tuple(theta)))
    return tuple(out)


def _check(task: str, shots: int, index: int) -> None:
    if task not in TASKS:
        raise ValueError(f"cobsat: unknown task {task!r}; tasks: {', '.join(TASKS)}")
    if not 0 <= shots <= 8:
        raise ValueError(f"cobsat: shots must be in 0..8 (ten values make at most 8 demonstrations, a query "
                         f"and the legacy latent slot), got {shots}")
    if index < 0:
        raise ValueError(f"cobsat: prompt index must be >= 0, got {index}")


def paired_prompt(task: str, shots: int, index: int, seed: int = 0) -> Prompt:
    """Prompt ``index`` of ``task`` at ``shots`` in the paired lists (PROTOCOL §4)."""
    _check(task, shots, index)
    order, latent, wrong = _paired_draw(task, index, seed)
    return Prompt(task, shots, index, order[:shots + 1], latent, wrong[:shots + 1])


@lru_cache(maxsize=65536)
def _paired_draw(task: str, index: int, seed: int) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
    """Prompt ``index``'s draws, the same at every shot count (cached: a plan asks five times)."""
    g = rng(seed, "cobsat", "*", task, f"cobsat/{task}/{index}")
    order = g.permutation(10)
    latent = int(g.integers(10))
    wrong = g.permutation([v for v in range(10) if v != latent])  # drawn after the rest: it never changes them
    return tuple(int(v) for v in order), latent, tuple(int(v) for v in wrong)


def legacy_prompt(task: str, shots: int, index: int) -> Prompt:
    """Prompt ``index`` of ``task`` at ``shots`` exactly as the reference builds it."""
    _check(task, shots, index)
    if index >= PROMPTS:
        raise ValueError(f"cobsat: the legacy list has {PROMPTS} prompts, asked for index {index}")
    x, theta = legacy_lists()[index]
    return Prompt(task, shots, index, x[:shots + 1], theta[shots + 1], theta[:shots + 1])


def prompt(task: str, shots: int, index: int, legacy: bool = False, seed: int = 0) -> Prompt:
    return legacy_prompt(task, shots, index) if legacy else paired_prompt(task, shots, index, seed)


def prompts_csv(prompts: Iterable[Prompt], legacy: bool) -> str:
    """``prompts.csv``: one row per prompt, text values printed through the word map, joined by
    ``|`` (the query's last); byte-identical whenever the plan is."""
    from icl.report.tables import csv_text  # the one table writer (formula-like cells get a leading ')

    kind = "legacy" if legacy else "paired"
    return csv_text([[p.task, p.shots, p.index, "|".join(display(v) for v in p.text_values), display(p.latent_value),
                      kind] for p in prompts], CSV_COLUMNS)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
