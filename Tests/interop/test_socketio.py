"""Interop: python-socketio 5.x (Engine.IO 4) against Parley's Socket.IO door, plus
cross-door chat with a Scaledrone-protocol client (websockets) and a line-protocol client.

Run: PARLEY_BIN=.build/debug/parley .venv-interop/bin/pytest -q Tests/interop/test_socketio.py
"""
import asyncio
import json
import socket
import time

import pytest
import requests
import socketio
from websockets.asyncio.client import connect

from sio_support import (TIMEOUT, ChatClient, check_user_list, nicknames, parley_server, run_late_post_after_upgrade,
                         run_reconnect_sequence, run_socketchat_sequence)


@pytest.fixture(scope="module")
def server():
    yield from parley_server(extra_args=("--allowed-origins", "http://elsewhere.example"))


def base(server):
    return "http://127.0.0.1:%d" % server["http"]


def test_socketchat_over_websocket(server):
    run_socketchat_sequence(socketio, base(server), ["polling", "websocket"], "websocket")


def test_socketchat_over_websocket_only(server):
    run_socketchat_sequence(socketio, base(server), ["websocket"], "websocket")


def test_socketchat_polling_only(server):
    run_socketchat_sequence(socketio, base(server), ["polling"], "polling")


def test_open_packet_and_cors_with_requests(server):
    # The fixture's server allows this origin (--allowed-origins); others are refused.
    origin = "http://elsewhere.example"
    r = requests.get(base(server) + "/socket.io/", params={"EIO": "4", "transport": "polling"},
                     headers={"Origin": "http://not-allowed.example"}, timeout=TIMEOUT)
    assert r.status_code == 403 and "Access-Control-Allow-Origin" not in r.headers
    r = requests.get(base(server) + "/socket.io/", params={"EIO": "4", "transport": "polling"},
                     headers={"Origin": origin}, timeout=TIMEOUT)
    assert r.status_code == 200
    assert r.headers["Access-Control-Allow-Origin"] == origin
    assert r.headers["Access-Control-Allow-Credentials"] == "true"
    assert r.text[0] == "0"
    open_packet = json.loads(r.text[1:])
    assert open_packet["upgrades"] == ["websocket"] and open_packet["maxPayload"] == 1000000
    assert open_packet["pingInterval"] == 25000 and open_packet["pingTimeout"] == 20000
    r = requests.options(base(server) + "/socket.io/?EIO=4&transport=polling", timeout=TIMEOUT,
                         headers={"Origin": origin, "Access-Control-Request-Method": "POST"})
    assert r.status_code == 204 and r.headers["Access-Control-Allow-Origin"] == origin
    r = requests.get(base(server) + "/socket.io/?EIO=4&transport=polling&sid=unknown", timeout=TIMEOUT)
    assert r.status_code == 400
    big = requests.post(base(server) + "/socket.io/?EIO=4&transport=polling&sid=" + open_packet["sid"],
                        data=b"4" + b"x" * (10 << 20), timeout=30)
    assert big.status_code in (400, 413) and big.text


class LineClient:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buffer = b""

    def send(self, text):
        self.sock.sendall(text.encode())

    def read_until(self, predicate):
        deadline = time.time() + TIMEOUT
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if predicate(line.decode()):
                    return line.decode()
            left = deadline - time.time()
            assert left > 0, "no matching line"
            self.sock.settimeout(max(0.01, left))
            chunk = self.sock.recv(4096)
            assert chunk, "line connection closed"
            self.buffer += chunk

    def close(self):
        self.sock.close()


async def join_lobby_natively(ws, name):
    """Handshakes as `name` and subscribes to the lobby over the native door; returns a
    `recv_until(predicate)` for that socket and the `observable_members` push."""
    async def recv_until(predicate):
        deadline = time.monotonic() + TIMEOUT
        while True:
            m = json.loads(await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic())))
            if predicate(m):
                return m
    await ws.send(json.dumps({"type": "handshake", "channel": "demo", "callback": 0,
                              "client_data": {"name": name, "color": "#00AA00"}}))
    await recv_until(lambda m: m.get("callback") == 0)
    await ws.send(json.dumps({"type": "subscribe", "room": "observable-room", "callback": 1}))
    return recv_until, await recv_until(lambda m: m.get("type") == "observable_members")


def test_cross_door_chat_typing_and_presence(server):
    async def go():
        sam = await asyncio.to_thread(ChatClient, socketio, base(server), ["polling", "websocket"])
        line = LineClient(server["line"])
        try:
            await asyncio.to_thread(sam.emit, "connectUser", "sam")
            await asyncio.to_thread(sam.wait_for, "userConnectUpdate", lambda a: a[0]["nickname"] == "sam")
            async with connect("ws://127.0.0.1:%d/v3/websocket" % server["http"]) as ws:
                recv_until, members = await join_lobby_natively(ws, "nina")
                assert "sam" in [m.get("clientData", {}).get("name") for m in members["data"]]
                # A native join shows up in userConnectUpdate and userList.
                await asyncio.to_thread(sam.wait_for, "userConnectUpdate", lambda a: a[0]["nickname"] == "nina")
                line.send("iam:lou\n")
                line.read_until(lambda l: l == "lou has joined")
                users = await asyncio.to_thread(sam.wait_for, "userList", lambda a: "lou" in nicknames(a[0]))
                assert {"sam", "nina", "lou"} <= set(nicknames(check_user_list(users)))
                # Socket.IO → native and line: typing and text.
                await asyncio.to_thread(sam.emit, "startType", "sam")
                typing = await recv_until(lambda m: m.get("type") == "publish")
                assert typing["message"] == {"typing": True}
                await asyncio.to_thread(sam.emit, "chatMessage", "sam", "hi from socket.io")
                published = await recv_until(lambda m: m.get("type") == "publish" and isinstance(m["message"], str))
                assert published["message"] == "hi from socket.io"
                assert line.read_until(lambda l: l.startswith("sam:")) == "sam:hi from socket.io"
                # Native → Socket.IO: typing and text.
                await ws.send(json.dumps({"type": "publish", "room": "observable-room", "message": {"typing": True}}))
                update = await asyncio.to_thread(sam.wait_for, "userTypingUpdate", lambda a: "nina" in a[0])
                assert update[0]["nina"] == 1
                await ws.send(json.dumps({"type": "publish", "room": "observable-room", "message": "hi from native"}))
                message = await asyncio.to_thread(sam.wait_for, "newChatMessage", lambda a: a[1] == "hi from native")
                assert message[0] == "nina"
                # Line → Socket.IO.
                line.send("msg:hi from line\n")
                message = await asyncio.to_thread(sam.wait_for, "newChatMessage", lambda a: a[1] == "hi from line")
                assert message[0] == "lou"
                # Leaving crosses doors.
                line.close()
                await asyncio.to_thread(sam.wait_for, "userExitUpdate", lambda a: a[0] == "lou")
            await asyncio.to_thread(sam.wait_for, "userExitUpdate", lambda a: a[0] == "nina")
        finally:
            await asyncio.to_thread(sam.disconnect)
    asyncio.run(asyncio.wait_for(go(), 30))


def test_unidentified_client_hears_the_lobby_and_leaves_no_trace(server):
    lurker = ChatClient(socketio, base(server), ["websocket"])
    other = ChatClient(socketio, base(server), ["polling"])
    try:
        other.emit("connectUser", "olga")
        other.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == "olga")
        assert lurker.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == "olga")
        other.emit("chatMessage", "olga", "anyone?")
        other.wait_for("newChatMessage")
        assert lurker.wait_for("newChatMessage", lambda a: a[1] == "anyone?")[0] == "olga"
        lurker.disconnect()
        assert [e for e in other.quiet_for(0.3, "userExitUpdate")] == []
    finally:
        other.disconnect()


@pytest.mark.parametrize("transports", [["polling", "websocket"], ["websocket"], ["polling"]])
def test_an_app_that_reconnects_without_connect_user_keeps_chatting(server, transports):
    run_reconnect_sequence(socketio, base(server), transports)


def test_a_reconnected_app_that_only_sends_chat_message_is_a_member_for_scaledrone(server):
    """The other doors see the reconnected app's sender as a member again."""
    async def go():
        app = await asyncio.to_thread(ChatClient, socketio, base(server), ["polling", "websocket"])
        async with connect("ws://127.0.0.1:%d/v3/websocket" % server["http"]) as ws:
            recv_until, members = await join_lobby_natively(ws, "nora")
            assert "rex" not in [m.get("clientData", {}).get("name") for m in members["data"]]
            try:
                await asyncio.to_thread(app.emit, "chatMessage", "rex", "only a message")
                joined = await recv_until(lambda m: m.get("type") == "observable_member_join")
                assert joined["data"]["clientData"]["name"] == "rex"
                published = await recv_until(lambda m: m.get("type") == "publish" and m.get("message") == "only a message")
                assert published["client_id"] == joined["data"]["id"]
            finally:
                await asyncio.to_thread(app.disconnect)
            left = await recv_until(lambda m: m.get("type") == "observable_member_leave")
            assert left["data"]["clientData"]["name"] == "rex"
    asyncio.run(asyncio.wait_for(go(), 30))


def test_a_post_that_arrives_just_after_the_upgrade_is_answered_and_handled(server):
    for _ in range(5):
        run_late_post_after_upgrade(base(server), 4)


def test_message_actions_reach_only_sockets_that_ask_for_them(server):
    """The classic app sees a reply as a message and nothing of edits, deletes or reactions;
    a socket that sent `subscribeActions` gets messageInfo, messageEdited, reaction and
    messageDeleted as well (docs/protocols.md §2)."""
    async def go():
        classic = await asyncio.to_thread(ChatClient, socketio, base(server), ["websocket"])
        aware = await asyncio.to_thread(ChatClient, socketio, base(server), ["polling"])
        try:
            assert await asyncio.to_thread(aware.call, "subscribeActions") is None  # acked, no data
            async with connect("ws://127.0.0.1:%d/v3/websocket" % server["http"]) as ws:
                recv_until, _ = await join_lobby_natively(ws, "nina")
                callback = [10]

                async def call(command):
                    callback[0] += 1
                    command = dict(command, room="observable-room", callback=callback[0])
                    await ws.send(json.dumps(command))
                    reply = await recv_until(lambda m: m.get("callback") == command["callback"])
                    assert "error" not in reply, reply
                    return reply

                first = (await call({"type": "publish", "message": "helo sockets"}))["id"]
                reply = (await call({"type": "reply", "message": "me first", "reply_to": first}))["id"]
                await call({"type": "edit", "target": first, "message": "hello sockets"})
                await call({"type": "react", "target": first, "emoji": "👍"})
                await call({"type": "unreact", "target": first, "emoji": "👍"})
                await call({"type": "delete", "target": reply})

                for client in (classic, aware):
                    await asyncio.to_thread(client.wait_for, "newChatMessage", lambda a: a[0] == "nina" and a[1] == "helo sockets")
                    await asyncio.to_thread(client.wait_for, "newChatMessage", lambda a: a[1] == "me first")
                info = await asyncio.to_thread(aware.wait_for, "messageInfo", lambda a: a[0]["text"] == "me first")
                assert info[0]["id"] == reply and info[0]["replyTo"] == first and info[0]["nickname"] == "nina"
                edited = await asyncio.to_thread(aware.wait_for, "messageEdited")
                assert edited[0]["id"] == first and edited[0]["text"] == "hello sockets" and edited[0]["nickname"] == "nina"
                added = await asyncio.to_thread(aware.wait_for, "reaction")
                assert (added[0]["id"], added[0]["emoji"], added[0]["added"], added[0]["nickname"]) == (first, "👍", True, "nina")
                removed = await asyncio.to_thread(aware.wait_for, "reaction")
                assert removed[0]["added"] is False
                deleted = await asyncio.to_thread(aware.wait_for, "messageDeleted")
                assert deleted[0]["id"] == reply and "date" in deleted[0]
                # The classic app got none of it, and no extra newChatMessage for the actions.
                extra = await asyncio.to_thread(classic.quiet_for, 0.3)
                assert [e for e in extra if e[0] in ("messageInfo", "messageEdited", "messageDeleted", "reaction", "newChatMessage")] == [], extra
        finally:
            await asyncio.to_thread(classic.disconnect)
            await asyncio.to_thread(aware.disconnect)
    asyncio.run(asyncio.wait_for(go(), 30))
