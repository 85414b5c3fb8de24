"""Model weights from the Hugging Face Hub: ``weights=hf:ORG/NAME[@REVISION][/SUBPATH]``.

Grammar (:func:`parse_ref` is the only parser)::

    hf:ORG/NAME[@REVISION][/SUBPATH]

- ``ORG`` and ``NAME``: the repository id, each a Hub name (letters, digits, ``-``, ``_``, ``.``;
  starting and ending with a letter or digit; no ``--`` or ``..``).
- ``REVISION`` (default ``main``): a branch, a tag or a 40-hex commit. It ends at the first
  ``/``; a ``/`` inside a revision (``refs/pr/1``) is written ``%2F``.
- ``SUBPATH``: a folder or a file inside the repository (``llm``, ``unet``,
  ``painter_vit_large.pth``), ``/``-separated, without empty, ``.`` or ``..`` parts.

:func:`resolve` downloads with the real ``huggingface_hub`` client into the user's standard
cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``), only the files the family needs
(``allow_patterns``: by default configurations, tokenizers, processors, chat templates and
``*.safetensors``; pickles only when the family names the file), honours ``HF_HUB_OFFLINE``
(from the cache only) and ``HF_TOKEN`` (read by the client, never by icl), refuses a repository
whose configuration has ``auto_map`` (its own code; icl never sets ``trust_remote_code``), and
returns the snapshot folder with the resolved commit and the file list: the model's identity
(``icl.models.weights.weight_identity``) records the commit, never a branch name, so a moved
branch is another model, and a snapshot is never re-hashed (the commit names its content).

A reference is resolved once per run (:func:`forget` starts a run afresh): the commit the
identity records is the commit the model loads, even if the branch moves meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, Union
from urllib.parse import unquote

from icl.models.weights import WeightsError

PREFIX = "hf:"
DEFAULT_REVISION = "main"
# What a transformers or diffusers folder needs to load: never *.bin / *.pt / *.ckpt pickles
# (a family that loads one names the file, which is then added).
DEFAULT_PATTERNS = ("*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken")
# A diffusers pipeline: its components' folders only (the root of SD repositories also holds
# multi-GB single-file checkpoints the pipeline never reads).
DIFFUSERS_PATTERNS = ("model_index.json", "*/*.json", "*/*.safetensors", "*/*.txt", "*/*.model", "*/*.jinja")
# Precision and EMA variants beside the default files: from_pretrained without ``variant`` reads
# neither, so they are never downloaded.
IGNORE_PATTERNS = ("*.fp16.*", "*.bf16.*", "*.non_ema.*", "*.ema.*")
# Files whose ``auto_map`` would point transformers at code inside the repository.
# (model_index.json: a diffusers pipeline whose components name a module of the repository.)
CODE_CONFIGS = ("config.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json",
                "image_processor_config.json", "video_preprocessor_config.json", "model_index.json")

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REF = re.compile(rf"hf:(?P<org>{_NAME})/(?P<name>{_NAME})(?:@(?P<rev>[^/]*))?(?:/(?P<sub>.*))?")
_REVISION = re.compile(r"[A-Za-z0-9._+-]+(?:/[A-Za-z0-9._+-]+)*")
COMMIT = re.compile(r"[0-9a-f]{40}")


class HubError(WeightsError):
    """A ``hf:`` reference that is malformed, cannot be resolved, or is refused (one line)."""


@dataclass(frozen=True)
class HubRef:
    """A parsed ``hf:`` reference (``revision`` None: ``main``; ``subpath`` "": the root)."""

    repo_id: str
    revision: Optional[str]
    subpath: str
    text: str

    @property
    def pinned(self) -> bool:
        return self.revision is not None and COMMIT.fullmatch(self.revision) is not None

    def at(self, commit: str) -> str:
        """The reference pinned to ``commit`` (the canonical text the identity records)."""
        return f"{PREFIX}{self.repo_id}@{commit}" + (f"/{self.subpath}" if self.subpath else "")


@dataclass(frozen=True)
class HubSnapshot:
    """A resolved reference: the cache's snapshot folder, its commit, and the files of the
    repository (``/``-separated, relative to its root) the family's patterns selected."""

    ref: HubRef
    commit: str
    root: Path
    files: tuple[str, ...]

    @property
    def path(self) -> Path:
        """The folder or file ``SUBPATH`` names inside the snapshot (the root without one)."""
        return self.root / self.ref.subpath if self.ref.subpath else self.root

    @property
    def pinned(self) -> str:
        return self.ref.at(self.commit)

    def identity(self) -> dict[str, Any]:
        return dict(repo=self.ref.repo_id, commit=self.commit, subpath=self.ref.subpath, files=list(self.files))


def is_hub_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def parse_ref(text: str) -> HubRef:
    """``hf:ORG/NAME[@REVISION][/SUBPATH]`` -> :class:`HubRef`; :class:`HubError` names what is wrong."""
    grammar = "expected hf:ORG/NAME[@REVISION][/SUBPATH]"
    if not is_hub_ref(text):
        raise HubError(f"{text!r} is not a Hub reference ({grammar})")
    if text == DEFAULT:
        raise HubError(f"{text!r} stands for a family's official weights (expand_default) and is not "
                       f"a repository ({grammar})")
    m = _REF.fullmatch(text)
    if m is None:
        raise HubError(f"{text!r}: {grammar} (ORG and NAME: letters, digits, '-', '_', '.', "
                       f"starting and ending with a letter or digit)")
    org, name, rev, sub = m.group("org", "name", "rev", "sub")
    for part in (org, name):
        if "--" in part or ".." in part:
            raise HubError(f"{text!r}: {part!r} is not a Hub name ('--' and '..' are not allowed)")
    if rev is not None:
        if rev == "":
            raise HubError(f"{text!r}: empty revision after '@' ({grammar})")
        rev = unquote(rev)  # %2F: a '/' inside a revision
        if _REVISION.fullmatch(rev) is None:
            raise HubError(f"{text!r}: revision {rev!r} is not a branch, tag or 40-hex commit")
    if sub is not None:
        parts = sub.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise HubError(f"{text!r}: subpath {sub!r} has an empty, '.' or '..' part")
    return HubRef(repo_id=f"{org}/{name}", revision=rev, subpath=sub or "", text=text)


# --- where the client looks --------------------------------------------------------------------
# huggingface_hub reads HF_ENDPOINT, HF_HUB_CACHE / HF_HOME and HF_HUB_OFFLINE once, when it is
# first imported (transformers imports it early); a variable the user sets later (a notebook, a
# test) is read here at each resolution and handed to the client explicitly. Unset: the client's
# own defaults.

def offline() -> bool:
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return value.upper() in constants.ENV_VARS_TRUE_VALUES if value is not None else constants.is_offline_mode()


def cache_dir() -> Path:
    from huggingface_hub import constants

    env = os.environ
    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not hub and env.get("HF_HOME"):
        hub = os.path.join(env["HF_HOME"], "hub")
    return Path(os.path.expandvars(os.path.expanduser(hub or constants.HF_HUB_CACHE)))


def endpoint() -> Optional[str]:
    value = os.environ.get("HF_ENDPOINT", "").rstrip("/")
    return value or None


# --- resolution --------------------------------------------------------------------------------
_lock = threading.Lock()
_resolved: dict[tuple[str, tuple[str, ...]], HubSnapshot] = {}  # (reference, patterns) -> snapshot


def forget() -> None:
    """Forget this process's resolutions: the next :func:`resolve` asks the Hub again (a run
    starts with it, so a moved branch is seen by the next run, never in the middle of one)."""
    with _lock:
        _resolved.clear()


def snapshot_of(path: Union[str, os.PathLike]) -> Optional[HubSnapshot]:
    """The resolved snapshot ``path`` is (or lies in), None for a path that came from no ``hf:``."""
    p = Path(path)
    with _lock:
        snaps = list(_resolved.values())
    for snap in reversed(snaps):  # the latest resolution of a folder wins
        if p == snap.path or snap.path in p.parents:
            return snap
    return None


def pinned(text: str) -> Optional[str]:
    """The pinned form (``hf:ORG/NAME@COMMIT[/SUBPATH]``) of a reference this run resolved."""
    with _lock:
        snaps = [s for (t, _), s in _resolved.items() if t == text]
    return snaps[-1].pinned if snaps else None


def resolved(pinned_text: str) -> HubSnapshot:
    """The snapshot this run resolved whose pinned reference is ``pinned_text``."""
    with _lock:
        snaps = [s for s in _resolved.values() if s.pinned == pinned_text]
    if not snaps:
        raise HubError(f"{pinned_text}: not resolved in this run")
    return snaps[-1]


def resolve(ref: Union[str, HubRef], patterns: Optional[Sequence[str]] = None,
            also: Sequence[str] = ()) -> HubSnapshot:
    """Download (or, offline, find in the cache) the files of ``ref`` matching ``patterns``
    (default :data:`DEFAULT_PATTERNS`) plus the names in ``also`` (the file the family loads),
    each relative to ``SUBPATH``. Raises :class:`HubError` (one line) when it cannot."""
    ref = parse_ref(ref) if isinstance(ref, str) else ref
    wanted = tuple(dict.fromkeys(tuple(patterns or DEFAULT_PATTERNS) + tuple(a for a in also if a)))
    key = (ref.text, wanted)
    with _lock:
        if key in _resolved:
            return _resolved[key]
    scope = (lambda p: f"{ref.subpath}/{p}") if ref.subpath else (lambda p: p)
    # SUBPATH may name a file: the bare SUBPATH pattern selects it (and nothing in a folder)
    allow = ([ref.subpath] if ref.subpath else []) + [scope(p) for p in wanted]
    # configurations first: a repository with its own code is refused before its weights download
    first = _download(ref, ref.revision or DEFAULT_REVISION, [scope(c) for c in CODE_CONFIGS])
    commit = Path(first).name
    if COMMIT.fullmatch(commit) is None:  # the cache's layout: snapshots/<commit>
        raise HubError(f"{ref.text}: the cache returned {first}, not a snapshots/<commit> folder")
    _refuse_code(ref, Path(first))
    # online: what will come down (sizes and hashes from the Hub's tree listing), checked against
    # the cache's free space before any weight downloads, and the new files' hashes after
    fresh = [] if offline() else _to_download(ref, commit, allow)
    root = Path(_download(ref, commit, allow))
    _verify(ref, commit, root, fresh)
    files = _selected(root, allow)
    if not files:
        raise HubError(f"{ref.text} (commit {commit}): no file matches {', '.join(allow)}"
                       + (" in the cache" if offline() else ""))
    snap = HubSnapshot(ref=ref, commit=commit, root=root, files=files)
    with _lock:
        _resolved[key] = snap
        # the pinned text resolves to this snapshot too: an adapter re-resolving its pinned
        # reference (icl.run.planning.models.make_model pins it) asks the Hub nothing more in this process
        _resolved.setdefault((snap.pinned, wanted), snap)
    return snap


# --- before and after a download: space, sizes, hashes -----------------------------------------

def free_space(path: Path) -> int:
    """Free bytes on the disk holding ``path`` (its nearest existing folder). Tests replace it."""
    for p in (path, *path.parents):
        try:
            return shutil.disk_usage(p).free
        except OSError:
            continue
    return 0


@dataclass(frozen=True)
class _Remote:
    """One file of a repository's tree listing: its path, size and hash (``sha256`` for an LFS
    file, else the git blob id ``oid``); ``blob``: its name in the cache's ``blobs/`` (the ETag)."""

    path: str
    size: int
    sha256: Optional[str]
    oid: str

    @property
    def blob(self) -> str:
        return self.sha256 or self.oid


def _to_download(ref: HubRef, commit: str, allow: list[str]) -> list[_Remote]:
    """The files ``allow`` selects at ``commit`` that the cache does not hold yet; refuses (one
    line) when their total size exceeds the free space of the cache's disk."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile
    from huggingface_hub.utils import filter_repo_objects

    try:
        tree = [f for f in HfApi(endpoint=endpoint()).list_repo_tree(ref.repo_id, recursive=True, revision=commit)
                if isinstance(f, RepoFile)]
    except Exception as exc:  # noqa: BLE001 - any failure to list: one line, as a download failure
        raise HubError(f"{ref.text}: cannot list the files of {ref.repo_id}@{commit} "
                       f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    by_path = {f.path: f for f in tree}
    chosen = filter_repo_objects(sorted(by_path), allow_patterns=allow, ignore_patterns=list(IGNORE_PATTERNS))
    blobs = cache_dir() / ("models--" + ref.repo_id.replace("/", "--")) / "blobs"
    wanted = [_Remote(p, int(by_path[p].size or 0), by_path[p].lfs.sha256 if by_path[p].lfs else None,
                      by_path[p].blob_id) for p in chosen]
    fresh = [r for r in wanted if not (blobs / r.blob).is_file()]
    need = sum({r.blob: r.size for r in fresh}.values())  # a blob shared by two paths downloads once
    if need:
        cache = cache_dir()
        free = free_space(cache)
        if free < need:
            raise HubError(f"{ref.text} (commit {commit}): {len(fresh)} files to download need {_mib(need)}, "
                           f"the disk of {cache} has {_mib(free)} free; free space or set HF_HUB_CACHE elsewhere")
    return fresh


def _verify(ref: HubRef, commit: str, root: Path, fresh: Sequence[_Remote]) -> None:
    """The files just downloaded against the Hub's listing: SHA-256 of an LFS file (the client
    checks sizes only), the git blob id of any other. A mismatch removes the file from the cache
    (the next run downloads it again) and raises one line naming it."""
    for r in fresh:
        path = root / r.path
        if not path.is_file():
            continue  # not downloaded (a pattern of the tree matched nothing the client fetched)
        digest = _sha256(path) if r.sha256 else _git_blob_id(path)
        expected = r.sha256 or r.oid
        if digest != expected:
            blob = path.resolve()
            for p in (path, blob):
                try:
                    p.unlink()
                except OSError:
                    pass
            kind = "SHA-256" if r.sha256 else "git blob id"
            raise HubError(f"{ref.text} (commit {commit}): {r.path} is corrupt: its {kind} is {digest}, the Hub "
                           f"lists {expected}; removed from the cache, run again to download it anew")


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            yield chunk


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    for chunk in _chunks(path):
        h.update(chunk)
    return h.hexdigest()


def _git_blob_id(path: Path) -> str:
    h = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    for chunk in _chunks(path):
        h.update(chunk)
    return h.hexdigest()


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _download(ref: HubRef, revision: str, allow: list[str]) -> str:
    from huggingface_hub import errors, snapshot_download

    is_offline = offline()
    try:
        return snapshot_download(ref.repo_id, revision=revision, allow_patterns=allow,
                                 ignore_patterns=list(IGNORE_PATTERNS), cache_dir=cache_dir(),
                                 endpoint=endpoint(), local_files_only=is_offline)
    except errors.IncompleteSnapshotError:
        why = "HF_HUB_OFFLINE is set" if is_offline else f"the Hub ({endpoint() or 'huggingface.co'}) cannot be reached"
        raise HubError(f"{ref.text}: the cached snapshot (revision {revision}) lacks files this model needs "
                       f"and {why}; {_prefetch_hint(ref)}") from None
    except errors.LocalEntryNotFoundError:
        if is_offline:
            raise HubError(f"{ref.text}: not in the Hugging Face cache ({cache_dir()}) and HF_HUB_OFFLINE is set; "
                           f"{_prefetch_hint(ref)}") from None
        raise HubError(f"{ref.text}: the Hub ({endpoint() or 'huggingface.co'}) cannot be reached and the "
                       f"reference is not in the cache ({cache_dir()})") from None
    except errors.GatedRepoError:
        raise HubError(f"{ref.text}: {ref.repo_id} is gated: accept its conditions on the Hub and set HF_TOKEN "
                       f"to a token of that account") from None
    except errors.RevisionNotFoundError:
        raise HubError(f"{ref.text}: {ref.repo_id} has no revision {revision!r} (a branch, tag or commit)") from None
    except errors.RepositoryNotFoundError:
        raise HubError(f"{ref.text}: repository {ref.repo_id} not found on {endpoint() or 'huggingface.co'} "
                       f"(private? set HF_TOKEN)") from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise HubError(f"{ref.text}: the Hub answered HTTP {status} for {ref.repo_id}@{revision}") from None
    except OSError as exc:
        raise HubError(f"{ref.text}: cannot download into {cache_dir()} ({type(exc).__name__}: {exc})") from None


def _prefetch_hint(ref: HubRef) -> str:
    return ("prefetch it where the network is reachable (e.g. on a login node): run the same command once "
            "without HF_HUB_OFFLINE (or with --prefetch), with the same HF_HOME / HF_HUB_CACHE")


def _refuse_code(ref: HubRef, root: Path) -> None:
    """A configuration with ``auto_map`` names classes defined by the repository's own Python:
    icl never runs it (trust_remote_code stays False), so the reference is refused up front."""
    base = root / ref.subpath if ref.subpath else root
    for name in CODE_CONFIGS:
        path = base / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise HubError(f"{ref.text}: {name} is not valid JSON ({exc})") from None
        if isinstance(data, dict) and data.get("auto_map"):
            raise HubError(f"{ref.text}: {name} has auto_map ({', '.join(sorted(data['auto_map']))}): the model needs "
                           f"its repository's own code, which icl never runs (trust_remote_code=False)")
        if name == "model_index.json" and isinstance(data, dict):
            custom = _custom_components(data)
            if custom:
                raise HubError(f"{ref.text}: model_index.json names {', '.join(custom)}: the pipeline needs its "
                               f"repository's own code, which icl never runs (only diffusers and transformers "
                               f"classes are loaded)")


def _custom_components(index: dict[str, Any]) -> list[str]:
    """The entries of a diffusers ``model_index.json`` that name code of the repository: a
    component ``[library, class]`` whose library is neither diffusers nor transformers (a null
    entry is an absent optional component), or a ``_class_name`` given as ``[module, class]``."""
    from icl.models.weights import PIPELINE_LIBRARIES

    out = []
    if isinstance(index.get("_class_name"), list):
        out.append(f"_class_name {index['_class_name']}")
    for key, entry in sorted(index.items()):
        if key.startswith("_") or not isinstance(entry, list) or len(entry) != 2 or entry[0] is None:
            continue
        if entry[0] not in PIPELINE_LIBRARIES:
            out.append(f"{key} {entry}")
    return out


def _selected(root: Path, allow: list[str]) -> tuple[str, ...]:
    """The snapshot's files the patterns select: the same list online (just downloaded) and
    offline (from the cache), so the identity does not depend on the network."""
    from huggingface_hub.utils import filter_repo_objects

    present = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return tuple(filter_repo_objects(present, allow_patterns=allow, ignore_patterns=list(IGNORE_PATTERNS)))


# --- official weights: ``weights=hf:default`` ------------------------------------------------
DEFAULT = "hf:default"


@dataclass(frozen=True)
class Official:
    """Where a family's authors publish its weights. ``ref`` (an ``hf:`` reference at ``main``:
    the identity pins the commit it resolves to) is what ``weights=hf:default`` means; None when
    the weights are not on the Hub (or no single checkpoint is the family's), with ``where``
    saying where they live. ``files``: pickles the family loads (downloaded beside the default
    patterns); ``source``: the README or model card that names the repository."""

    ref: Optional[str]
    source: str
    where: str = ""
    files: tuple[str, ...] = ()


# One table: (family, argument) -> Official. docs/models.md "Official weights" lists the same rows
# (tests/models/test_hub_defaults.py compares them).
OFFICIAL: dict[tuple[str, str], Official] = {
    ("hf-vlm", "weights"): Official(None, "", "any transformers vision-language folder (no single official "
                                    "checkpoint): name one, e.g. weights=hf:llava-hf/llava-1.5-7b-hf"),
    ("lvm", "weights"): Official("hf:Emma02/LVM_ckpts", "ytongbai/LVM README.md, 'Models'"),
    ("lvm", "vqgan_weights"): Official("hf:Emma02/vqvae_ckpts", "ytongbai/LVM README.md, 'Models'",
                                       files=("pytorch_model.bin",)),
    ("delvm", "weights"): Official(None, "ggjy/DeLVM README.md", "LLaMA-1b-hf on OneDrive / Baidu Disk, "
                                   "llama_300m_hf.zip as a GitHub release (ggjy/DeLVM README); put the folder at "
                                   "$ICL_WEIGHTS_DIR/delvm/llm/ or pass weights=PATH"),
    ("delvm", "vqgan_weights"): Official(None, "ggjy/DeLVM README.md", "the open-muse VQGAN folder, not named by the "
                                         "DeLVM README (not verified); LVM's is hf:Emma02/vqvae_ckpts"),
    ("painter", "weights"): Official("hf:BAAI/Painter/painter_vit_large.pth", "baaivision/Painter Painter/README.md"),
    ("seggpt", "weights"): Official("hf:BAAI/seggpt-vit-large", "baaivision/Painter SegGPT/SegGPT_inference/README.md "
                                    "(original BAAI/SegGPT seggpt_vit_large.pth); transformers port BAAI/seggpt-vit-large"),
    ("mae-vqgan", "weights"): Official(None, "amirbar/visual_prompting README.md", "checkpoint-1000.pth on Google Drive "
                                       "(amirbar/visual_prompting README, 'Pretrained Models'); put it at "
                                       "$ICL_WEIGHTS_DIR/mae-vqgan/ or pass weights=PATH"),
    ("mae-vqgan", "vqgan_weights"): Official(None, "amirbar/visual_prompting README.md", "taming-transformers' "
                                             "vqgan_imagenet_f16_1024 last.ckpt on heibox.uni-heidelberg.de (linked "
                                             "from the amirbar/visual_prompting README); pass vqgan_weights=PATH"),
    ("prompt-diffusion", "weights"): Official("hf:zhendongw/prompt-diffusion-diffusers",
                                              "Zhendong-Wang/Prompt-Diffusion README.md, 'Hugging Face Diffusers Suport'"),
    ("sd-vicl", "weights"): Official(None, "", "SD-VICL's authors published no code or weights (which Stable "
                                     "Diffusion they used: not verified); pass a Stable Diffusion 1.x/2.x folder, "
                                     "e.g. weights=hf:stable-diffusion-v1-5/stable-diffusion-v1-5"),
    ("visualcloze", "weights"): Official("hf:VisualCloze/VisualClozePipeline-384",
                                         "lzyhha/VisualCloze README.md; diffusers' VisualClozePipeline docs"),
    ("diffusers-t2i", "weights"): Official(None, "", "any diffusers text-to-image pipeline (no single official "
                                           "checkpoint): name one from docs/generators.md, e.g. "
                                           "weights=hf:stable-diffusion-v1-5/stable-diffusion-v1-5"),
    ("janus", "weights"): Official("hf:deepseek-community/Janus-Pro-1B",
                                   "deepseek-ai/Janus README.md (deepseek-ai/Janus-Pro-1B, DeepSeek's own format); "
                                   "transformers-format conversion deepseek-community/Janus-Pro-1B"),
    ("flux-kontext", "weights"): Official("hf:black-forest-labs/FLUX.1-Kontext-dev",
                                          "black-forest-labs/flux docs/image-editing.md"),
    ("qwen-image-edit", "weights"): Official("hf:Qwen/Qwen-Image-Edit-2509", "QwenLM/Qwen-Image README.md"),
    ("clip-judge", "weights"): Official("hf:openai/clip-vit-large-patch14",
                                        "Hub repositories duplicated from openai/clip-vit-large-patch14"),
    ("tiny-chat-judge", "weights"): Official(None, "", "built in: random tiny weights made by icl, no download"),
    ("cobsat-judge", "weights"): Official(None, "", "weight-free (reads CoBSAT-lite drawings)"),
    ("vif-spatial-judge", "weights"): Official(None, "", "weight-free (IoU of the generated layout)"),
    ("openai", "weights"): Official(None, "", "an HTTP API (model=, base_url=): no weights"),
    ("openai-images", "weights"): Official(None, "", "an HTTP API (model=, base_url=): no weights"),
}


def official(family: str, argument: str = "weights") -> Official:
    """The table entry of ``family``'s ``argument``; :class:`HubError` for a family not in it."""
    entry = OFFICIAL.get((family, argument))
    if entry is None:
        known = sorted({f for f, _ in OFFICIAL})
        raise HubError(f"{family}: no official {argument} known for this model (hf:default is defined for "
                       f"{', '.join(known)}); name the repository, hf:ORG/NAME[@REVISION][/SUBPATH]")
    return entry


def expand_default(text: Any, family: str, argument: str = "weights") -> Any:
    """``hf:default`` -> the family's official reference (any other value unchanged); a family
    whose weights are not on the Hub raises :class:`HubError`, one line saying where they are."""
    if text != DEFAULT:
        return text
    entry = official(family, argument)
    if entry.ref is None:
        raise HubError(f"{family}: {argument}=hf:default: no Hub default; {entry.where}")
    parse_ref(entry.ref)  # the table goes through the one parser
    return entry.ref


def downloads_allowed() -> bool:
    """``ICL_HUB_DEFAULTS=1``: a model given no weights (and none under ``$ICL_WEIGHTS_DIR``)
    loads its family's official Hub weights, as with ``weights=hf:default``."""
    return os.environ.get("ICL_HUB_DEFAULTS", "").strip().lower() in ("1", "true", "yes", "on")
