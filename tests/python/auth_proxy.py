"""A reverse proxy on 127.0.0.1 that adds `Authorization: Bearer <token>` to every request,
for test clients that cannot send credentials (the MCP conformance suite, and the A2A TCK
through scripts/tck/run.py).

Everything else passes through as it came: method, path, query, headers (Host included, so
nl2sh's Host check sees the proxy's address, which nl2sh is told to advertise) and body;
the answer comes back with its status and headers (Content-Type included, so an SSE answer
stays `text/event-stream`). Answers are buffered whole before they are passed on, which
suits clients that read a response to its end; a stream that never ends (a GET SSE
stream) reaches the client when nl2sh closes it.
"""

from __future__ import annotations

import http.client
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Hop-by-hop headers (RFC 9110 7.6.1) are the proxy's own on each side; everything else
# passes through as it came.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}
UPSTREAM_TIMEOUT = 120.0


class _QuietServer(ThreadingHTTPServer):
    """A client closing its keep-alive connection is normal here, not worth a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class AuthProxy:
    """`AuthProxy(token)` listens at once (on `port`); `start((host, port))` begins
    forwarding to nl2sh; `close()` stops it. Also a context manager that closes."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.upstream: tuple[str, int] | None = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def forward(self) -> None:
                body = self._read_body()
                if body is None:
                    return
                assert proxy.upstream is not None
                headers = [
                    (k, v)
                    for k, v in self.headers.items()
                    if k.lower() not in HOP_BY_HOP and k.lower() not in ("authorization", "content-length")
                ]
                headers.append(("Authorization", f"Bearer {proxy.token}"))
                if body or self.command in ("POST", "PUT", "PATCH"):
                    headers.append(("Content-Length", str(len(body))))
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=UPSTREAM_TIMEOUT)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for k, v in headers:
                        conn.putheader(k, v)
                    conn.endheaders(body or None)
                    reply = conn.getresponse()
                    payload = reply.read()
                except OSError as e:
                    self._fail(502, f"nl2sh did not answer: {e}")
                    return
                finally:
                    conn.close()
                self.send_response_only(reply.status, reply.reason)
                for k, v in reply.getheaders():
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                if reply.status not in (204, 304) and not (100 <= reply.status < 200):
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD" and reply.status not in (204, 304):
                    self.wfile.write(payload)

            def _read_body(self) -> bytes | None:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    self._fail(400, "bad Content-Length")
                    return None
                return self.rfile.read(length) if length > 0 else b""

            def _fail(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = forward

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.thread.start()

    def close(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> AuthProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
