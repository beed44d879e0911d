"""nl2sh's MCP endpoint driven by the official Python SDK (`mcp` 2.3.x) over HTTP and stdio."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import mcp.client.session
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from pathlib import Path

from conftest import MCP_TOOLS, android_env, serve, serve_agent

TOOL = "nl2sh_inspect"
INSPECT_KEYS = {
    "os",
    "kernel",
    "architecture",
    "android",
    "uid",
    "euid",
    "root",
    "hostname",
    "build_identity",
    "sandbox",
    "netd",
}
BUILD_IDENTITY_KEYS = {
    "git_commit",
    "git_dirty",
    "build_id",
    "target",
    "profile",
    "executable_sha256",
    "protocol_version",
    "uid",
    "version",
}


def http_client(token: str, responses: list[tuple[str, int]] | None = None) -> httpx2.AsyncClient:
    """An httpx2 client that sends the bearer token (and optionally records (JSON-RPC method, HTTP status))."""

    async def record(response: httpx2.Response) -> None:
        if responses is not None:
            body = response.request.content
            method = json.loads(body).get("method", "") if body else ""
            responses.append((method, response.status_code))

    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, event_hooks={"response": [record]})


@asynccontextmanager
async def http_mcp_client(server, *, token: str | None = None, responses=None, **kwargs) -> AsyncIterator[Client]:
    """A connected SDK Client over Streamable HTTP; the httpx2 client is closed afterwards."""
    async with http_client(token or server.token, responses) as hc:
        async with Client(streamable_http_client(server.url, http_client=hc), **kwargs) as client:
            yield client


def leaf_exceptions(exc: BaseException) -> list[BaseException]:
    """Flatten the (nested) ExceptionGroups that the SDK's anyio task groups wrap errors in."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaf_exceptions(sub)]
    return [exc]


async def assert_tools_and_inspect(client: Client) -> dict:
    """tools/list is exactly the spec's seven tools; nl2sh_inspect yields matching structured and text content."""
    tools = await client.list_tools()
    assert [t.name for t in tools.tools] == MCP_TOOLS

    result = await client.call_tool(TOOL, {})
    assert result.is_error is False
    structured = result.structured_content
    assert isinstance(structured, dict)
    assert set(structured) == INSPECT_KEYS
    # Which parts of the read-only sandbox are active (or why it is not).
    assert isinstance(structured["sandbox"]["active"], bool)
    assert set(structured["build_identity"]) == BUILD_IDENTITY_KEYS
    assert re.fullmatch(r"[0-9a-f]{64}", structured["build_identity"]["executable_sha256"])
    assert isinstance(structured["build_identity"]["git_dirty"], bool)

    texts = [c for c in result.content if c.type == "text"]
    assert len(texts) == 1
    assert json.loads(texts[0].text) == structured
    return structured


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2024-11-05"])
async def test_http_legacy_handshake_each_version(server, monkeypatch, version):
    """`initialize` at each handshake version negotiates that exact version and the tool works."""
    # The SDK's initialize() sends this module global; monkeypatch restores it after the test.
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", version)
    async with http_mcp_client(server, mode="legacy") as client:
        assert client.protocol_version == version
        assert client.server_info is not None
        await assert_tools_and_inspect(client)


async def test_http_auto_mode_picks_2026_07_28(server):
    """Default mode='auto': the server/discover probe succeeds, so the client speaks 2026-07-28 (no initialize)."""
    exchanges: list[tuple[str, int]] = []
    async with http_mcp_client(server, responses=exchanges) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.session.initialize_result is None
        discovered = client.session.discover_result
        assert discovered is not None
        assert discovered.supported_versions == ["2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05"]
        assert client.server_info is not None and client.server_info.name == "nl2sh"
        await assert_tools_and_inspect(client)
    methods = [m for m, _ in exchanges]
    assert methods[0] == "server/discover" and "initialize" not in methods, exchanges
    assert all(status == 200 for _, status in exchanges), exchanges


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_wrong_token_is_rejected(server, mode):
    """A wrong bearer token fails the connect with MCPError; every HTTP response the client saw was 401."""
    exchanges: list[tuple[str, int]] = []
    wrong = "py-wrong-token-" + "0" * 40
    assert wrong != server.token
    with pytest.raises(BaseException) as excinfo:
        async with http_mcp_client(server, token=wrong, responses=exchanges, mode=mode):
            pass
    leaves = leaf_exceptions(excinfo.value)
    # The SDK turns a non-JSON-RPC 401 body into a generic MCPError; the status is pinned via the hook.
    assert len(leaves) == 1 and isinstance(leaves[0], MCPError), leaves
    # auto: server/discover probe, then the initialize fallback; legacy: initialize only.
    expected = ["server/discover", "initialize"] if mode == "auto" else ["initialize"]
    assert exchanges == [(method, 401) for method in expected]


async def test_unknown_tool_is_a_protocol_error(server):
    """Calling an unknown tool is a JSON-RPC error (-32602 invalid params), raised as MCPError, not isError."""
    async with http_mcp_client(server, mode="legacy") as client:
        with pytest.raises(MCPError) as excinfo:
            await client.call_tool("no_such_tool", {})
    assert excinfo.value.code == -32602
    assert "no_such_tool" in str(excinfo.value)


# auto: the SDK probes server/discover over stdio too and keeps 2026-07-28; legacy: initialize.
MODES = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_stdio(nl2sh_bin, config_file, mode, version):
    """`protocol stdio`: tools/list and nl2sh_inspect over the SDK's stdio transport, in each era."""
    params = StdioServerParameters(command=nl2sh_bin, args=["--config", str(config_file), "protocol", "stdio"])
    async with Client(params, mode=mode) as client:
        assert client.protocol_version == version
        structured = await assert_tools_and_inspect(client)
        assert structured["build_identity"]["protocol_version"]


async def assert_direct_tools(client: Client) -> None:
    """nl2sh_tools lists device tools; nl2sh_invoke runs one (and reports a failure as isError);
    nl2sh_read_screen returns a summary and one image block: a JPEG at the defaults, with its map."""
    import base64

    listed = await client.call_tool("nl2sh_tools", {})
    assert listed.is_error is False
    names = [t["name"] for t in listed.structured_content["tools"]]
    assert "shell.exec" in names and "android.screenshot" in names, names

    ok = await client.call_tool("nl2sh_invoke", {"tool": "shell.exec", "arguments": {"command": "echo hi"}})
    assert ok.is_error is False
    assert ok.structured_content["tool"] == "shell.exec"
    assert ok.structured_content["success"] is True
    assert json.loads(ok.structured_content["output"])["stdout"] == "hi\n"

    failed = await client.call_tool("nl2sh_invoke", {"tool": "shell.exec", "arguments": {"command": "ls /nonexistent-nl2sh"}})
    assert failed.is_error is True
    assert failed.structured_content["success"] is False
    assert json.loads(failed.structured_content["output"])["exit_code"] == 2

    refused = await client.call_tool("nl2sh_invoke", {"tool": "shell.exec", "arguments": {"command": "touch /tmp/nl2sh-py-never"}})
    assert refused.is_error is True
    assert "needs local approval" in refused.structured_content["output"]

    screen = await client.call_tool("nl2sh_read_screen", {})
    assert screen.is_error is False
    kinds = [c.type for c in screen.content]
    assert kinds == ["text", "image"], kinds
    image = screen.content[1]
    assert image.mime_type == "image/jpeg"
    jpeg = base64.b64decode(image.data)
    assert jpeg[:2] == b"\xff\xd8"
    output = json.loads(screen.structured_content["output"])
    assert output["map"] == {"image": [540, 1200], "screen": [0, 0, 540, 1200]}, output
    assert output["device"] == [540, 1200] and output["scale"] == 1.0, output


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_http_direct_tools(server, mode, version):
    """Over HTTP: catalog, invoke (success, failure, refusal) and a screen read with a decodable image."""
    async with http_mcp_client(server, mode=mode) as client:
        assert client.protocol_version == version
        await assert_direct_tools(client)


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_stdio_direct_tools(nl2sh_bin, config_file, mode, version):
    """Over stdio: the same direct tools with the launching user's privileges."""
    params = StdioServerParameters(
        command=nl2sh_bin, args=["--config", str(config_file), "protocol", "stdio"], env=android_env()
    )
    async with Client(params, mode=mode) as client:
        assert client.protocol_version == version
        await assert_direct_tools(client)


async def assert_task_tools(client: Client, model) -> None:
    """nl2sh_ask runs the Agent and returns the A2A Task; get and cancel work on it."""
    from scripted_model import answer

    model.push(answer("All good."), answer("slow", delay=30))
    asked = await client.call_tool("nl2sh_ask", {"message": "How is the device?"})
    assert asked.is_error is False, asked
    task = asked.structured_content
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"][0]["data"]["answer"] == "All good."
    got = await client.call_tool("nl2sh_get_task", {"task_id": task["id"]})
    assert got.is_error is False and got.structured_content["id"] == task["id"]
    # A finished task cannot be cancelled: a tool error, not a protocol error.
    again = await client.call_tool("nl2sh_cancel_task", {"task_id": task["id"]})
    assert again.is_error is True
    missing = await client.call_tool("nl2sh_get_task", {"task_id": "no-such-task"})
    assert missing.is_error is True


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_http_task_tools(agent_server, model, mode, version):
    async with http_mcp_client(agent_server, mode=mode) as client:
        assert client.protocol_version == version
        await assert_task_tools(client, model)


async def test_stdio_task_tools(nl2sh_bin, tmp_path, model):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[model]\nbase_url = "{model.base_url}"\nmodel = "scripted"\napi_key_env = "NL2SH_TEST_MODEL_KEY"\n'
    )
    params = StdioServerParameters(
        command=nl2sh_bin,
        args=["--config", str(cfg), "protocol", "stdio"],
        env=android_env(NL2SH_TEST_MODEL_KEY=model.key),
    )
    async with Client(params, mode="legacy") as client:
        await assert_task_tools(client, model)


WAITING = re.compile(r"waiting for the owner's approval \(request ([a-z2-7]{6}), (\d+) s left\)")


@pytest.fixture
def slow_approval_server(nl2sh_bin: str, tmp_path: Path):
    """A server whose pending approvals wait 4 s, so a caller can watch the wait."""
    cfg = tmp_path / "config.toml"
    cfg.write_text("approval_timeout_secs = 4\n")
    with serve(nl2sh_bin, cfg, tmp_path) as running:
        yield running


async def collect_progress(client: Client, name: str, arguments: dict) -> tuple[object, list[tuple[float, str | None]]]:
    """Call a tool with a progress callback; its result and every notification, in order."""
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    result = await client.call_tool(name, arguments, progress_callback=on_progress)
    return result, seen


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_progress_shows_the_approval_wait(slow_approval_server, mode, version):
    """A mutation's caller that sent a progressToken hears that it waits for the owner's
    approval, with the request id and a countdown, then gets the refusal naming that id."""
    async with http_mcp_client(slow_approval_server, mode=mode) as client:
        assert client.protocol_version == version
        result, seen = await collect_progress(
            client, "nl2sh_invoke", {"tool": "shell.exec", "arguments": {"command": "touch /tmp/nl2sh-py-progress"}}
        )
    assert result.is_error is True
    progress = [p for p, _ in seen]
    assert progress == sorted(set(progress)), seen  # strictly increasing
    waits = [(m.group(1), int(m.group(2))) for _, text in seen if text and (m := WAITING.search(text))]
    assert len(waits) >= 2, seen
    ids = {i for i, _ in waits}
    assert len(ids) == 1, seen
    (request,) = ids
    left = [s for _, s in waits]
    assert left == sorted(left, reverse=True) and left[0] <= 4 and left[-1] < left[0], seen
    # The refusal names the same request the notifications did.
    assert f"request {request} expired" in result.structured_content["output"], result


async def test_a_quick_call_sends_no_progress(server):
    """A call that answers at once says nothing, even to a client that asked for progress."""
    async with http_mcp_client(server) as client:
        result, seen = await collect_progress(client, "nl2sh_invoke", {"tool": "fs.stat", "arguments": {"path": "/"}})
    assert result.is_error is False
    assert seen == []


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_progress_follows_a_delegated_task_into_its_approval_wait(nl2sh_bin, tmp_path, model, mode, version):
    """nl2sh_ask's caller hears the task's steps: the model being asked, then the Agent's
    shell.exec waiting for the owner's approval (request id, countdown)."""
    from scripted_model import answer, call

    model.push(
        call("shell__exec", {"command": "touch /tmp/nl2sh-py-ask-progress"}),
        answer("It was refused."),
    )
    with serve_agent(nl2sh_bin, tmp_path, model, approval_timeout_secs=4) as server:
        async with http_mcp_client(server, mode=mode) as client:
            assert client.protocol_version == version
            result, seen = await collect_progress(client, "nl2sh_ask", {"message": "Touch a file."})
    assert result.is_error is False, result
    task = result.structured_content
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    texts = [text or "" for _, text in seen]
    prefix = f"task {task['id']}: the Agent runs shell.exec: "
    waits = [WAITING.search(t) for t in texts if t.startswith(prefix)]
    assert len([w for w in waits if w]) >= 2, seen
    assert [p for p, _ in seen] == sorted({p for p, _ in seen}), seen
