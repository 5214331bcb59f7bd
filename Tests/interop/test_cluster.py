"""Cluster mode with real processes: three `parley serve` nodes on one real `redis-server`,
and on a local Redis Cluster of three masters, driven by real clients on every door
(`websockets` for the native door, python-socketio, plain sockets for the line door).

Run: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_cluster.py
(the faults and the ordering run are in test_cluster_faults.py).
"""
import uuid

import pytest

import json
import urllib.request

from cluster_support import (LineClient, NativeClient, RedisCluster, RedisProcess, SocketChatClient, close_all,
                             eventually, start_nodes)
from rr_proxy import RoundRobinProxy, TCPRoundRobinProxy

LOBBY = "observable-room"


@pytest.fixture(scope="module")
def redis():
    server = RedisProcess()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_cluster():
    cluster = RedisCluster(masters=3)
    yield cluster
    cluster.stop()


def prefix():
    return "it-" + uuid.uuid4().hex[:8]


class Entry:
    """Where a test's client goes in when the nodes are behind round-robin balancers: every
    request and connection to the next node, whatever the client (no sticky sessions)."""

    def __init__(self, name, http, line):
        self.name, self.http, self.line = name, http, line
        self.base = http.url
        self.ws_url = http.url.replace("http://", "ws://") + "/v3/websocket"

    def members(self, room, channel="demo"):
        with urllib.request.urlopen("%s/%s/%s/members" % (self.base, channel, room), timeout=5) as response:
            return json.loads(response.read())


@pytest.fixture(params=["redis", "redis-cluster", "balanced"])
def three_nodes(request):
    """Nodes a, b and c on one Redis (or the Redis Cluster), under a key prefix of their own;
    `balanced`: on one Redis, and every client goes through round-robin balancers (HTTP and
    line), never to a node of its choosing."""
    if request.param == "redis-cluster":
        target = {"cluster": request.getfixturevalue("redis_cluster")}
    else:
        target = {"redis": request.getfixturevalue("redis")}
    nodes = start_nodes(["a", "b", "c"], prefix=prefix(), **target)
    proxies = []
    if request.param == "balanced":
        for node in nodes:
            node.wait_ready()
        http = RoundRobinProxy([("127.0.0.1", node.http) for node in nodes])
        line = TCPRoundRobinProxy([("127.0.0.1", node.line) for node in nodes])
        proxies = [http, line]
        yield [Entry(node.name, http, line.port) for node in nodes], None
    else:
        yield nodes, target.get("cluster")
    for proxy in proxies:
        proxy.stop()
    for node in nodes:
        node.stop()


def test_members_on_three_nodes_chat_across_every_door(three_nodes):
    nodes, cluster = three_nodes
    a, b, c = nodes
    clients = []
    try:
        # Every node has one member on each door: line first (so line-a hears every join),
        # then native, then Socket.IO (websocket on a and c, long-polling on b).
        lines = [LineClient(node.line, "line-" + node.name) for node in nodes]
        clients += lines
        natives = []
        for node in nodes:
            native = NativeClient(node, "native-" + node.name)
            clients.append(native)
            native.subscribe(LOBBY)
            natives.append(native)
        sios = []
        for node in nodes:
            transports = ("polling",) if node is b else ("websocket",)
            sio = SocketChatClient(node, "sio-" + node.name, transports=transports)
            clients.append(sio)
            sios.append(sio)
        assert sios[1].transport() == "polling" and sios[0].transport() == "websocket"
        everyone = {prefix + "-" + node.name for prefix in ("line", "native", "sio") for node in nodes}

        # Line-door join notices cross nodes: line-a (first in) hears the eight others arrive.
        lines[0].received.wait_for_all({name + " has joined" for name in everyone}, what="line-a's join notices")

        # One member list: every node answers the same nine ids in the same (join) order, and
        # every native member's view (snapshot + joins) holds the same nine.
        listed = eventually("every node lists the same nine members", lambda: (
            lambda lists: lists[0] if len(lists[0]) == 9 and all(l == lists[0] for l in lists) else None
        )([node.members(LOBBY) for node in nodes]))
        for native in natives:
            eventually("%s sees all nine" % native.name, lambda n=native: sorted(n.member_view(LOBBY)) == sorted(listed))
        # ...and a newcomer's observable_members snapshot on each node is that list, plus itself.
        names_by_id = {}
        for node in nodes:
            observer = NativeClient(node, "observer-" + node.name)
            observer.subscribe(LOBBY)
            snapshot = observer.wait_for(lambda m: m.get("type") == "observable_members")
            ids = [m["id"] for m in snapshot["data"]]
            assert ids[:9] == listed and len(ids) == 10 and ids[9] == observer.client_id, (node.name, ids, listed)
            names_by_id.update({m["id"]: (m.get("clientData") or {}).get("name") for m in snapshot["data"][:9]})
            observer.close()
            eventually("observer gone", lambda: len(node.members(LOBBY)) == 9)
        assert set(names_by_id.values()) == everyone

        # Chat: all nine speak, each on its own door; everybody on every door gets all nine.
        # One at a time: python-engineio's client drops a session whose poll answer holds more
        # than 16 packets (its max_decode_packets), and each text brings a typing update too.
        texts = {}
        speakers = [(native.name, lambda t, n=native: n.publish(LOBBY, t)) for native in natives]
        speakers += [(line.name, lambda t, l=line: l.send("msg:%s\n" % t)) for line in lines]
        speakers += [(sio.nickname, lambda t, s=sio: s.emit("chatMessage", s.nickname, t)) for sio in sios]
        for name, speak in speakers:
            texts[name] = "%s says hello" % name
            speak(texts[name])
            sios[1].wait_for("newChatMessage", lambda a, t=texts[name]: a[1] == t)
        for native in natives:
            eventually("%s gets all nine texts" % native.name, lambda n=native: set(texts.values()) <= set(n.chat(LOBBY)))
        for line in lines:
            line.received.wait_for_all({"%s:%s" % (s, t) for s, t in texts.items() if s != line.name},
                                       what="the texts on %s" % line.name)
        for sio in sios:
            sio.received.wait_until(lambda items: len([e for e in items if e[0] == "newChatMessage"]) >= 9,
                                    what="nine texts on " + sio.nickname)
            chat = {args[1]: args for args in sio.events("newChatMessage")}
            for sender, text in texts.items():
                assert chat[text][0] == sender and isinstance(chat[text][2], str), chat
        # Each native delivery carries the sender's member (so clients can show who spoke).
        for message in natives[0].publishes(LOBBY):
            if isinstance(message.get("message"), str):
                assert message.get("client_id") in listed, message

        # Typing crosses nodes: Socket.IO on b -> native on a and c and Socket.IO on a and c;
        # native on c -> Socket.IO on a and b.
        sios[1].emit("startType", "sio-b")
        for native in (natives[0], natives[2]):
            native.wait_for(lambda m: m.get("type") == "publish" and m.get("message") == {"typing": True}
                            and names_by_id.get(m.get("client_id")) == "sio-b")
        for sio in (sios[0], sios[2]):
            assert sio.wait_for("userTypingUpdate", lambda a: "sio-b" in a[0])[0]["sio-b"] == 1
        natives[2].publish(LOBBY, {"typing": True})
        for sio in (sios[0], sios[1]):
            assert sio.wait_for("userTypingUpdate", lambda a: "native-c" in a[0])[0]["native-c"] == 1

        # The SocketChat user list lists everyone connected, whichever node and door.
        sios[0].emit("connectUser", "sio-a")
        users = sios[0].wait_for("userList", lambda a: len(a[0]) >= 9)[0]
        assert {u["nickname"] for u in users} == everyone and all(u["isConnected"] for u in users), users

        # Leaving crosses too: exitUser on c, a line user dropping off b.
        sios[2].emit("exitUser", "sio-c")
        lines[0].wait_for(lambda l: l == "sio-c has left")
        natives[1].wait_for(lambda m: m.get("type") == "observable_member_leave" and names_by_id.get(m["data"]["id"]) == "sio-c")
        lines[1].close()
        sios[0].wait_for("userExitUpdate", lambda a: a[0] == "line-b")
        natives[2].wait_for(lambda m: m.get("type") == "observable_member_leave" and names_by_id.get(m["data"]["id"]) == "line-b")
        eventually("every node lists the same seven", lambda: (
            lambda lists: len(lists[0]) == 7 and all(l == lists[0] for l in lists))([node.members(LOBBY) for node in nodes]))

        if cluster is not None:
            check_rooms_spread_over_every_shard(nodes, cluster, natives)
    finally:
        close_all(clients)


def check_rooms_spread_over_every_shard(nodes, cluster, natives):
    """Rooms chosen so each master owns one (CLUSTER KEYSLOT of the room's hash tag): chat in
    each reaches members on all three nodes, and each room's stream is on its own master."""
    by_owner = {}
    for k in range(200):
        room = "spread-%d" % k
        owner = cluster.owner(cluster.keyslot("{demo/%s}" % room))
        by_owner.setdefault(owner.port, room)
        if len(by_owner) == len(cluster.nodes):
            break
    assert len(by_owner) == 3, by_owner
    prefix = None
    for native in natives:
        for room in by_owner.values():
            native.subscribe(room)
    for index, (port, room) in enumerate(sorted(by_owner.items())):
        speaker = natives[index]
        speaker.publish(room, "in %s from %s" % (room, speaker.name))
        for native in natives:
            native.wait_for(lambda m, r=room: m.get("type") == "publish" and m.get("room") == r)
    for port, room in by_owner.items():
        owner = next(n for n in cluster.nodes if n.port == port)
        keys = owner.cli("--scan", "--pattern", "*{demo/%s}:s" % room).split()
        assert len(keys) == 1, (room, port, keys)
        prefix = keys[0].split(":{")[0]
        assert owner.cli("XLEN", keys[0]) == "1"
    # Every master holds some of this run's keys (the lobby's slot is on one of them too).
    for master in cluster.nodes:
        assert master.cli("--scan", "--pattern", prefix + ":*"), "master %d holds no key of the run" % master.port
