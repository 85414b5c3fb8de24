"""A Hugging Face Hub of our own on 127.0.0.1 (FastAPI under uvicorn, in a daemon thread) that
the real ``huggingface_hub`` client (2.4) downloads from, with ``HF_ENDPOINT`` pointed at it.

It serves what ``snapshot_download`` / ``hf_hub_download`` ask for (read from the client's
``hf_api.py``, ``_snapshot_download.py`` and ``file_download.py``):

- ``GET /api/models/{org}/{name}/revision/{rev}``: ``repo_info`` (``id``, ``sha``, ``siblings``);
- ``GET /api/models/{org}/{name}/tree/{rev}[/{path}]``: ``list_repo_tree`` (``type``, ``path``,
  ``size``, ``oid``: the git blob id, and ``lfs`` with the SHA-256 for ``*.safetensors``);
- ``HEAD`` / ``GET /{org}/{name}/resolve/{rev}/{path}``: the file, with ``X-Repo-Commit``,
  ``ETag`` (the SHA-256 for LFS files, the git blob id otherwise, as the Hub), ``Content-Length``
  and ``Range`` (206) support.

Faults and hostile modes (attributes a test sets; see ``HubServer.__init__``): a connection
dropped mid-file once or on every try, a body corrupted in transit, a commit id that is a path,
listing entries outside the repository, an announced size that is not the file's, a body sent a
byte at a time (tests/models/test_hub_hostile.py, tests/data/test_fetch_hostile.py).

Errors carry the Hub's ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``,
``EntryNotFound``), which the client turns into its typed errors. A private repository answers
only ``Authorization: Bearer <token>``. Every request is recorded (method, path, whether it
carried the token), so a test can assert an offline run asked nothing.

The fixtures at the end (``hub_llava``, ``server``, ``hf_env``) are imported by the test modules
that use them (tests/models/test_hub.py, tests/run/planning/test_prefetch.py).
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi import Request as HTTPRequest  # annotations are strings here: FastAPI resolves them in this module
from fastapi.responses import JSONResponse, Response

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    private: bool = False
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # commit -> {path: bytes}
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> commit


@dataclass
class Request:
    method: str
    path: str
    authorized: bool  # carried the server's token
    range: str = ""  # its Range header


class HubServer:
    """``commit(repo, files, branch=...)`` adds a commit and moves the branch to it; a dataset
    repository is named ``datasets/ORG/NAME``."""

    def __init__(self, token: Optional[str] = None):
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.requests: list[Request] = []
        # faults, by file path: ``drop`` (a GET of the whole file sends half its bytes and closes
        # the connection, once per path listed), ``corrupt`` (bytes served instead of the file's,
        # with the file's headers: ETag, size and listing unchanged)
        self.drop: set[str] = set()
        self.corrupt: dict[str, bytes] = {}
        # hostile modes: ``commit_id`` (repo_info answers this as every revision's commit, e.g.
        # ``../../../../X``), ``listed`` (extra entries of every tree listing, e.g. a ``../`` path),
        # ``sizes`` (the size a listing announces for a path, e.g. 10**12), ``always_drop`` (every
        # GET of the path sends half and closes), ``trickle`` (path -> seconds between the bytes
        # of its body, sent one at a time)
        self.commit_id: Optional[str] = None
        self.listed: list[dict] = []
        self.sizes: dict[str, int] = {}
        self.always_drop: set[str] = set()
        self.trickle: dict[str, float] = {}
        self._thread: Optional[threading.Thread] = None
        self.app = self._app()

    # --- content -----------------------------------------------------------------------------
    def commit(self, repo_id: str, files: dict[str, bytes], branch: str = "main", tags: tuple[str, ...] = (),
               private: bool = False) -> str:
        repo = self.repos.setdefault(repo_id, Repo(private=private))
        parent = repo.refs.get(branch, "")
        h = hashlib.sha1(f"{repo_id}\0{parent}\0".encode())
        for path in sorted(files):
            h.update(f"{path}\0{git_blob_id(files[path])}\n".encode())
        sha = h.hexdigest()
        repo.commits[sha] = dict(files)
        repo.refs[branch] = sha
        for tag in tags:
            repo.refs[tag] = sha
        return sha

    def commit_folder(self, repo_id: str, folder: Path, extra: Optional[dict[str, bytes]] = None, **kw) -> str:
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return self.commit(repo_id, {**files, **(extra or {})}, **kw)

    # --- HTTP --------------------------------------------------------------------------------
    def _app(self):
        app = FastAPI()
        server = self

        def error(status: int, code: str, message: str, commit: Optional[str] = None) -> Response:
            headers = {"X-Error-Code": code, "X-Error-Message": message}
            if commit:
                headers["X-Repo-Commit"] = commit
            return JSONResponse({"error": message}, status_code=status, headers=headers)

        def lookup(request: HTTPRequest, org: str, name: str, rev: str, kind: str = ""):
            """(repo_id, commit, files) or an error response; ``kind`` "datasets/" for a dataset
            repository (held under the key ``datasets/ORG/NAME``)."""
            auth = request.headers.get("authorization", "")
            ok = server.token is not None and auth == f"Bearer {server.token}"
            server.requests.append(Request(request.method, request.url.path, ok, request.headers.get("range", "")))
            repo_id = f"{org}/{name}"
            repo = server.repos.get(kind + repo_id)
            if repo is None or (repo.private and not ok):  # the Hub hides a private repository: 401
                return error(401 if repo is not None else 404, "RepoNotFound", f"Repository {repo_id} not found")
            commit = rev if rev in repo.commits else repo.refs.get(rev)
            if commit is None:
                return error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return repo_id, commit, repo.commits[commit]

        @app.get("/api/models/{org}/{name}/revision/{rev:path}")
        def repo_info(request: HTTPRequest, org: str, name: str, rev: str, kind: str = ""):
            found = lookup(request, org, name, rev, kind)
            if isinstance(found, Response):
                return found
            repo_id, commit, files = found
            if server.commit_id is not None:
                commit = server.commit_id
            return {"id": repo_id, "modelId": repo_id, "sha": commit, "private": server.repos[kind + repo_id].private,
                    "siblings": [{"rfilename": p} for p in sorted(files)], "tags": [], "downloads": 0, "likes": 0}

        @app.get("/api/models/{org}/{name}/tree/{rev}")
        @app.get("/api/models/{org}/{name}/tree/{rev}/{sub:path}")
        def tree(request: HTTPRequest, org: str, name: str, rev: str, sub: str = "", recursive: bool = False,
                 kind: str = ""):
            found = lookup(request, org, name, rev, kind)
            if isinstance(found, Response):
                return found
            _, _, files = found
            prefix = f"{sub.strip('/')}/" if sub else ""
            out = []
            for path in sorted(files):
                if not path.startswith(prefix) or (not recursive and "/" in path[len(prefix):]):
                    continue
                data = files[path]
                size = server.sizes.get(path, len(data))
                entry = {"type": "file", "path": path, "size": size, "oid": git_blob_id(data)}
                if path.endswith(LFS_SUFFIXES):
                    entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": size, "pointerSize": 134}
                out.append(entry)
            return out + list(server.listed)

        @app.api_route("/{org}/{name}/resolve/{rev}/{path:path}", methods=["GET", "HEAD"])
        def resolve(request: HTTPRequest, org: str, name: str, rev: str, path: str, kind: str = ""):
            found = lookup(request, org, name, rev, kind)
            if isinstance(found, Response):
                return found
            _, commit, files = found
            if path not in files:
                return error(404, "EntryNotFound", f"{path} does not exist at {rev}", commit)
            data = files[path]
            etag = hashlib.sha256(data).hexdigest() if path.endswith(LFS_SUFFIXES) else git_blob_id(data)
            headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
            if path.endswith(LFS_SUFFIXES):
                headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
            status, body = 200, data
            spec = request.headers.get("range", "")
            if request.method == "GET" and spec.startswith("bytes="):
                first, _, last = spec[len("bytes="):].partition("-")
                start = int(first) if first else len(data) - int(last)
                end = int(last) if first and last else len(data) - 1
                status, body = 206, data[start:end + 1]
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            if request.method == "HEAD":
                headers["Content-Length"] = str(len(body))
                return Response(status_code=status, headers=headers)
            if path in server.corrupt:
                body = server.corrupt[path][len(data) - len(body):]
            if path in server.drop and status == 200:
                server.drop.discard(path)
                return _Dropped(body, headers)
            if path in server.always_drop:
                return _Dropped(body, headers, status)
            if path in server.trickle:
                return _Trickle(body, headers, status, server.trickle[path], server)
            return Response(content=body, status_code=status, headers=headers,
                            media_type="application/octet-stream")

        # datasets (snapshot_download(repo_type="dataset")): the same answers under /api/datasets/
        # and /datasets/
        @app.get("/api/datasets/{org}/{name}/revision/{rev:path}")
        def dataset_info(request: HTTPRequest, org: str, name: str, rev: str):
            return repo_info(request, org, name, rev, "datasets/")

        @app.get("/api/datasets/{org}/{name}/tree/{rev}")
        @app.get("/api/datasets/{org}/{name}/tree/{rev}/{sub:path}")
        def dataset_tree(request: HTTPRequest, org: str, name: str, rev: str, sub: str = "", recursive: bool = False):
            return tree(request, org, name, rev, sub, recursive, "datasets/")

        @app.api_route("/datasets/{org}/{name}/resolve/{rev}/{path:path}", methods=["GET", "HEAD"])
        def dataset_resolve(request: HTTPRequest, org: str, name: str, rev: str, path: str):
            return resolve(request, org, name, rev, path, "datasets/")

        return app

    # --- lifetime ----------------------------------------------------------------------------
    def start(self) -> "HubServer":
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test Hub server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class _Dropped(Response):
    """A response announcing the whole body (Content-Length) that sends its first half and then
    fails, so uvicorn closes the connection mid-file (the client sees an incomplete body)."""

    def __init__(self, body: bytes, headers: dict[str, str], status: int = 200):
        super().__init__(status_code=status)
        self.body, self.fields = body, headers

    async def __call__(self, scope, receive, send):
        headers = [(k.lower().encode(), v.encode()) for k, v in self.fields.items()]
        headers.append((b"content-length", str(len(self.body)).encode()))
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": self.body[:len(self.body) // 2], "more_body": True})
        raise ConnectionAbortedError("dropped mid-file by the test Hub")


class _Trickle(Response):
    """A response announcing the whole body that sends it one byte every ``every`` seconds."""

    def __init__(self, body: bytes, headers: dict[str, str], status: int, every: float, hub: "HubServer"):
        super().__init__(status_code=status)
        self.body, self.fields, self.every, self.hub = body, headers, every, hub

    async def __call__(self, scope, receive, send):
        import asyncio

        headers = [(k.lower().encode(), v.encode()) for k, v in self.fields.items()]
        headers.append((b"content-length", str(len(self.body)).encode()))
        await send({"type": "http.response.start", "status": self.status_code, "headers": headers})
        for i in range(len(self.body)):
            if self.hub._server.should_exit:  # the test is over
                break
            await send({"type": "http.response.body", "body": self.body[i:i + 1], "more_body": True})
            until = time.monotonic() + self.every
            while time.monotonic() < until and not self.hub._server.should_exit:
                await asyncio.sleep(min(0.1, self.every))
        await send({"type": "http.response.body", "body": b"", "more_body": False})


# --- fixtures ----------------------------------------------------------------------------------
TOKEN = "hf_icltestSECRETtoken1234567890"
REPO = "org/tiny"


@pytest.fixture(scope="module")
def hub_llava(tmp_path_factory):
    """Two tiny LLaVA folders saved with the official classes (other seeds: other weights), the
    contents of commits A and B."""
    from icl.models.vlm.tiny import build_llava

    base = tmp_path_factory.mktemp("tiny-llava")
    return build_llava(base / "a", seed=0), build_llava(base / "b", seed=1)


@pytest.fixture
def server(hub_llava):
    """A fresh Hub per test: org/tiny with main (and tag v1) at commit A (``server.a``), plus a
    pickle and a README the default patterns leave out; org/private readable with TOKEN only."""
    srv = HubServer(token=TOKEN).start()
    srv.a = srv.commit_folder(REPO, hub_llava[0], extra={"pytorch_model.bin": b"pickled", "README.md": b"# tiny"},
                              tags=("v1",))
    srv.commit_folder("org/private", hub_llava[0], private=True)
    yield srv
    srv.stop()


@pytest.fixture
def hf_env(tmp_path, monkeypatch, server):
    """HF_ENDPOINT at the test Hub, the user's cache (HF_HOME) in tmp_path, online, no token;
    yields the cache folder (HF_HOME/hub)."""
    from icl.models import hub

    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN",
                 "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    hub.forget()
    yield tmp_path / "hf-home" / "hub"
    hub.forget()
