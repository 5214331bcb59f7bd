"""Interop: what a real python-socketio 5.x client (Engine.IO 4) sees of the Socket.IO door's
answers and limits: no `error` events, acks that carry errors, oversized messages that end the
session (so the client reconnects), and the heartbeat settings.

Run: PARLEY_BIN=.build/debug/parley .venv-interop/bin/pytest -q Tests/interop/test_socketio_limits.py
"""
import threading
import time

import pytest
import requests
import socketio

from sio_support import TIMEOUT, parley_server


@pytest.fixture(scope="module")
def server():
    yield from parley_server(extra_args=["--socketio-max-payload", "2048",
                                         "--socketio-ping-interval", "1000", "--socketio-ping-timeout", "800"])


def base(server):
    return "http://127.0.0.1:%d" % server["http"]


def metric(server, name):
    text = requests.get(base(server) + "/metrics", timeout=TIMEOUT).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(line.rsplit(" ", 1)[1])
    raise AssertionError("no %s in /metrics" % name)


class Recorder:
    """A python-socketio client that records its lifecycle and every event."""

    def __init__(self, url, transports, reconnection=False):
        self.events = []
        self.connects = 0
        self.disconnects = 0
        self.cond = threading.Condition()
        self.sio = socketio.Client(reconnection=reconnection, reconnection_delay=0.2, reconnection_delay_max=0.5)
        self.sio.on("*", self._any)
        self.sio.on("connect", self._connect)
        self.sio.on("disconnect", self._disconnect)
        self.sio.connect(url, transports=transports, wait_timeout=TIMEOUT)

    def _any(self, event, *args):
        with self.cond:
            self.events.append((event, args))
            self.cond.notify_all()

    def _connect(self):
        with self.cond:
            self.connects += 1
            self.cond.notify_all()

    def _disconnect(self, *args):
        with self.cond:
            self.disconnects += 1
            self.cond.notify_all()

    def wait(self, predicate, what, timeout=TIMEOUT):
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
def test_unknown_events_get_an_ack_error_and_never_an_error_event(server, transports):
    client = Recorder(base(server), transports)
    try:
        before = metric(server, 'parley_socketio_ignored_events_total{reason="unknown_event"}')
        client.sio.emit("noSuchEvent", "x")
        answer = client.sio.call("noSuchEvent", "y", timeout=TIMEOUT)
        assert isinstance(answer, dict) and "unknown event" in answer["error"]
        assert client.sio.call("connectUser", "uma" + transports[0], timeout=TIMEOUT) is None
        # The chat message's ack comes once it is stored.
        assert client.sio.call("chatMessage", ("uma" + transports[0], "stored"), timeout=TIMEOUT) is None
        assert "error" not in [name for name, _ in client.events]
        assert metric(server, 'parley_socketio_ignored_events_total{reason="unknown_event"}') == before + 1
    finally:
        client.close()


@pytest.mark.parametrize("transports", [["polling"], ["websocket"], ["polling", "websocket"]])
def test_an_oversized_message_ends_the_session_and_the_client_reconnects(server, transports):
    client = Recorder(base(server), transports, reconnection=True)
    try:
        first_sid = client.sio.get_sid()
        client.sio.emit("chatMessage", ("big", "x" * 10000))
        client.wait(lambda: client.disconnects >= 1, "the session to end")
        client.wait(lambda: client.connects >= 2 and client.sio.connected, "the client to reconnect", timeout=10)
        assert client.sio.get_sid() != first_sid
        assert client.sio.call("connectUser", "back" + "".join(transports), timeout=TIMEOUT) is None
    finally:
        client.close()


def test_heartbeat_settings_reach_the_client_and_keep_it_connected(server):
    r = requests.get(base(server) + "/socket.io/", params={"EIO": "4", "transport": "polling"}, timeout=TIMEOUT)
    assert r.text.startswith("0")
    assert '"pingInterval":1000' in r.text and '"pingTimeout":800' in r.text
    client = Recorder(base(server), ["websocket"])
    try:
        time.sleep(2.5)  # more than two heartbeats: the client answers them and stays
        assert client.sio.connected and client.disconnects == 0
        assert client.sio.call("connectUser", "steady", timeout=TIMEOUT) is None
    finally:
        client.close()
