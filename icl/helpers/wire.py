"""How the run and its helper processes talk: the frames of the job and answers streams (magic,
kind, length), the job targets (``"module:name"``), and the command line a helper starts with."""

from __future__ import annotations

import importlib
import json
import os
import struct
import sys
from typing import Any, Callable, Union, cast


#: a frame: magic, kind, length of the payload (a helper's answers stream is checked frame by frame)
HEADER = struct.Struct(">4sBQ")
MAGIC = b"iclH"
JOB, ANSWER, BEAT, HELLO = 0, 1, 2, 3
MAX_FRAME = 1 << 30  # a larger length is corrupt framing, never a real answer
#: seconds between a busy helper's heartbeats, and a helper's silence (no heartbeat, no answer)
#: after which it is taken for stuck (stopped, frozen) and killed: ``ICL_HELPER_SILENCE_S``
HEARTBEAT_S = 0.5

Target = Union[Callable[..., Any], str]


def resolve(target: Target) -> Callable[..., Any]:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    fn: Any = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    return cast(Callable[..., Any], fn)

# a helper's interpreter: Ctrl-C is the parent's to handle (a helper ends when its input closes,
# at the parent's exit); argv: sys.path, added niceness, warm-up target, fds of forked siblings
BOOT = ("import os, sys, json, signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
         "getattr(os, 'nice', int)(int(sys.argv[2])); sys.path[:] = json.loads(sys.argv[1]); "
         "from icl.helpers.child import serve; serve(sys.argv[3], json.loads(sys.argv[4]))")


def boot_argv(nice: int, warm_up: str, siblings: list[tuple[int, int]]) -> list[str]:
    path = [p or os.getcwd() for p in sys.path]  # this process's imports, the current folder included
    return [sys.executable, "-c", BOOT, json.dumps(path), str(nice), warm_up, json.dumps(siblings)]


def send(stream: Any, data: bytes, kind: int = ANSWER) -> None:
    stream.write(HEADER.pack(MAGIC, kind, len(data)) + data)
    stream.flush()


def receive_job(stream: Any) -> bytes:
    """A job's frame (a helper reading its input; the end of it, or anything but a job frame,
    is :class:`EOFError`: the helper exits)."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        raise EOFError("end of stream")
    magic, kind, size = HEADER.unpack(head)
    if magic != MAGIC or kind != JOB or size > MAX_FRAME:
        raise EOFError("corrupt framing")
    data: bytes = stream.read(size)
    if len(data) < size:
        raise EOFError("end of stream")
    return data
