"""A real `nl2sh --config X --web-only` for the browser tests (test_web_console.py and
test_webui.py): the Web console and MCP/A2A in the same process, both on port 0, with a
fixed protocol token; an MCP client call to it that waits for the owner's decision; and
the "SIGTERM it, wait, require exit 0" every fixture that runs nl2sh ends with (conftest.py
too).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

NL2SH_BIN = os.environ.get("NL2SH_BIN") or str(Path(__file__).parents[2] / "target/debug/nl2sh")
TOKEN = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
MCP_PROTOCOL_VERSION = "2025-11-25"
STARTUP_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0
# Both ports 0; the protocols start with the service; a request waits a minute for the owner.
BASE_CONFIG = (
    "web_port = 0\n"
    "protocol_service_port = 0\n"
    f'protocol_token = "{TOKEN}"\n'
    "protocol_start_with_service = true\n"
    "approval_timeout_secs = 60\n"
)


def require_nl2sh() -> str:
    """Path of the binary under test; fail early with a clear message if it is missing."""
    if not os.access(NL2SH_BIN, os.X_OK):
        pytest.fail(f"nl2sh binary not found or not executable: {NL2SH_BIN} (set NL2SH_BIN or run cargo build)")
    return NL2SH_BIN


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without NL2SH_PROTOCOL_TOKEN and NL2SH_LOG (the token is the
    configuration's), with `extra` on top."""
    env = dict(os.environ)
    env.pop("NL2SH_PROTOCOL_TOKEN", None)
    env.pop("NL2SH_LOG", None)
    env.update(extra)
    return env


@contextmanager
def sigterm_on_exit(proc: subprocess.Popen, what: str, stderr_text: Callable[[], str]) -> Iterator[None]:
    """Leaving the block, SIGTERM `proc` (if it still runs) and wait for it; fail if it
    outlives STOP_TIMEOUT. When the block ended normally, its exit code must be 0."""
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"{what} did not exit within {STOP_TIMEOUT}s of SIGTERM:\n{stderr_text()}")
    assert rc == 0, f"{what} exit code after SIGTERM was {rc}, expected 0:\n{stderr_text()}"


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: str

    def json(self):
        return json.loads(self.body)


@dataclass
class WebService:
    """A running `nl2sh --web-only` and what the tests need to reach it."""

    config: Path
    dir: Path
    proc: subprocess.Popen
    stderr_path: Path
    env: dict[str, str]  # the service's, and its CLI's (cli())
    token: str = TOKEN
    origin: str = ""  # http://127.0.0.1:<web port>
    web_port: int = 0
    protocol_port: int = 0
    mcp_url: str = ""  # as the service advertises it (its status' mcp_url)
    a2a_url: str = ""

    def cli(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(
            [NL2SH_BIN, "--config", str(self.config), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
        )

    def status(self) -> dict:
        """`nl2sh service status --json`, {} when it printed no JSON."""
        r = self.cli("service", "status", "--json")
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError:
            return {}

    def pending(self) -> list[dict]:
        """`nl2sh protocol approvals --json`: the requests waiting, as the CLI sees them."""
        r = self.cli("protocol", "approvals", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def protocol_post(self, path: str, body: dict, extra: dict[str, str], timeout: float) -> Response:
        """A POST to the protocols' port on 127.0.0.1 with the bearer token."""
        conn = http.client.HTTPConnection("127.0.0.1", self.protocol_port, timeout=timeout)
        try:
            headers = {
                "Host": f"127.0.0.1:{self.protocol_port}",
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                **extra,
            }
            conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
            r = conn.getresponse()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode())
        finally:
            conn.close()

    def invoke_async(self, command: str) -> McpCall:
        """`tools/call` of nl2sh_invoke shell.exec `command` over MCP, on a thread (it
        waits for the owner's decision)."""
        return McpCall(self, command)

    def invoke_tool_async(self, tool: str, arguments: dict) -> McpCall:
        """`tools/call` of nl2sh_invoke `tool` with `arguments`, on a thread."""
        return McpCall(self, json.dumps(arguments), tool=tool, arguments=arguments)


class McpCall:
    """One MCP tools/call (nl2sh_invoke, shell.exec unless told) in flight on a thread."""

    def __init__(
        self,
        service: WebService,
        command: str,
        tool: str = "shell.exec",
        arguments: dict | None = None,
        meta: dict | None = None,
        headers: dict[str, str] | None = None,
    ):
        """`meta`: the params' `_meta` (a 2026-07-28 request's); `headers`: more headers."""
        self.command = command
        self._answer: dict | None = None
        self._error: BaseException | None = None
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "nl2sh_invoke",
                "arguments": {"tool": tool, "arguments": arguments if arguments is not None else {"command": command}},
                **({"_meta": meta} if meta is not None else {}),
            },
        }
        extra = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MCP_PROTOCOL_VERSION,
            **(headers or {}),
        }

        def run() -> None:
            try:
                r = service.protocol_post("/mcp", body, extra, timeout=120)
                assert r.status == 200, r
                self._answer = _jsonrpc_message(r)
            except BaseException as e:  # noqa: BLE001 - handed to the test in result()
                self._error = e

        self._thread = threading.Thread(target=run, daemon=True, name=f"mcp {command[:30]}")
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: float = 15.0) -> dict:
        """The tools/call result ({"content", "structuredContent", "isError"})."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the MCP call did not return within {timeout}s: {self.command}"
        if self._error is not None:
            raise self._error
        assert self._answer is not None and "result" in self._answer, f"protocol error: {self._answer}"
        return self._answer["result"]


def _jsonrpc_message(r: Response) -> dict:
    """The JSON-RPC answer of a Streamable HTTP POST (a JSON body or an SSE stream)."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.body.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "id" in message:
                    return message
        raise AssertionError(f"no JSON-RPC answer in the event stream: {r.body!r}")
    return r.json()


def _port_of(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


S = TypeVar("S", bound=WebService)


@contextmanager
def web_service(
    directory: Path,
    name: str,
    *,
    extra_config: str = "",
    env: Mapping[str, str] | None = None,
    cls: type[S] = WebService,
) -> Iterator[S]:
    """Run `nl2sh --config <directory>/config.toml --web-only` (BASE_CONFIG, then
    `extra_config`) with clean_env() plus `env`, until both the web console and the
    protocols listen; SIGTERM it afterwards and require exit 0. `name` ("console",
    "service") is what messages call it; its stderr goes to <directory>/<name>.stderr.
    The object is a `cls` (a WebService, or a subclass with more helpers)."""
    require_nl2sh()
    config = directory / "config.toml"
    config.write_text(BASE_CONFIG + extra_config)
    config.chmod(0o600)
    stderr_path = directory / f"{name}.stderr"
    service_env = clean_env(**(env or {}))
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            [NL2SH_BIN, "--config", str(config), "--web-only"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=service_env,
        )
    s = cls(config=config, dir=directory, proc=proc, stderr_path=stderr_path, env=service_env)
    with sigterm_on_exit(proc, "nl2sh --web-only", s.stderr_text):
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"nl2sh --web-only exited early (rc={proc.returncode}):\n{s.stderr_text()}")
            conns = s.status().get("connections") or []
            web = next((c for c in conns if c.get("transport") == "web" and c.get("listen") and c.get("url")), None)
            proto = next((c for c in conns if c.get("mcp_url") and c.get("listen")), None)
            if web and proto:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the {name} did not start in {STARTUP_TIMEOUT}s: {conns}\n{s.stderr_text()}")
            time.sleep(0.05)
        s.web_port = _port_of(web["listen"])
        assert web["url"] == f"http://127.0.0.1:{s.web_port}", web
        s.origin = web["url"]
        # The protocols may listen on 0.0.0.0 (advertising a network address): connect to
        # loopback on the same port.
        s.protocol_port = _port_of(proto["listen"])
        s.mcp_url = proto["mcp_url"]
        s.a2a_url = proto["a2a_url"]
        assert s.mcp_url.endswith(f":{s.protocol_port}/mcp"), proto
        yield s


def android_standins_copy(screen_xml: str, front: str | None = None) -> Path:
    """A world-readable copy of the Android stand-ins (tests/fixtures/android-bin) whose
    `uiautomator` serves `screen_xml` and, when `front` ("package/.Activity") is given,
    whose `dumpsys` puts that app in front. The UI tools run as Android's shell user
    (pytest's tmp_path is private to root) and the service passes no test variable such
    as NL2SH_STANDIN_FOCUS to them, so a test edits a copy. The caller removes its parent."""
    reachable = Path(tempfile.mkdtemp(prefix="nl2sh-standins-"))
    reachable.chmod(0o755)
    standins = reachable / "android-bin"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "android-bin", standins)
    if front is not None:
        dumpsys = standins / "dumpsys"
        text = dumpsys.read_text()
        default = "focus=${NL2SH_STANDIN_FOCUS:-com.android.settings/.Settings}"
        assert default in text, "the stand-in dumpsys changed: update android_standins_copy"
        dumpsys.write_text(text.replace(default, f"focus={front}"))
    (standins / "data" / "window_dump.xml").write_text(screen_xml)
    return standins
