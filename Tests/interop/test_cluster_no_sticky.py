"""No sticky sessions: two cluster nodes on one Redis behind a plain round-robin load balancer
(Tests/interop/rr_proxy.py: every request to the next node, on a fresh connection). A
polling request or a WebSocket upgrade for a session of the other node is handed on to it
(EngineIORelay), so python-socketio's SocketChat behaviour tests pass over polling, WebSocket
and the upgrade, exactly as on one node.

Run: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_cluster_no_sticky.py
"""
import json

import pytest
import socketio

from rr_proxy import RoundRobinProxy, two_balanced_nodes
from sio_support import run_late_post_after_upgrade, run_reconnect_sequence, run_socketchat_sequence


@pytest.fixture(scope="module")
def balanced():
    with two_balanced_nodes("nosticky") as balanced:
        yield balanced


def relayed(nodes):
    return sum(node.metric("parley_engineio_relayed_total") or 0 for node in nodes)


@pytest.mark.parametrize("transports,expected", [(["polling"], "polling"), (["polling", "websocket"], "websocket"),
                                                 (["websocket"], "websocket")])
def test_socketchat_through_a_round_robin_balancer(balanced, transports, expected):
    proxy, nodes = balanced
    before = relayed(nodes)
    run_socketchat_sequence(socketio, proxy.url, transports, expected)
    if "polling" in transports:
        assert relayed(nodes) > before, "requests were handed on between the nodes"
    assert min(proxy.counts) > 0


@pytest.mark.parametrize("transports", [["polling", "websocket"], ["polling"]])
def test_a_reconnecting_app_through_the_balancer(balanced, transports):
    proxy, _ = balanced
    run_reconnect_sequence(socketio, proxy.url, transports)


def test_a_post_right_after_the_upgrade_through_the_balancer(balanced):
    proxy, _ = balanced
    run_late_post_after_upgrade(proxy.url, 4)


def test_an_unknown_node_or_a_forged_relay_is_refused(balanced):
    import requests
    proxy, nodes = balanced
    # A sid naming a node that is not there, and one with a forged relay header.
    r = requests.get(nodes[0].base + "/socket.io/?EIO=4&transport=polling&sid=ghost~abcdefghijklmnopqrst", timeout=5)
    assert r.status_code == 400 and "Session ID unknown" in r.text
    r = requests.get(nodes[0].base + "/socket.io/?EIO=4&transport=polling&sid=b~abcdefghijklmnopqrst", timeout=5,
                     headers={"X-Parley-Relay": "guess", "X-Parley-Relay-For": "10.0.0.1"})
    assert r.status_code == 400, r.text


def test_a_killed_node_behind_the_balancer():
    """SIGKILL one of three nodes: a request for one of its sessions through another node is
    answered at once (502, then 400 once its lease is gone), and SocketChat goes on through
    the balancer on the other two."""
    import time

    import requests
    from cluster_support import RedisProcess, eventually, start_nodes

    redis = RedisProcess()
    nodes = []
    proxy = None
    try:
        nodes = start_nodes(["a", "b", "c"], redis=redis, prefix="nosticky-kill-%d" % time.time_ns())
        for node in nodes:
            node.wait_ready()
        a, _, c = nodes
        proxy = RoundRobinProxy([("127.0.0.1", node.http) for node in nodes])
        opened = requests.get(c.base + "/socket.io/?EIO=4&transport=polling", timeout=5)
        sid = json.loads(opened.text[1:])["sid"]
        assert sid.startswith("c~"), sid
        # Through a: handed on to c while c lives.
        r = requests.post(a.base + "/socket.io/?EIO=4&transport=polling&sid=" + sid, data="40", timeout=5)
        assert r.status_code == 200 and r.text == "ok", (r.status_code, r.text)
        c.kill()
        started = time.time()
        r = requests.get(a.base + "/socket.io/?EIO=4&transport=polling&sid=" + sid, timeout=10)
        assert r.status_code == 502 and "cannot be reached" in r.text and time.time() - started < 3, (r.status_code, r.text)
        assert (a.metric("parley_engineio_relay_failures_total") or 0) >= 1
        # Once c's registration has lapsed (its lease), the session is simply unknown.
        eventually("c's registration gone", lambda: requests.get(a.base + "/socket.io/?EIO=4&transport=polling&sid=" + sid,
                                                                  timeout=5).status_code == 400, timeout=15)
        # SocketChat through the balancer, on the two nodes left.
        run_socketchat_sequence(socketio, proxy.url, ["polling"], "polling")
        run_socketchat_sequence(socketio, proxy.url, ["polling", "websocket"], "websocket")
    finally:
        if proxy:
            proxy.stop()
        for node in nodes:
            node.stop()
        redis.stop()


def test_a_sentinel_failover_in_the_middle_behind_the_balancer():
    """Two nodes on a Sentinel-watched master with one replica, behind the round-robin
    balancer: chat goes on across a SIGKILL of the master (the nodes follow the promoted
    replica), and every SocketChat behaviour holds through the balancer afterwards."""
    import time

    from cluster_support import RedisProcess, RedisSentinel, eventually, start_nodes
    from sio_support import ChatClient

    master = RedisProcess()
    replica = RedisProcess(extra=("--replicaof", "127.0.0.1", str(master.port)))
    sentinels, nodes, clients, proxy = [], [], [], None
    try:
        eventually("the replica in sync", lambda: "master_link_status:up" in replica.cli("INFO", "replication"), timeout=15)
        sentinels = [RedisSentinel(master) for _ in range(3)]
        eventually("the sentinels see the replica", lambda: all(
            "num-slaves" in s.cli("SENTINEL", "master", "mymaster") and
            s.cli("SENTINEL", "replicas", "mymaster").count("ip") >= 1 for s in sentinels), timeout=15)
        seeds = ",".join(s.address for s in sentinels)
        nodes = start_nodes(["a", "b"], redis=master, prefix="nosticky-failover-%d" % time.time_ns(),
                            extra=["--redis-sentinel", seeds, "--redis-sentinel-master", "mymaster"])
        for node in nodes:
            node.wait_ready()
        proxy = RoundRobinProxy([("127.0.0.1", node.http) for node in nodes])
        alice = ChatClient(socketio, proxy.url, ["polling"])
        bob = ChatClient(socketio, proxy.url, ["polling", "websocket"])
        clients += [alice, bob]
        alice.emit("connectUser", "alice-f")
        bob.emit("connectUser", "bob-f")
        alice.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == "bob-f")
        bob.emit("chatMessage", "bob-f", "before the failover")
        alice.wait_for("newChatMessage", lambda a: a[1] == "before the failover")

        master.kill()
        killed = time.time()
        eventually("a replica promoted", lambda: sentinels[0].master_port() == replica.port, timeout=20)

        def delivered():
            text = "after the failover %d" % time.time_ns()
            bob.emit("chatMessage", "bob-f", text)
            try:
                alice.wait_for("newChatMessage", lambda a: a[1] == text, timeout=1)
                return True
            except AssertionError:
                return False

        eventually("chat across the failover", delivered, timeout=20)
        resumed = time.time() - killed
        assert resumed < 15, resumed
        # Both nodes back on the promoted master (ready, and registered for the relay there)
        # before new clients come.
        for node in nodes:
            node.wait_ready()
        eventually("both nodes registered on the new master", lambda: all(
            replica.cli("GET", "%s:relay:node:%s" % (node.prefix, node.name)) for node in nodes), timeout=10)
        # Every behaviour through the balancer on the promoted master.
        try:
            run_socketchat_sequence(socketio, proxy.url, ["polling"], "polling")
            run_socketchat_sequence(socketio, proxy.url, ["polling", "websocket"], "websocket")
        except Exception as error:
            raise AssertionError("%s\n%s" % (error, "\n".join("--- node %s\n%s" % (n.name, n.log()[-3000:]) for n in nodes))) from error
        assert sum(node.metric("parley_engineio_relayed_total") or 0 for node in nodes) > 0
    finally:
        for client in clients:
            try:
                client.disconnect()
            except Exception:
                pass
        if proxy:
            proxy.stop()
        for node in nodes:
            node.stop()
        for process in sentinels + [replica, master]:
            process.stop()
