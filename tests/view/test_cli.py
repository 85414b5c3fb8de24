"""``python -m icl.run view`` as a user starts it: a real subprocess printing its URL."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.view._runs import write_run

ROOT = Path(__file__).resolve().parents[2]


def start(args, cwd):
    proc = subprocess.Popen([sys.executable, "-m", "icl.run", "view", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = proc.stdout.readline()
    return proc, line


def fetch(host, port, path, headers=None):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, r.getheader("Location"), body


def test_view_serves_runs_under_the_default_folder_on_loopback(tmp_path):
    write_run(tmp_path / "runs" / "toy", n=4)
    proc, line = start(["--port", "0"], tmp_path)
    try:
        m = re.fullmatch(r"icl view: serving runs at http://127\.0\.0\.1:(\d+)/\n", line)
        assert m, line
        status, _, body = fetch("127.0.0.1", int(m.group(1)), "/")
        assert status == 200 and b"toy" in body
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_any_other_address_needs_the_token_printed_once(tmp_path):
    write_run(tmp_path / "r" / "toy", n=4)
    proc, line = start([str(tmp_path / "r"), "--host", "0.0.0.0", "--port", "0"], tmp_path)
    try:
        m = re.fullmatch(r"icl view: serving \S+ at http://0\.0\.0\.0:(\d+)/\?token=([\w-]{40,})\n", line)
        assert m, line
        port, token = int(m.group(1)), m.group(2)
        assert "shown once" in proc.stdout.readline()
        assert fetch("127.0.0.1", port, "/")[0] == 403
        status, location, _ = fetch("127.0.0.1", port, f"/?token={token}")
        assert status == 303 and location == "/"
        assert fetch("127.0.0.1", port, "/", {"Cookie": f"icl_view_token={token}"})[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("args, message", [
    (["nowhere"], "nowhere: no such folder"),
    (["--port", "70000"], "--port 70000: give a port from 0 to 65535"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_arguments_give_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "runs").mkdir()
    done = subprocess.run([sys.executable, "-m", "icl.run", "view", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("icl view: ") and message in lines[0], done.stderr


def test_a_port_in_use_is_one_line(tmp_path):
    import socket

    (tmp_path / "runs").mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        t = time.time()
        done = subprocess.run([sys.executable, "-m", "icl.run", "view", "--port", str(port)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and time.time() - t < 60
