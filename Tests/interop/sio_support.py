"""Shared helpers for the Socket.IO interop tests, importable by both python-socketio 5.x
(Engine.IO 4, Tests/interop/test_socketio.py) and 4.x (Engine.IO 3, Tests/interop/eio3/).

Every process is started here and killed by its own pid; every wait has a timeout.
"""
import sys
import threading
import time

from parley_process import parley_server  # noqa: F401  (re-exported for the fixtures)

TIMEOUT = 5
SOCKETCHAT_EVENTS = ["userList", "userConnectUpdate", "userExitUpdate", "userTypingUpdate", "newChatMessage", "error",
                     # Parley's opt-in events for message actions (after subscribeActions).
                     "messageInfo", "messageEdited", "messageDeleted", "reaction"]


class ChatClient:
    """A python-socketio client that records every SocketChat event it receives."""

    def __init__(self, socketio_module, url, transports):
        self.events = []
        # Every event in arrival order, consumed or not: a failed wait shows what came, and
        # in which order, even when an earlier wait already took it.
        self.history = []
        self.cond = threading.Condition()
        self.sio = socketio_module.Client(reconnection=False)
        for name in SOCKETCHAT_EVENTS:
            self.sio.on(name, self._recorder(name))
        # python-socketio 5 waits 1 s for the namespace by default: too short on a loaded CI
        # machine (4.x does not wait, and has no such argument).
        extra = {"wait_timeout": TIMEOUT} if not getattr(socketio_module, "__version__", "5").startswith("4.") else {}
        self.sio.connect(url, transports=transports, **extra)
        deadline = time.time() + TIMEOUT
        while not self.sio.connected or not self.sio.sid:
            assert time.time() < deadline, "not connected"
            time.sleep(0.01)

    def _recorder(self, name):
        def record(*args):
            with self.cond:
                self.events.append((name, args))
                self.history.append(name)
                self.cond.notify_all()
        return record

    def wait_for(self, name, predicate=lambda args: True, timeout=TIMEOUT):
        """Returns (and consumes up to) the first `name` event whose args satisfy `predicate`."""
        deadline = time.time() + timeout
        with self.cond:
            while True:
                for index, (event, args) in enumerate(self.events):
                    if event == name and predicate(args):
                        del self.events[:index + 1]
                        return args
                left = deadline - time.time()
                assert left > 0, "no %s event; got %r (every event so far, in order: %s; Engine.IO session %s)" % (
                    name, self.events, ", ".join(self.history[-40:]), self.engineio_sid())
                self.cond.wait(left)

    def engineio_sid(self):
        """The Engine.IO session id (in a cluster it names the node), or None once the client
        is disconnected."""
        return getattr(getattr(self.sio, "eio", None), "sid", None)

    def quiet_for(self, seconds, name=None):
        time.sleep(seconds)
        with self.cond:
            return [e for e in self.events if name is None or e[0] == name]

    def emit(self, event, *args):
        self.sio.emit(event, args if len(args) != 1 else args[0])

    def call(self, event, *args):
        return self.sio.call(event, args if len(args) != 1 else args[0], timeout=TIMEOUT)

    def transport(self):
        return self.sio.transport()

    def disconnect(self):
        """Disconnects once the Engine.IO write loop is idle. python-engineio's polling client
        loses what `disconnect()` queues (the Socket.IO DISCONNECT and the Engine.IO CLOSE)
        when it comes while an earlier POST is still in flight: after that POST its write loop
        sees the new state and ends without sending them, and the server hears of the
        disconnect only at the ping timeout."""
        eio = getattr(self.sio, "eio", None)
        queue = getattr(eio, "queue", None)
        # Threads blocked in the queue's get(): the write loop, when it waits for packets.
        waiting = getattr(getattr(queue, "not_empty", None), "_waiters", None)
        if waiting is not None and getattr(eio, "current_transport", None) == "polling":
            deadline = time.time() + TIMEOUT
            while (queue.unfinished_tasks or not waiting) and eio.state == "connected" and time.time() < deadline:
                time.sleep(0.005)
        # python-socketio queues its DISCONNECT, then python-engineio its CLOSE and the new
        # state. A thread switch between them lets the write loop send the DISCONNECT alone
        # and then end, so the session lingers and this call waits for the ping (25 s). No
        # switch is forced while the interval is long; the call blocks (and so lets the other
        # threads run) only after the state has changed.
        previous = sys.getswitchinterval()
        sys.setswitchinterval(0.5)
        try:
            self.sio.disconnect()
        finally:
            sys.setswitchinterval(previous)


def nicknames(user_list):
    return [u["nickname"] for u in user_list]


def check_user_list(args):
    """The client crash traps: an array of objects with a Bool isConnected."""
    assert len(args) == 1 and isinstance(args[0], list)
    for user in args[0]:
        assert isinstance(user["id"], str) and isinstance(user["nickname"], str)
        assert isinstance(user["isConnected"], bool)
    return args[0]


def run_socketchat_sequence(socketio_module, url, transports, expected_transport):
    """The classic SocketChat flow with three clients."""
    suffix = str(time.time_ns())[-6:]
    alice_name, bob_name, carol_name = "alice" + suffix, "bob" + suffix, "carol" + suffix
    alice = ChatClient(socketio_module, url, transports)
    bob = ChatClient(socketio_module, url, transports)
    carol = ChatClient(socketio_module, url, transports)
    try:
        assert alice.transport() == expected_transport
        # connectUser: userList, then userConnectUpdate, to everybody in the lobby.
        alice.emit("connectUser", alice_name)
        users = check_user_list(alice.wait_for("userList", lambda a: alice_name in nicknames(a[0])))
        assert {"nickname": alice_name, "isConnected": True}.items() <= next(u for u in users if u["nickname"] == alice_name).items()
        update = alice.wait_for("userConnectUpdate")
        assert update[0]["nickname"] == alice_name and update[0]["isConnected"] is True
        bob.emit("connectUser", bob_name)
        for client in (alice, bob):
            users = check_user_list(client.wait_for("userList", lambda a: bob_name in nicknames(a[0])))
            assert alice_name in nicknames(users)
            assert client.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == bob_name)
        assert carol.call("connectUser", carol_name) is None  # acked, no data
        alice.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == carol_name)
        # Typing.
        bob.emit("startType", bob_name)
        assert alice.wait_for("userTypingUpdate", lambda a: bob_name in a[0])[0][bob_name] == 1
        # chatMessage: typing cleared, then three strings.
        bob.emit("chatMessage", bob_name, "hello there")
        alice.wait_for("userTypingUpdate", lambda a: bob_name not in a[0])
        for client in (alice, bob, carol):
            message = client.wait_for("newChatMessage", lambda a: a[1] == "hello there")
            assert len(message) == 3 and all(isinstance(x, str) for x in message)
            assert message[0] == bob_name and message[2]
        # An acked event gets its ack.
        assert alice.call("chatMessage", alice_name, "with ack ✓") is None
        carol.wait_for("newChatMessage", lambda a: a[1] == "with ack ✓")
        bob.emit("stopType", bob_name)
        alice.wait_for("userTypingUpdate", lambda a: bob_name not in a[0])
        # exitUser: everybody hears the exit; the list forgets the user.
        carol.emit("exitUser", carol_name)
        check_user_list(alice.wait_for("userList", lambda a: carol_name not in nicknames(a[0])))
        for client in (alice, bob, carol):
            exit_args = client.wait_for("userExitUpdate", lambda a: a[0] == carol_name)
            assert isinstance(exit_args[0], str)
        # Disconnect: the user stays listed, disconnected; userExitUpdate(name).
        bob.disconnect()
        users = check_user_list(alice.wait_for("userList", lambda a: any(
            u["nickname"] == bob_name and u["isConnected"] is False for u in a[0])))
        assert alice.wait_for("userExitUpdate", lambda a: a[0] == bob_name)
        alice.wait_for("userTypingUpdate")
        # carol, never identified again, disconnecting sends nobody anything.
        carol.disconnect()
        assert alice.quiet_for(0.5, "userExitUpdate") == []
        # bob comes back: connected again, listed once.
        bob2 = ChatClient(socketio_module, url, transports)
        try:
            bob2.emit("connectUser", bob_name)
            # A new socket hears the lobby before it joins: in a cluster, the roster's poll may
            # first bring it a list that still shows bob departed.
            users = check_user_list(bob2.wait_for("userList", lambda a: any(
                u["nickname"] == bob_name and u["isConnected"] for u in a[0])))
            assert [u["isConnected"] for u in users if u["nickname"] == bob_name] == [True], users
        finally:
            bob2.disconnect()
    finally:
        for client in (alice, bob, carol):
            try:
                client.disconnect()
            except Exception:
                pass


def run_reconnect_sequence(socketio_module, url, transports):
    """An app that reconnects (a drop, or the background/foreground cycle of the SocketChat
    tutorial app) gets a new session and never sends connectUser again: it still hears the
    lobby, as with the classic server's io.emit, and its first chatMessage makes it a member
    again under the nickname it names."""
    suffix = str(time.time_ns())[-6:]
    ria, wes = "ria" + suffix, "wes" + suffix
    app = ChatClient(socketio_module, url, transports)
    watcher = ChatClient(socketio_module, url, transports)
    back = None
    try:
        app.emit("connectUser", ria)
        app.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == ria)
        watcher.emit("connectUser", wes)
        watcher.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == wes)
        # The transport drops; the app comes back with a new session and identifies no more.
        app.disconnect()
        watcher.wait_for("userExitUpdate", lambda a: a[0] == ria)
        back = ChatClient(socketio_module, url, transports)
        watcher.emit("chatMessage", wes, "are you there?")
        message = back.wait_for("newChatMessage", lambda a: a[1] == "are you there?")
        assert message[0] == wes and len(message) == 3
        watcher.emit("startType", wes)
        assert back.wait_for("userTypingUpdate", lambda a: wes in a[0])[0][wes] == 1
        # Its own message, sent with its nickname: a member again, listed connected once.
        back.emit("chatMessage", ria, "back again")
        users = check_user_list(watcher.wait_for("userList", lambda a: any(
            u["nickname"] == ria and u["isConnected"] for u in a[0])))
        assert [u["isConnected"] for u in users if u["nickname"] == ria] == [True]
        assert watcher.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == ria)[0]["isConnected"] is True
        assert watcher.wait_for("newChatMessage", lambda a: a[1] == "back again")[0] == ria
        assert back.wait_for("newChatMessage", lambda a: a[1] == "back again")[0] == ria
        # Exactly once: no second copy of the message reaches the app.
        assert [e for e in back.quiet_for(0.3, "newChatMessage") if e[1][1] == "back again"] == []
    finally:
        for client in (app, watcher, back):
            try:
                if client is not None:
                    client.disconnect()
            except Exception:
                pass


def run_late_post_after_upgrade(base_url, version):
    """Socket.IO-Client-Swift POSTs `40` and its first emits while it probes the WebSocket
    and sends `5` without waiting for that POST: the POST can arrive after the `5`. Raw
    Engine.IO over HTTP (requests) and WebSocket (websocket-client): a POST of `40` and of an
    event, sent right after the upgrade's `5`, is answered and handled."""
    import json as _json
    import re

    import requests
    import websocket

    name = "pia%d%s" % (version, str(time.time_ns())[-6:])
    r = requests.get(base_url + "/socket.io/?EIO=%d&transport=polling" % version, timeout=TIMEOUT)
    assert r.status_code == 200
    sid = re.search(r'"sid":"([^"]+)"', r.text).group(1)
    ws = websocket.create_connection(base_url.replace("http://", "ws://") +
                                     "/socket.io/?EIO=%d&transport=websocket&sid=%s" % (version, sid), timeout=TIMEOUT)
    try:
        ws.send("2probe")
        assert ws.recv() == "3probe"
        ws.send("5")
        event = '42' + _json.dumps(["chatMessage", name, "posted late"], separators=(",", ":"))
        if version == 4:
            body = "40\x1e" + event
        else:  # EIO3 payload: <length>:<packet>; `/` is connected at open already
            body = "%d:%s" % (len(event), event)
        r = requests.post(base_url + "/socket.io/?EIO=%d&transport=polling&sid=%s" % (version, sid), data=body,
                          headers={"Content-Type": "text/plain;charset=UTF-8"}, timeout=TIMEOUT)
        assert (r.status_code, r.text) == (200, "ok")
        seen = []
        deadline = time.time() + TIMEOUT
        def saw_all():
            return (any('"newChatMessage"' in m and "posted late" in m for m in seen) and
                    any('"userConnectUpdate"' in m and name in m for m in seen))
        while not saw_all():
            assert time.time() < deadline, "no newChatMessage and userConnectUpdate over the WebSocket; got %r" % seen
            seen.append(ws.recv())
        if version == 4:
            assert seen[0].startswith('40{"sid":'), seen
        # A GET after the upgrade is still refused: the grace is for a POST that carries packets.
        r = requests.get(base_url + "/socket.io/?EIO=%d&transport=polling&sid=%s" % (version, sid), timeout=TIMEOUT)
        assert r.status_code == 400
    finally:
        ws.close()
