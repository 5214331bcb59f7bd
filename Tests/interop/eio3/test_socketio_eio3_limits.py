"""Interop: python-socketio 4.6.1 (Engine.IO 3, as older Socket.IO-Client-Swift releases) and
the Socket.IO door's limits. An oversized POST used to get 413 while the session lived on: the
client stopped sending and never learned why. Now the session ends and the client reconnects.
"""
import os
import sys
import threading
import time

import pytest
import socketio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sio_support import TIMEOUT, parley_server  # noqa: E402


@pytest.fixture(scope="module")
def server():
    yield from parley_server(extra_args=["--socketio-max-payload", "2048"])


def base(server):
    return "http://127.0.0.1:%d" % server["http"]


class Lifecycle:
    def __init__(self, url, transports):
        self.connects = 0
        self.disconnects = 0
        self.events = []
        self.cond = threading.Condition()
        # A reconnect after the old connection's tasks have wound down (the 4.x client reuses them).
        self.sio = socketio.Client(reconnection=True, reconnection_delay=1, reconnection_delay_max=1, randomization_factor=0)
        self.sio.on("connect", self._connect)
        self.sio.on("disconnect", self._disconnect)
        self.sio.on("error", lambda *a: self._event("error", a))
        self.sio.on("newChatMessage", lambda *a: self._event("newChatMessage", a))
        self.sio.on("userList", lambda *a: self._event("userList", a))
        self.sio.connect(url, transports=transports)

    def _event(self, name, args):
        with self.cond:
            self.events.append((name, args))
            self.cond.notify_all()

    def _connect(self):
        with self.cond:
            self.connects += 1
            self.cond.notify_all()

    def _disconnect(self):
        with self.cond:
            self.disconnects += 1
            self.cond.notify_all()

    def wait(self, predicate, what, timeout=10):
        deadline = time.time() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.time()
                assert left > 0, "timed out waiting for %s; events %r" % (what, self.events)
                self.cond.wait(left)

    def close(self):
        try:
            self.sio.disconnect()
        except Exception:
            pass


@pytest.mark.parametrize("transports", [["polling"], ["websocket"]])
def test_an_oversized_message_ends_the_session_and_the_client_reconnects(server, transports):
    client = Lifecycle(base(server), transports)
    try:
        client.wait(lambda: client.connects >= 1, "the first connect")
        first = client.sio.sid
        client.sio.emit("chatMessage", ("big", "x" * 10000))
        client.wait(lambda: client.disconnects >= 1, "the session to end")
        client.wait(lambda: client.connects >= 2 and client.sio.connected, "a reconnect")
        assert client.sio.sid != first
        # The new session works: identified, its message comes back.
        name = "small" + transports[0]
        client.sio.emit("connectUser", name)
        client.wait(lambda: any(e[0] == "userList" and name in [u["nickname"] for u in e[1][0]] for e in client.events),
                    "the user list after connectUser")
        client.sio.emit("chatMessage", (name, "after reconnect"))
        client.wait(lambda: any(e[1][1] == "after reconnect" for e in client.events if e[0] == "newChatMessage"),
                    "the message after the reconnect")
    finally:
        client.close()


def test_unknown_events_get_an_ack_error_and_never_an_error_event(server):
    client = Lifecycle(base(server), ["polling"])
    try:
        client.wait(lambda: client.connects >= 1, "the connect")
        client.sio.emit("noSuchEvent", "x")
        answer = client.sio.call("noSuchEvent", "y", timeout=TIMEOUT)
        assert isinstance(answer, dict) and "unknown event" in answer["error"]
        assert [e for e in client.events if e[0] == "error"] == []
    finally:
        client.close()
