"""How a benchmark describes its published data to ``python -m icl.data fetch NAME``.

A benchmark declares its releases by name in ``Benchmark.releases`` (docs/plugins.md,
"Published data"), each one of:

- :class:`HubRelease`: a Hugging Face Hub dataset at a pinned commit, which fetch downloads,
  unpacks and hands to the benchmark's ``check_release``;
- :class:`Elsewhere`: a release published off the Hub, which fetch only says where to get;
- :class:`NotPublished`: a name fetch knows but does not fetch, and why.

Plain descriptions, below the benchmarks and the runner so that both may name them; the
mechanism (download, unpacking, the manifest) is the runner's (``icl/run/planning/fetch.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union


class ReleaseError(Exception):
    """A local copy of a release its benchmark cannot read (one line, naming what and where)."""


@dataclass(frozen=True)
class HubRelease:
    """A release published as a Hub dataset: ``repo`` at ``commit`` (40 hex), ``folders`` the
    top-level folders it holds (copied with everything under them), ``archives`` the zips each
    folder's files come in (extracted into it, as the publisher's instructions do),
    ``allow_patterns`` the files downloaded (None: the whole snapshot), ``source`` where this
    was read."""

    repo: str
    commit: str
    folders: tuple[str, ...]
    archives: tuple[str, ...]
    licence: str
    source: str
    allow_patterns: Optional[tuple[str, ...]] = None


@dataclass(frozen=True)
class Elsewhere:
    """A release published off the Hub: what it is (``release``), its licence, where to get it,
    what to download there, and ``then``: the lines saying what to do with it once downloaded
    (fetch prints them as they are; it downloads nothing)."""

    release: str
    licence: str
    where: str
    download: str
    then: str = ""


@dataclass(frozen=True)
class NotPublished:
    """A name fetch knows but does not fetch: ``why`` (a sentence, printed after the name)."""

    why: str


Release = Union[HubRelease, Elsewhere, NotPublished]
