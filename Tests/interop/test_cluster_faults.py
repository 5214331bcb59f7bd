"""Cluster mode under faults, with real processes: a `parley serve` node SIGKILLed mid-stream,
`redis-server` SIGKILLed mid-stream and restarted on its append-only file, Redis paused
(SIGSTOP/SIGCONT) for longer than the presence lease; and the ordering run: two publishers
on different nodes, 10,000 messages each, seen in one identical order, the offset order, by
subscribers on every node.

Short leases (3 s) keep it quick. Every process is started here and stopped by its pid.
Run: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_cluster_faults.py
"""
import time
import uuid

import pytest

from cluster_support import (LineClient, NativeClient, Publisher, RedisProcess, SocketChatClient, close_all,
                             contiguous, eventually, start_nodes)

LEASE = 3
LOBBY = "observable-room"
# A node's members leave everywhere within the lease plus the reaper's 1 s interval; the rest
# is slack for a loaded 2-core machine.
LEAVE_DEADLINE = LEASE + 3


def prefix():
    return "it-" + uuid.uuid4().hex[:8]


@pytest.fixture
def cleanup():
    """Things to stop at the end of a test (clients, nodes, servers), last first."""
    items = []
    yield items
    for item in reversed(items):
        try:
            item.close() if hasattr(item, "close") else item.stop()
        except Exception:
            pass


def nodes_on(redis, cleanup, names=("a", "b", "c"), extra=()):
    # The publishers here send hundreds of messages a second on one connection: the per
    # connection publish limit (50/s by default, then a disconnect for abuse) is not under test.
    nodes = start_nodes(list(names), redis=redis, prefix=prefix(), lease=LEASE,
                        extra=["--publish-rate", "1000000", *extra])
    cleanup.extend(nodes)
    return nodes


def offsets_and_bodies(client, room):
    messages = [m for m in client.publishes(room) if "offset" in m]
    return [m["offset"] for m in messages], [m["message"] for m in messages]


def check_acknowledged_kept(publishers, offsets, bodies):
    """Every acknowledged message is at its acknowledged offset, and every message is there
    once (a retry with the same message_id never stored a second copy)."""
    at = dict(zip(offsets, bodies))
    for publisher in publishers:
        for n, offset in publisher.acked.items():
            assert at.get(offset) == publisher.body(n), "%s acknowledged at %d, found %r" % (
                publisher.body(n), offset, at.get(offset))
    expected = sorted(p.body(n) for p in publishers for n in range(p.sent))
    assert sorted(bodies) == expected, "stored once each: %d bodies, %d expected" % (len(bodies), len(expected))


def test_sigkill_of_a_node_mid_stream(cleanup):
    redis = RedisProcess()
    cleanup.append(redis)
    a, b, c = nodes_on(redis, cleanup)
    room = "observable-kill"
    # Watchers on a and b, on every door; victims on c, on every door.
    watch_a, watch_b = NativeClient(a, "watch-a"), NativeClient(b, "watch-b")
    line_watch = LineClient(a.line, "line-watch")
    sio_watch = SocketChatClient(b, "sio-watch")
    victim_pub, victim_sub = NativeClient(c, "victim-pub"), NativeClient(c, "victim-sub")
    line_victim = LineClient(c.line, "line-victim")
    sio_victim = SocketChatClient(c, "sio-victim")
    publisher_a = NativeClient(a, "pub-a")
    cleanup.extend([watch_a, watch_b, line_watch, sio_watch, victim_pub, victim_sub, line_victim, sio_victim, publisher_a])
    for client in (watch_a, watch_b, victim_pub, victim_sub):
        client.subscribe(room)
    for node in (a, b, c):
        eventually("%s lists everyone" % node.name, lambda n=node: len(n.members(room)) == 4 and len(n.members(LOBBY)) == 4)
    victims = {victim_pub.client_id: "victim-pub", victim_sub.client_id: "victim-sub"}

    # Two streams into the room: from a, and from the doomed node c.
    from_a = Publisher(publisher_a, room, "a", interval=0.004)
    from_c = Publisher(victim_pub, room, "c", interval=0.004)
    victim_sub.received.wait_until(lambda items: sum(1 for m in items if m.get("type") == "publish") >= 150,
                                   timeout=30, what="150 messages on c")
    c.kill()
    killed = time.monotonic()

    # Its members leave everywhere within the lease, on every door.
    for watcher in (watch_a, watch_b):
        watcher.received.wait_until(lambda items, w=watcher: set(victims) <= {i for i, _ in w.member_events(room, "leave")},
                                    timeout=LEAVE_DEADLINE + 5, what="the victims' leaves")
    took = time.monotonic() - killed
    assert took <= LEAVE_DEADLINE, "the victims left after %.1f s (lease %d s)" % (took, LEASE)
    assert took >= LEASE - 1.5, "left after %.1f s, before the lease could expire?" % took
    line_watch.received.wait_for_all({"line-victim has left", "sio-victim has left"}, timeout=5)
    sio_watch.received.wait_until(lambda items: {"line-victim", "sio-victim"} <= {
        args[0] for name, args in items if name == "userExitUpdate"}, timeout=5, what="userExitUpdate of the victims")
    for node in (a, b):
        eventually("%s forgot c's members" % node.name, lambda n=node: sorted(n.members(room)) == sorted(
            [watch_a.client_id, watch_b.client_id]) and len(n.members(LOBBY)) == 2)
    for watcher in (watch_a, watch_b):
        assert [name for _, name in watcher.member_events(room, "leave")] in (
            ["victim-pub", "victim-sub"], ["victim-sub", "victim-pub"]), "nobody else left, each victim once"

    # The dead node's clients come back on other nodes and resume with `since`.
    last_seen_sub = max(offsets_and_bodies(victim_sub, room)[0])
    last_seen_pub = max(offsets_and_bodies(victim_pub, room)[0])
    resumed_sub, resumed_pub = NativeClient(b, "victim-sub"), NativeClient(a, "victim-pub")
    cleanup.extend([resumed_sub, resumed_pub])
    resumed_sub.subscribe(room, since=last_seen_sub)
    resumed_pub.subscribe(room, since=last_seen_pub)
    from_c.move_to(resumed_pub)     # what c never acknowledged goes again, same message_id
    from_c.wait_acked(len(from_c.acked) + 100, timeout=30)
    from_a.wait_done()
    from_c.wait_done()
    final = max(list(from_a.acked.values()) + list(from_c.acked.values()))
    for client in (watch_a, watch_b, resumed_sub, resumed_pub):
        client.received.wait_until(lambda items: any(m.get("offset") == final and m.get("type") == "publish" for m in items),
                                   timeout=30, what="offset %d" % final)

    # No gap, no duplicate, one order: for the watchers, and across each victim's reconnection.
    offsets, bodies = offsets_and_bodies(watch_a, room)
    assert contiguous(offsets) is None, contiguous(offsets)
    assert offsets_and_bodies(watch_b, room) == (offsets, bodies)
    for before, after in ((victim_sub, resumed_sub), (victim_pub, resumed_pub)):
        joined = offsets_and_bodies(before, room)[0] + offsets_and_bodies(after, room)[0]
        assert joined == offsets, contiguous(joined)
        assert offsets_and_bodies(after, room)[1] == bodies[len(offsets_and_bodies(before, room)[0]):]
    # Nothing acknowledged is lost, and nothing sent twice is stored twice.
    check_acknowledged_kept([from_a, from_c], offsets, bodies)


def test_sigkill_of_redis_mid_stream(cleanup):
    redis = RedisProcess(appendonly=True, fsync="always")
    cleanup.append(redis)
    nodes = nodes_on(redis, cleanup)
    a, b, c = nodes
    room = "observable-crash"
    readers = [NativeClient(node, "reader-" + node.name) for node in nodes]
    writers = [NativeClient(a, "writer-a"), NativeClient(b, "writer-b")]
    cleanup.extend(readers + writers)
    for reader in readers:
        reader.subscribe(room)
    publishers = [Publisher(writer, room, writer.name, interval=0.004) for writer in writers]
    readers[2].received.wait_until(lambda items: sum(1 for m in items if m.get("type") == "publish") >= 150,
                                   timeout=30, what="150 messages")

    redis.kill()
    for node in nodes:
        eventually("%s sees Redis down" % node.name, lambda n=node: n.metric("parley_redis_up") == 0, timeout=10)
    # Publishes while Redis is down get a clear error naming Redis (and are sent again later).
    for publisher in publishers:
        eventually("a refused publish", lambda p=publisher: p.errors, timeout=10)
        assert "Redis" in publisher.errors[0], publisher.errors[0]
    acked_while_down = [len(p.acked) for p in publishers]

    redis.restart()
    for node in nodes:
        eventually("%s reconnected to Redis by itself" % node.name, node.redis_up, timeout=20)
    # Publishing and fan-out resume.
    for publisher, before in zip(publishers, acked_while_down):
        publisher.wait_acked(before + 150, timeout=30)
    for publisher in publishers:
        publisher.wait_done(timeout=30)
    final = max(offset for p in publishers for offset in p.acked.values())
    for reader in readers:
        reader.received.wait_until(lambda items: any(m.get("offset") == final and m.get("type") == "publish" for m in items),
                                   timeout=30, what="offset %d" % final)
    offsets, bodies = offsets_and_bodies(readers[0], room)
    assert contiguous(offsets) is None, contiguous(offsets)
    for reader in readers[1:]:
        assert offsets_and_bodies(reader, room) == (offsets, bodies), "one order on every node"
    check_acknowledged_kept(publishers, offsets, bodies)
    # What Redis kept on its append-only file, read back by a newcomer from the start.
    late = NativeClient(c, "late")
    cleanup.append(late)
    late.subscribe(room, since=0)
    late.received.wait_until(lambda items: any(m.get("offset") == final for m in items), timeout=30, what="the replay")
    assert offsets_and_bodies(late, room) == (offsets, bodies)
    # The member lists came back too.
    members = sorted(r.client_id for r in readers) + [late.client_id]
    for node in nodes:
        eventually("%s lists the readers" % node.name, lambda n=node: sorted(n.members(room)) == sorted(members))


def test_redis_pause_longer_than_the_lease(cleanup):
    redis = RedisProcess()
    cleanup.append(redis)
    nodes = nodes_on(redis, cleanup)
    a, b, c = nodes
    room = "observable-pause"
    stayers = [NativeClient(node, "stay-" + node.name) for node in nodes]
    leaver = NativeClient(b, "leaver")
    lines = [LineClient(node.line, "line-" + node.name) for node in nodes]
    sio = SocketChatClient(c, "sio-c")
    cleanup.extend(stayers + [leaver] + lines + [sio])
    for client in stayers + [leaver]:
        client.subscribe(room)
    room_ids = [s.client_id for s in stayers] + [leaver.client_id]
    for node in nodes:
        eventually("%s lists everyone" % node.name, lambda n=node: sorted(n.members(room)) == sorted(room_ids)
                   and len(n.members(LOBBY)) == 4)
    for stayer in stayers:
        eventually("%s sees everyone" % stayer.name, lambda s=stayer: sorted(s.member_view(room)) == sorted(room_ids))
    seen_before = {id(client): len(client.received.snapshot()) for client in stayers + lines + [sio]}

    # Redis stops answering for twice the lease; the leaver goes meanwhile.
    redis.pause()
    try:
        paused = time.monotonic()
        time.sleep(1)
        leaver.close()
        for node in nodes:
            eventually("%s sees Redis gone" % node.name, lambda n=node: n.metric("parley_redis_up") == 0, timeout=2 * LEASE)
        time.sleep(max(0, paused + 2 * LEASE - time.monotonic()))
    finally:
        redis.resume()
    for node in nodes:
        eventually("%s back on Redis" % node.name, node.redis_up, timeout=20)
    recovered = time.monotonic()

    # The leaver leaves once everywhere; then the lists settle on the stayers.
    for stayer in stayers:
        stayer.received.wait_until(lambda items, s=stayer: leaver.client_id in {i for i, _ in s.member_events(room, "leave")},
                                   timeout=LEAVE_DEADLINE + 5, what="the leaver's leave")
    stayer_ids = [s.client_id for s in stayers]
    for node in nodes:
        eventually("%s lists the stayers" % node.name, lambda n=node: sorted(n.members(room)) == sorted(stayer_ids))
    # A storm would come from the reapers, which run once a node has renewed its lease for a
    # whole lease again: watch for one lease and a half beyond that.
    time.sleep(max(0, recovered + 2.5 * LEASE - time.monotonic()))
    for stayer in stayers:
        after = stayer.received.snapshot()[seen_before[id(stayer)]:]
        joins = [m for m in after if m.get("type") == "observable_member_join"]
        leaves = [m["data"]["id"] for m in after if m.get("type") == "observable_member_leave"]
        assert joins == [], "%s saw members join again: %r" % (stayer.name, joins)
        assert leaves == [leaver.client_id], "%s: leaves %r (only the leaver, once)" % (stayer.name, leaves)
        assert sorted(stayer.member_view(room)) == sorted(stayer_ids)
    for line in lines:
        after = line.received.snapshot()[seen_before[id(line)]:]
        assert [l for l in after if l.endswith(" has joined") or l.endswith(" has left")] == [], (line.name, after)
    after = sio.received.snapshot()[seen_before[id(sio)]:]
    assert [e for e in after if e[0] in ("userExitUpdate", "userConnectUpdate")] == [], after
    for node in nodes:
        assert sorted(node.members(room)) == sorted(stayer_ids)
        assert len(node.members(LOBBY)) == 4
        assert node.metric("parley_cluster_presence_reassertions_total") >= 1
    # And the room works: a message from a reaches b and c.
    stayers[0].publish(room, "after the pause")
    for stayer in stayers[1:]:
        stayer.wait_for(lambda m: m.get("message") == "after the pause")


def test_two_publishers_on_two_nodes_10000_each_one_order_everywhere(cleanup):
    redis = RedisProcess()
    cleanup.append(redis)
    # Room for the whole run in each reader's write queue, whatever the test machine's pace.
    nodes = nodes_on(redis, cleanup, extra=["--write-queue-limit", "268435456"])
    a, b, c = nodes
    room = "ordering"
    count = 10_000
    readers = [NativeClient(node, "reader-" + node.name) for node in nodes]
    writers = [NativeClient(a, "writer-a"), NativeClient(b, "writer-b")]
    cleanup.extend(readers + writers)
    for reader in readers:
        reader.subscribe(room)
    publishers = [Publisher(writer, room, writer.name, window=200, count=count) for writer in writers]
    for publisher in publishers:
        publisher.wait_done(timeout=180)
    assert all(len(p.acked) == count for p in publishers)
    for reader in readers:
        reader.received.wait_until(lambda items: sum(1 for m in items if m.get("type") == "publish") >= 2 * count,
                                   timeout=120, what="20,000 messages on " + reader.name)
    offsets, bodies = offsets_and_bodies(readers[0], room)
    assert len(offsets) == 2 * count
    assert contiguous(offsets) is None, contiguous(offsets)
    for reader in readers[1:]:
        assert offsets_and_bodies(reader, room) == (offsets, bodies), "one identical order on every node"
    for publisher in publishers:
        own = [body for body in bodies if body.startswith(publisher.tag + "-")]
        assert own == [publisher.body(n) for n in range(count)], "each publisher's messages in its order"
    # Receipts carry the offsets the messages were delivered at.
    check_acknowledged_kept(publishers, offsets, bodies)
