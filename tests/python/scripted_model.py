"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1 for the delegation tests.

Each POST to /v1/chat/completions takes the next scripted step; every request body and its
Authorization header are recorded so a test can check what the Agent sent the model.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Step:
    """One model answer: final text, tool calls, an HTTP error, optionally after a delay."""

    content: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0


def answer(text: str, delay: float = 0.0) -> Step:
    return Step(content=text, delay=delay)


def call(tool: str, arguments: dict[str, Any]) -> Step:
    return Step(tool_calls=[(tool, arguments)])


class ScriptedModel:
    def __init__(self, steps: list[Step] | None = None, key: str = "sk-scripted-test-key-0123456789") -> None:
        self.key = key
        self.steps = list(steps or [])
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with model._lock:
                    model.requests.append(body)
                    model.authorizations.append(self.headers.get("Authorization"))
                    step = model.steps.pop(0) if model.steps else Step(content="(script exhausted)")
                if step.delay:
                    # Sleep in slices so the server can stop while a request hangs.
                    end = time.monotonic() + step.delay
                    while time.monotonic() < end and not model._stop.is_set():
                        time.sleep(0.05)
                if step.status != 200:
                    payload = json.dumps({"error": {"message": f"scripted status {step.status}"}}).encode()
                    self._reply(step.status, payload)
                    return
                message: dict[str, Any] = {"role": "assistant", "content": step.content}
                if step.tool_calls:
                    message["tool_calls"] = [
                        {
                            "id": f"call_{len(model.requests)}_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                        for i, (name, args) in enumerate(step.tool_calls)
                    ]
                payload = json.dumps(
                    {
                        "id": f"chatcmpl-{len(model.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls" if step.tool_calls else "stop",
                            }
                        ],
                    }
                ).encode()
                self._reply(200, payload)

            def _reply(self, status: int, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the Agent gave up on this request (cancelled)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def push(self, *steps: Step) -> None:
        with self._lock:
            self.steps.extend(steps)

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
