"""Interop: the third-party `websockets` client authenticates on Parley's native door with a
token minted by `parley token`, against a server started with `--config`.

Run (from the repository root, after `swift build`):
    python3 -m venv .venv-interop && .venv-interop/bin/pip install websockets pytest
    PARLEY_BIN=.build/debug/parley .venv-interop/bin/pytest -q Tests/interop/test_auth.py
"""
import asyncio
import json
import os
import subprocess
import tempfile
import time

import pytest

from parley_process import parley_server
from websockets.asyncio.client import connect

TIMEOUT = 5
SECRET = "interop-secret-0123456789abcdefghij"  # 32+ bytes, as the config file requires
BINARY = os.path.abspath(os.environ.get("PARLEY_BIN", ".build/debug/parley"))


@pytest.fixture(scope="module")
def server():
    directory = tempfile.mkdtemp(prefix="parley-interop-auth-")
    config = os.path.join(directory, "parley.json")
    with open(config, "w") as f:
        json.dump({"channels": [{"id": "secure", "secret": SECRET, "requireAuth": True}]}, f)
    yield from parley_server(extra_args=("--config", config))


def mint(client_id, room_regex):
    out = subprocess.run(
        [BINARY, "token", "--channel", "secure", "--secret", SECRET, "--client", client_id,
         "--room-regex", room_regex, "--data", '{"role": "tester"}'],
        capture_output=True, text=True, timeout=10, check=True)
    return out.stdout.strip()


async def recv_until(ws, predicate, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        frame = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
        message = json.loads(frame)
        if predicate(message):
            return message


async def call(ws, command):
    await ws.send(json.dumps(command))
    return await recv_until(ws, lambda m: m.get("callback") == command["callback"])


def test_handshake_require_auth_then_token_from_parley_token(server):
    async def go():
        async with connect("ws://127.0.0.1:%d/v3/websocket" % server["http"]) as ws:
            reply = await call(ws, {"type": "handshake", "channel": "secure", "callback": 0})
            assert reply["require_auth"] is True
            client_id = reply["client_id"]
            assert isinstance(client_id, str) and client_id

            before = await call(ws, {"type": "subscribe", "room": "team-a", "callback": 1})
            assert "authentication required" in before["error"]

            token = mint(client_id, "team-.*|observable-team")
            ok = await call(ws, {"type": "authenticate", "token": token, "callback": 2})
            assert "error" not in ok

            allowed = await call(ws, {"type": "subscribe", "room": "team-a", "callback": 3})
            assert allowed == {"callback": 3}
            denied = await call(ws, {"type": "subscribe", "room": "other", "callback": 4})
            assert "permission denied" in denied["error"]

            # authData is what the token's data said.
            observed = await call(ws, {"type": "subscribe", "room": "observable-team", "callback": 5})
            assert observed == {"callback": 5}
            members = await recv_until(ws, lambda m: m.get("type") == "observable_members")
            assert members["data"] == [{"id": client_id, "authData": {"role": "tester"}}]
            await ws.send(json.dumps({"type": "publish", "room": "team-a", "message": "hi"}))
            message = await recv_until(ws, lambda m: m.get("type") == "publish")
            assert message["message"] == "hi" and message["client_id"] == client_id

    asyncio.run(asyncio.wait_for(go(), 30))


def test_token_for_another_client_is_refused(server):
    async def go():
        async with connect("ws://127.0.0.1:%d/v3/websocket" % server["http"]) as ws:
            reply = await call(ws, {"type": "handshake", "channel": "secure", "callback": 0})
            refused = await call(ws, {"type": "authenticate", "token": mint("someone-else", ".*"), "callback": 1})
            assert "another client" in refused["error"]
            still = await call(ws, {"type": "subscribe", "room": "team-a", "callback": 2})
            assert "authentication required" in still["error"]
            assert reply["client_id"]

    asyncio.run(asyncio.wait_for(go(), 30))
