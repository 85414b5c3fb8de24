"""``python -m icl.run view [DIR ...] [--port N] [--host H]`` (also ``icl view``): start the viewer
on the run folders under each DIR (default ``runs/``) and print its URL."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from icl.view.server import Viewer, loopback, make_server, new_token


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # a usage error: one line, exit 2
        raise SystemExit(_fail(f"{message} (see python -m icl.run view --help)"))


def _fail(message: str) -> int:
    print(f"icl view: {message}", file=sys.stderr)
    return 2


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = _Parser(prog="python -m icl.run view", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("dirs", nargs="*", type=Path, metavar="DIR", help="folders holding run folders (default: runs/)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other address needs the token printed once)")
    try:
        args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    dirs = args.dirs or [Path("runs")]
    for d in dirs:
        if not d.is_dir():
            return _fail(f"{d}: no such folder (give the folder holding your run folders, e.g. runs/)")
    if not 0 <= args.port <= 65535:
        return _fail(f"--port {args.port}: give a port from 0 to 65535")
    token = None if loopback(args.host) else new_token()
    viewer = Viewer([d.resolve() for d in dirs], token)
    try:
        server = make_server(viewer, args.host, args.port)
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    host, port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{host}]" if ":" in str(host) else host
    query = f"?token={token}" if token else ""
    print(f"icl view: serving {', '.join(map(str, dirs))} at http://{shown}:{port}/{query}", flush=True)
    if token:
        print("icl view: the token above is shown once; anyone with it can read these runs", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        viewer.close()
    return 0
