"""nl2sh's A2A 1.0 endpoint driven by the official Python client (`a2a-sdk` 1.3.x) and raw
JSON-RPC, with the built-in Agent asking a scripted model on 127.0.0.1. Every payload the
server emits is validated against the A2A 1.0 JSON schema in netd/tests/data (docs/CONFORMANCE.md)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import httpx
import jsonschema
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as a2a
from google.protobuf.json_format import MessageToDict

from scripted_model import answer, call

# The A2A 1.0 JSON schema (a2aproject/A2A, specification), as netd's tests keep it.
SCHEMA_PATH = Path(__file__).parents[2] / "netd" / "tests" / "data" / "a2a-1.0.schema.json"


def _local_refs(node, names: dict[str, str]):
    """The schema's `$ref`s name per-message files (`lf.a2a.v1.Task.jsonschema.json`);
    point them at the bundled definitions instead."""
    if isinstance(node, dict):
        out = {k: _local_refs(v, names) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.endswith(".jsonschema.json"):
            short = ref.removesuffix(".jsonschema.json").rsplit(".", 1)[-1]
            out["$ref"] = "#/definitions/" + quote(names[short])
        return out
    if isinstance(node, list):
        return [_local_refs(v, names) for v in node]
    return node


def schema_validator(definition: str) -> jsonschema.Draft202012Validator:
    doc = json.loads(SCHEMA_PATH.read_text())
    names = {key.replace(" ", ""): key for key in doc["definitions"]}
    doc = _local_refs(doc, names)
    return jsonschema.Draft202012Validator({**doc, "$ref": "#/definitions/" + quote(definition)})


def check(definition: str, value: dict) -> None:
    errors = sorted(schema_validator(definition).iter_errors(value), key=str)
    assert not errors, f"{definition} does not validate: {[e.message for e in errors][:5]}\n{json.dumps(value)[:2000]}"


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "A2A-Version": "1.0", "Content-Type": "application/json"}


def rpc(server, method: str, params: dict, *, extra: dict | None = None) -> dict:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    r = httpx.post(f"http://127.0.0.1:{server.port}/a2a", json=body, headers={**headers(server.token), **(extra or {})}, timeout=60)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["jsonrpc"] == "2.0" and reply["id"] == body["id"], reply
    return reply


def user_message(text: str, context_id: str | None = None) -> dict:
    m = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if context_id:
        m["contextId"] = context_id
    return m


def wait_terminal(server, task_id: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        task = rpc(server, "GetTask", {"id": task_id})["result"]
        check("Task", task)
        if task["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"):
            return task
        assert time.monotonic() < deadline, f"task still {task['status']['state']}"
        time.sleep(0.1)


async def sdk_client(server):
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}, timeout=60)
    factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
    client = await factory.create_from_url(f"http://127.0.0.1:{server.port}")
    return client, http


def sdk_message(text: str) -> a2a.Message:
    return a2a.Message(message_id=str(uuid.uuid4()), role=a2a.ROLE_USER, parts=[a2a.Part(text=text)])


async def test_official_client_card_send_get_list_cancel(agent_server, model):
    model.push(answer("The device is fine."), answer("slow", delay=30))
    client, http = await sdk_client(agent_server)
    try:
        # send (blocking): the Agent answers through the scripted model
        events = [e async for e in client.send_message(a2a.SendMessageRequest(message=sdk_message("How is the device?")))]
        assert len(events) == 1 and events[0].HasField("task")
        task = events[0].task
        assert task.status.state == a2a.TASK_STATE_COMPLETED, MessageToDict(task)
        data = MessageToDict(task.artifacts[0].parts[0].data)
        assert data["answer"] == "The device is fine."
        assert data["session"] == task.context_id
        # get
        got = await client.get_task(a2a.GetTaskRequest(id=task.id))
        assert got.id == task.id and got.status.state == a2a.TASK_STATE_COMPLETED
        # list
        listed = await client.list_tasks(a2a.ListTasksRequest(page_size=10))
        assert task.id in [t.id for t in listed.tasks]
        assert listed.next_page_token == ""
        # cancel a task whose model is slow
        request = a2a.SendMessageRequest(message=sdk_message("Take your time."))
        request.configuration.return_immediately = True
        events = [e async for e in client.send_message(request)]
        slow = events[0].task
        assert slow.status.state in (a2a.TASK_STATE_SUBMITTED, a2a.TASK_STATE_WORKING)
        cancelled = await client.cancel_task(a2a.CancelTaskRequest(id=slow.id))
        assert cancelled.status.state == a2a.TASK_STATE_CANCELED
    finally:
        await client.close()
        await http.aclose()
    # the model was asked with the configured key, and the key is nowhere in the tasks
    assert model.authorizations[0] == f"Bearer {model.key}"


def test_card_is_public_and_valid(agent_server):
    r = httpx.get(f"http://127.0.0.1:{agent_server.port}/.well-known/agent-card.json")
    assert r.status_code == 200
    card = r.json()
    check("Agent Card", card)
    assert card["supportedInterfaces"][0]["url"] == f"http://127.0.0.1:{agent_server.port}/a2a"
    assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert "max-age" in r.headers["cache-control"]
    again = httpx.get(r.url, headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304


def test_every_payload_validates(agent_server, model):
    model.push(call("fs__stat", {"path": "/"}), answer("Root exists."))  # fs.stat as the model sees it
    sent = rpc(agent_server, "SendMessage", {"message": user_message("Does / exist?")})
    check("Send Message Response", sent["result"])
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    data = task["artifacts"][0]["parts"][0]["data"]
    assert data["tool_calls"] == 1 and data["steps"] == 2
    assert data["evidence"]["entries"][0]["tool"] == "fs.stat"
    assert data["evidence"]["entries"][0]["result"] == "success"
    # the tool result reached the model's next request
    assert any(m.get("role") == "tool" for m in model.requests[1]["messages"])
    got = rpc(agent_server, "GetTask", {"id": task["id"], "historyLength": 0})["result"]
    check("Task", got)
    assert "history" not in got or got["history"] == []
    listed = rpc(agent_server, "ListTasks", {"includeArtifacts": True, "pageSize": 1})["result"]
    check("List Tasks Response", listed)
    assert listed["pageSize"] == 1 and listed["totalSize"] >= 1
    listed = rpc(agent_server, "ListTasks", {})["result"]
    check("List Tasks Response", listed)
    assert all("artifacts" not in t for t in listed["tasks"])
    # a second message in the same context sends the first turn as history
    model.push(answer("Still there."))
    second = rpc(agent_server, "SendMessage", {"message": user_message("And now?", task["contextId"])})["result"]["task"]
    assert second["contextId"] == task["contextId"] and second["id"] != task["id"]
    contents = [m.get("content") for m in model.requests[-1]["messages"]]
    assert "Does / exist?" in contents and "And now?" in contents


@pytest.mark.parametrize(
    "method,params,extra,code",
    [
        ("GetTask", {"id": "no-such-task"}, None, -32001),
        ("CancelTask", {"id": "no-such-task"}, None, -32001),
        ("SendStreamingMessage", {"message": user_message("x")}, None, -32004),
        ("GetExtendedAgentCard", {}, None, -32004),
        ("CreateTaskPushNotificationConfig", {}, None, -32003),
        ("NoSuchMethod", {}, None, -32601),
        ("ListTasks", {"pageSize": 0}, None, -32602),
        ("ListTasks", {"pageSize": 101}, None, -32602),
        ("ListTasks", {"pageToken": "not-a-token"}, None, -32602),
        ("SendMessage", {"message": {**user_message("x"), "taskId": "no-such-task"}}, None, -32001),
        ("SendMessage", {"message": {**user_message("x"), "parts": [{"data": {"a": 1}}]}}, None, -32005),
        ("SendMessage", {"message": user_message("x" * 8193)}, None, -32602),
        ("GetTask", {"id": "x"}, {"A2A-Version": "0.3"}, -32009),
        ("GetTask", {"id": "x"}, {"A2A-Version": ""}, -32009),
    ],
)
def test_error_codes(agent_server, method, params, extra, code):
    reply = rpc(agent_server, method, params, extra=extra)
    assert reply["error"]["code"] == code, reply
    data = reply["error"].get("data")
    if code in (-32001, -32002, -32003, -32004, -32005, -32009):
        assert isinstance(data, list) and data[0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo", reply
        assert data[0]["domain"] == "a2a-protocol.org"


def test_a_finished_task_is_not_cancelable(agent_server, model):
    model.push(answer("done"))
    task = rpc(agent_server, "SendMessage", {"message": user_message("hi")})["result"]["task"]
    reply = rpc(agent_server, "CancelTask", {"id": task["id"]})
    assert reply["error"]["code"] == -32002, reply
    assert reply["error"]["data"][0]["reason"] == "TASK_NOT_CANCELABLE"


def test_returns_immediately_then_polls(agent_server, model):
    model.push(answer("later", delay=0.5))
    sent = rpc(agent_server, "SendMessage", {"message": user_message("poll me"), "configuration": {"returnImmediately": True}})
    task = sent["result"]["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    done = wait_terminal(agent_server, task["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


def test_no_secret_in_state(agent_server, model):
    model.push(answer(f"the key is {model.key} and the token {agent_server.token}"))
    task = rpc(agent_server, "SendMessage", {"message": user_message(f"echo {agent_server.token}")})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    state = agent_server.config.parent / "config.state"
    files = [p for p in state.rglob("*") if p.is_file() and p.name not in ("lock", "connection.json")]
    assert any(p.parent.name == "sessions" for p in files), files
    for path in files:
        blob = path.read_bytes()
        assert model.key.encode() not in blob, f"model key in {path}"
        assert agent_server.token.encode() not in blob, f"token in {path}"


def test_without_a_model_the_task_fails_and_says_why(server):
    task = rpc(server, "SendMessage", {"message": user_message("hello")})["result"]["task"]
    check("Task", task)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = " ".join(p.get("text", "") for p in task["status"]["message"]["parts"])
    assert "[model]" in text, task
