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

TOOL = "nl2sh_inspect"
INSPECT_KEYS = {"os", "kernel", "architecture", "android", "uid", "euid", "root", "hostname", "build_identity"}
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
    """tools/list is exactly [nl2sh_inspect]; calling it yields matching structured and text content."""
    tools = await client.list_tools()
    assert [t.name for t in tools.tools] == [TOOL]

    result = await client.call_tool(TOOL, {})
    assert result.is_error is False
    structured = result.structured_content
    assert isinstance(structured, dict)
    assert set(structured) == INSPECT_KEYS
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


async def test_http_auto_mode_falls_back_to_initialize(server):
    """Default mode='auto': the 2026-07-28 server/discover probe is refused, the client falls back to initialize."""
    exchanges: list[tuple[str, int]] = []
    async with http_mcp_client(server, responses=exchanges) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.session.initialize_result is not None
        assert client.session.discover_result is None
        await assert_tools_and_inspect(client)
    # One refused probe (JSON-RPC -32022 on HTTP 400), then the legacy handshake succeeds.
    assert exchanges[:2] == [("server/discover", 400), ("initialize", 200)]


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


async def test_stdio(nl2sh_bin, config_file):
    """`protocol stdio`: initialize, tools/list and nl2sh_inspect over the SDK's stdio transport."""
    params = StdioServerParameters(command=nl2sh_bin, args=["--config", str(config_file), "protocol", "stdio"])
    async with Client(params, mode="legacy") as client:
        assert client.protocol_version == "2025-11-25"
        structured = await assert_tools_and_inspect(client)
        assert structured["build_identity"]["protocol_version"]
