"""A scripted HTTP/1.1 server on 127.0.0.1 (stdlib ``ThreadingHTTPServer``) for the transport
faults a well-behaved server never shows: a body that trickles, a body too large, a malformed or
undecodable answer, an echo of the request's headers, ``Retry-After``, and a fixed latency.

``script(body_text, headers) -> Reply`` decides each answer; the default answers every request
``{"choices": [{"message": {"content": "ok:<id>"}}]}`` after ``latency_s``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    trickle_s: float = 0.0  # pause between body bytes
    content_length: Optional[int] = None  # declared length (default: the body's)


def completion(content: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}).encode()


class RawServer:
    def __init__(self, script: Optional[Callable[[str, dict], Reply]] = None, latency_s: float = 0.0) -> None:
        self.script = script or (lambda body, headers: Reply(body=completion("ok")))
        self.latency_s = latency_s
        self.received = 0
        self.connections = 0  # TCP connections accepted
        self.bodies: list[str] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with outer.lock:
                    outer.connections += 1
                # headers and body leave in separate writes: without TCP_NODELAY, Nagle's algorithm
                # and the client's delayed ACK add ~40 ms per answer (real servers set it too)
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
                with outer.lock:
                    outer.received += 1
                    outer.bodies.append(raw)
                if outer.latency_s:
                    time.sleep(outer.latency_s)
                reply = outer.script(raw, dict(self.headers))
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                length = len(reply.body) if reply.content_length is None else reply.content_length
                self.send_header("Content-Length", str(length))
                self.end_headers()
                try:
                    if reply.trickle_s:
                        for b in reply.body:
                            self.wfile.write(bytes([b]))
                            self.wfile.flush()
                            time.sleep(reply.trickle_s)
                    else:
                        self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the stdlib's 5 resets simultaneous connects (real servers: 2048)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "RawServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    """``python raw_http_server.py LATENCY_S``: serve the default answers in this process (its
    own interpreter, so a benchmark's client does not share a GIL with it); prints the base URL,
    then serves until stdin closes."""
    import sys

    with RawServer(latency_s=float(sys.argv[1])) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
