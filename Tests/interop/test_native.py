"""Interop tests: the third-party `websockets` client against Parley's native door.

Run (from the repository root, after `swift build`):
    python3 -m venv .venv-interop && .venv-interop/bin/pip install websockets pytest
    PARLEY_BIN=.build/debug/parley .venv-interop/bin/pytest -q Tests/interop/test_native.py
"""
import asyncio
import json
import socket
import time

import pytest

from parley_process import parley_server
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

TIMEOUT = 5
LOBBY_CHANNEL, LOBBY_ROOM = "demo", "observable-room"


@pytest.fixture(scope="module")
def server():
    # The browser tests seed history over REST: lift the per-IP REST rate (its own tests cover it).
    yield from parley_server(extra_args=("--rest-rate", "100000"))


def url(server):
    return "ws://127.0.0.1:%d/v3/websocket" % server["http"]


async def recv_json(ws, timeout=TIMEOUT):
    frame = await asyncio.wait_for(ws.recv(), timeout)
    assert isinstance(frame, str), "replies must be text frames"
    return json.loads(frame)


async def recv_until(ws, predicate, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        message = await recv_json(ws, max(0.01, deadline - time.monotonic()))
        if predicate(message):
            return message


async def handshake(ws, client_data=None, channel=LOBBY_CHANNEL, binary=False):
    command = {"type": "handshake", "channel": channel, "callback": 0}
    if client_data is not None:
        command["client_data"] = client_data
    text = json.dumps(command)
    await ws.send(text.encode() if binary else text)
    reply = await recv_json(ws)
    assert reply["callback"] == 0
    assert isinstance(reply["client_id"], str) and reply["client_id"]
    assert "error" not in reply
    return reply["client_id"]


async def subscribe(ws, room, callback=1, history_count=None):
    command = {"type": "subscribe", "room": room, "callback": callback}
    if history_count is not None:
        command["history_count"] = history_count
    await ws.send(json.dumps(command))
    reply = await recv_until(ws, lambda m: m.get("callback") == callback)
    assert reply == {"callback": callback}


async def publish(ws, room, message):
    await ws.send(json.dumps({"type": "publish", "room": room, "message": message}))


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_fan_out_includes_sender(server):
    async def go():
        async with connect(url(server)) as alice, connect(url(server)) as bob:
            alice_id = await handshake(alice, {"name": "alice"})
            await handshake(bob)
            await subscribe(alice, "py-chat")
            await subscribe(bob, "py-chat")
            await publish(alice, "py-chat", {"text": "hi"})
            for ws in (alice, bob):
                m = await recv_until(ws, lambda m: m.get("type") == "publish")
                assert m["room"] == "py-chat"
                assert m["message"] == {"text": "hi"}
                assert isinstance(m["id"], str)
                assert isinstance(m["timestamp"], int) and abs(m["timestamp"] - time.time()) < 10
                assert m["client_id"] == alice_id
                assert "callback" not in m
    run(go())


def test_observable_join_and_leave_including_abrupt_disconnect(server):
    async def go():
        async with connect(url(server)) as alice:
            alice_id = await handshake(alice, {"name": "alice", "color": "#FF0000"})
            await subscribe(alice, "observable-py")
            members = await recv_json(alice)
            assert members == {"type": "observable_members", "room": "observable-py",
                               "data": [{"id": alice_id, "clientData": {"name": "alice", "color": "#FF0000"}}]}
            bob = await connect(url(server))
            bob_data = {"name": "bob", "color": "#00FF00", "n": [1, 2.5, None]}
            bob_id = await handshake(bob, bob_data)
            await subscribe(bob, "observable-py")
            got = await recv_json(bob)
            assert [m["id"] for m in got["data"]] == [alice_id, bob_id]
            join = await recv_json(alice)
            assert join == {"type": "observable_member_join", "room": "observable-py",
                            "data": {"id": bob_id, "clientData": bob_data}}
            bob.transport.abort()  # no close frame: an abrupt disconnect
            leave = await recv_json(alice)
            assert leave == {"type": "observable_member_leave", "room": "observable-py",
                             "data": {"id": bob_id, "clientData": bob_data}}
    run(go())


def test_history_with_indexes_after_reconnect(server):
    async def go():
        async with connect(url(server)) as first:
            first_id = await handshake(first)
            for text in ["a", "b", "c", "d"]:
                await publish(first, "py-history", text)
            await subscribe(first, "py-history")
        async with connect(url(server)) as again:
            await handshake(again)
            await subscribe(again, "py-history", history_count=3)
            history = [await recv_json(again) for _ in range(3)]
            assert [h["type"] for h in history] == ["history_message"] * 3
            assert [h["message"] for h in history] == ["b", "c", "d"]
            assert [h["index"] for h in history] == [0, 1, 2]
            assert all(h["client_id"] == first_id and isinstance(h["id"], str) for h in history)
    run(go())


def test_binary_frame_handshake(server):
    async def go():
        async with connect(url(server)) as ws:
            await handshake(ws, {"name": "swift"}, binary=True)
            await ws.send(json.dumps({"type": "subscribe", "room": "py-bin", "callback": 3,
                                      "history_count": 0, "history": 0}).encode())
            assert await recv_json(ws) == {"callback": 3}
            await ws.send(json.dumps({"type": "publish", "room": "py-bin", "message": "x"}).encode())
            assert (await recv_json(ws))["message"] == "x"
    run(go())


@pytest.mark.parametrize("compression", ["deflate", None])
def test_permessage_deflate_on_and_off(server, compression):
    async def go():
        async with connect(url(server), compression=compression) as a, \
                connect(url(server), compression=compression) as b:
            extensions = a.response.headers.get("Sec-WebSocket-Extensions") or ""
            assert ("permessage-deflate" in extensions) == (compression == "deflate")
            await handshake(a)
            await handshake(b)
            await subscribe(a, "py-deflate")
            await subscribe(b, "py-deflate")
            body = {"text": "compress me " * 200}
            await publish(a, "py-deflate", body)
            for ws in (a, b):
                m = await recv_until(ws, lambda m: m.get("type") == "publish")
                assert m["message"] == body
    run(go())


def test_oversized_message_closes_1009(server):
    async def go():
        async with connect(url(server), max_size=None, compression=None) as ws:
            await handshake(ws)
            try:
                await ws.send(json.dumps({"type": "publish", "room": "py-big", "message": "x" * (1 << 20)}))
            except ConnectionClosed:
                pass
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), TIMEOUT)
            assert ws.close_code == 1009
    run(go())


class LineClient:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buffer = b""

    def send(self, text):
        self.sock.sendall(text.encode())

    def read_line(self):
        deadline = time.time() + TIMEOUT
        while b"\n" not in self.buffer:
            self.sock.settimeout(max(0.01, deadline - time.time()))
            chunk = self.sock.recv(4096)
            assert chunk, "line connection closed"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def read_until(self, predicate):
        while True:
            line = self.read_line()
            if predicate(line):
                return line

    def close(self):
        self.sock.close()


def test_cross_door_chat_with_line_user(server):
    async def go():
        async with connect(url(server)) as alice:
            await handshake(alice, {"name": "alice", "color": "#0000FF"})
            await subscribe(alice, LOBBY_ROOM)
            await recv_json(alice)  # observable_members
            carol = LineClient(server["line"])
            try:
                carol.send("iam:carol\n")
                assert carol.read_line() == "carol has joined"
                join = await recv_json(alice)
                assert join["type"] == "observable_member_join"
                assert join["data"]["clientData"]["name"] == "carol"
                carol.send("msg:hi there\n")
                m = await recv_until(alice, lambda m: m.get("type") == "publish")
                assert m["message"] == "hi there"
                assert m["client_id"] == join["data"]["id"]
                await publish(alice, LOBBY_ROOM, "hello carol")
                assert carol.read_until(lambda l: l.startswith("alice:")) == "alice:hello carol"
            finally:
                carol.close()
            leave = await recv_until(alice, lambda m: m.get("type") == "observable_member_leave")
            assert leave["data"]["clientData"]["name"] == "carol"
    run(go())
