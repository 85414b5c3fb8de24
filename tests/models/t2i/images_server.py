"""A real OpenAI-compatible images server on 127.0.0.1 (the standard library's threading HTTP
server in a daemon thread) for the ``openai-images`` tests.

``POST /v1/images/generations`` (JSON) and ``POST /v1/images/edits`` (multipart/form-data,
parsed with the standard library's MIME parser) answer ``{"data": [{"b64_json": PNG}]}`` with
an image of the asked ``size``: for a generation a colour derived from the prompt, for an edit
the first input image resized. Every request is recorded (path, headers, fields, images).
``fail_next(429, 500, ..., marker=)`` answers the next requests (with ``marker``, only those
whose prompt holds it) with those statuses; ``answer_url``
answers with a URL instead of base64 (as ``response_format=url`` would).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections import deque
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import cv2
import numpy as np


def png_b64(image: np.ndarray) -> str:
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(image[..., ::-1]))
    assert ok
    return base64.b64encode(buf.tobytes()).decode("ascii")


def decode_png(data: bytes) -> np.ndarray:
    return np.ascontiguousarray(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)[..., ::-1])


def answer_image(fields: dict[str, Any], images: list[np.ndarray]) -> np.ndarray:
    w, h = (int(v) for v in str(fields["size"]).split("x"))
    if images:
        return cv2.resize(images[0], (w, h), interpolation=cv2.INTER_NEAREST)
    colour = np.frombuffer(hashlib.sha256(str(fields["prompt"]).encode()).digest()[:3], np.uint8)
    out = np.empty((h, w, 3), np.uint8)
    out[:] = colour
    out[: h // 2, : w // 2] = 255 - colour  # not flat: resizing must be checked
    return out


class ImagesServer:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.faults: deque[tuple[int, str | None]] = deque()
        self.answer_url = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                fields, images, names = server.parse(self.headers.get("content-type", ""), body)
                server.received.append(dict(path=self.path, headers=dict(self.headers), fields=fields,
                                            images=images, image_fields=names))
                if server.faults and (server.faults[0][1] or "") in str(fields.get("prompt", "")):
                    status = server.faults.popleft()[0]
                    self._send(status, {"error": {"message": f"injected {status}"}}, {"retry-after": "0"})
                    return
                if self.path not in ("/v1/images/generations", "/v1/images/edits"):
                    self._send(404, {"error": {"message": "no such endpoint"}})
                    return
                if server.answer_url:
                    self._send(200, {"data": [{"url": "http://127.0.0.1/image.png"}]})
                    return
                self._send(200, {"created": 0, "data": [{"b64_json": png_b64(answer_image(fields, images))}]})

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @staticmethod
    def parse(content_type: str, body: bytes) -> tuple[dict[str, Any], list[np.ndarray], list[str]]:
        if content_type.startswith("application/json"):
            return json.loads(body), [], []
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        fields: dict[str, Any] = {}
        images, names = [], []
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if part.get_filename():
                images.append(decode_png(part.get_payload(decode=True)))
                names.append(name)
            else:
                fields[name] = part.get_payload(decode=True).decode()
        return fields, images, names

    def fail_next(self, *statuses: int, marker: str | None = None) -> None:
        self.faults.extend((s, marker) for s in statuses)

    def __enter__(self) -> "ImagesServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
