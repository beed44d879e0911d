"""Fixtures for driving the nl2sh binary with the official MCP Python SDK."""

from __future__ import annotations

import os
import queue
import re
import secrets
import subprocess
import threading
import time
from dataclasses import dataclass
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from scripted_model import ScriptedModel
from web_service import require_nl2sh, sigterm_on_exit

# Stand-in Android programs (screencap, uiautomator, input, ...) put first on PATH so the
# server registers its Android tools exactly as it would on a device.
ANDROID_STANDINS = Path(__file__).parents[1] / "fixtures" / "android-bin"


def android_env(**extra: str) -> dict[str, str]:
    """The test environment with the Android stand-ins first on PATH."""
    return dict(os.environ, PATH=f"{ANDROID_STANDINS}:{os.environ.get('PATH', '')}", **extra)

STARTUP_TIMEOUT = 15.0
_BLOCK_END = ("Set NL2SH_PROTOCOL_TOKEN", "This output contains the token")


# The seven MCP tools nl2sh lists, in their order (docs/PROTOCOLS.md).
MCP_TOOLS = [
    "nl2sh_inspect",
    "nl2sh_tools",
    "nl2sh_invoke",
    "nl2sh_read_screen",
    "nl2sh_ask",
    "nl2sh_get_task",
    "nl2sh_cancel_task",
]


@dataclass
class Server:
    url: str
    port: int
    token: str
    config: Path
    stdout: list[str]


@pytest.fixture
def nl2sh_bin() -> str:
    """Path of the binary under test; fail early with a clear message if it is missing."""
    return require_nl2sh()


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A config.toml in a fresh directory (state goes to config.state/ next to it). Nobody
    approves in these tests, so pending approvals expire after a second."""
    cfg = tmp_path / "config.toml"
    cfg.write_text("approval_timeout_secs = 1\n")
    return cfg


@pytest.fixture
def server(nl2sh_bin: str, config_file: Path, tmp_path: Path):
    """Run `protocol serve` on 127.0.0.1:0 with a known token; SIGTERM it afterwards and require exit 0."""
    with serve(nl2sh_bin, config_file, tmp_path) as running:
        yield running


@pytest.fixture
def model():
    """A scripted OpenAI-compatible model on 127.0.0.1 (see scripted_model.py)."""
    scripted = ScriptedModel()
    try:
        yield scripted
    finally:
        scripted.close()


@pytest.fixture
def agent_server(nl2sh_bin: str, tmp_path: Path, model: ScriptedModel):
    """A server whose built-in Agent asks the scripted model; its key comes from the environment."""
    with serve_agent(nl2sh_bin, tmp_path, model) as running:
        yield running


@contextmanager
def serve_agent(nl2sh_bin: str, tmp_path: Path, model: ScriptedModel, approval_timeout_secs: int = 1) -> Iterator[Server]:
    """`serve` with the built-in Agent asking `model` (its key from the environment)."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f"approval_timeout_secs = {approval_timeout_secs}\n"
        "[model]\n"
        f'base_url = "{model.base_url}"\n'
        'model = "scripted"\n'
        'api_key_env = "NL2SH_TEST_MODEL_KEY"\n'
        "max_steps = 4\n"
        "request_timeout_secs = 60\n"
    )
    with serve(nl2sh_bin, cfg, tmp_path, NL2SH_TEST_MODEL_KEY=model.key) as running:
        yield running


@contextmanager
def serve(
    nl2sh_bin: str,
    config_file: Path,
    tmp_path: Path,
    *,
    token: str | None = None,
    advertised_url: str | None = None,
    **extra_env: str,
) -> Iterator[Server]:
    """Run `protocol serve` for `config_file` on 127.0.0.1:0 with a known token (`token`,
    else a fresh one); SIGTERM it afterwards and require exit 0. With `advertised_url`
    (a proxy in front), nl2sh advertises that instead of its own address, and
    `Server.url` is the proxy's."""
    token = token or "py-test-token-" + secrets.token_hex(20)
    env = android_env(NL2SH_PROTOCOL_TOKEN=token, **extra_env)
    stderr_path = tmp_path / "serve.stderr"
    advertise = ["--advertised-url", advertised_url] if advertised_url else []
    with stderr_path.open("wb") as stderr_file:
        proc = subprocess.Popen(
            [nl2sh_bin, "--config", str(config_file), "protocol", "serve", "--host", "127.0.0.1", "--port", "0",
             *advertise],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            env=env,
            text=True,
        )

    # Drain stdout on a thread so the pipe can never fill up and block the server.
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    pump_thread = threading.Thread(target=pump, daemon=True)
    pump_thread.start()

    def stderr_text() -> str:
        return stderr_path.read_text(errors="replace")

    try:
        with sigterm_on_exit(proc, "server", stderr_text):
            deadline = time.monotonic() + STARTUP_TIMEOUT
            url = listen = None
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    pytest.fail(f"server startup block not complete in {STARTUP_TIMEOUT}s:\n{seen}\n{stderr_text()}")
                try:
                    line = lines.get(timeout=remaining)
                except queue.Empty:
                    continue
                if line is None:
                    pytest.fail(f"server stdout closed early (rc={proc.poll()}):\n{seen}\n{stderr_text()}")
                seen.append(line)
                if m := re.match(r"^MCP URL:\s+(http://\S+)$", line):
                    url = m.group(1)
                if m := re.match(r"^Listening on: (\S+)$", line):
                    listen = m.group(1)
                if line.startswith(_BLOCK_END):
                    break

            assert listen is not None and url is not None, f"missing Listening/MCP URL lines:\n{seen}"
            host, _, port_s = listen.rpartition(":")
            assert host == "127.0.0.1", listen
            port = int(port_s)
            assert port > 0
            assert url == f"{advertised_url or f'http://127.0.0.1:{port}'}/mcp"
            yield Server(url=url, port=port, token=token, config=config_file, stdout=seen)
    finally:
        pump_thread.join(timeout=5)
        assert proc.stdout is not None
        proc.stdout.close()
