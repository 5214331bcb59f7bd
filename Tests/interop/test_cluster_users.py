"""Users across two cluster nodes with a real third-party client (`websockets`, the native
door), on one real `redis-server`: two users with two devices each, one device of each on
each node. Read receipts and unread counts follow a user's mark from any device; a device
that drops and comes back on the other node gets its count after the reconnect; a direct
room reaches the other user's live inbox on the other node, a third user can read none of
it, and the inbox lists conversations newest first.

Run: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_cluster_users.py
"""
import uuid

import pytest

from cluster_support import NativeClient, close_all, two_nodes_on_redis


@pytest.fixture
def two_nodes():
    with two_nodes_on_redis("usr") as nodes:
        yield nodes


def device(node, user, name):
    """A connection of `user` (a handshake `user_id`, as an open channel takes it)."""
    client = NativeClient(node, name, handshake=False)
    reply = client.request({"type": "handshake", "channel": "demo", "user_id": user, "client_data": {"name": name}})
    assert "error" not in reply and reply.get("user_id") == user, reply
    client.client_id = reply["client_id"]
    return client


def subscribe(client, room, **extra):
    reply = client.request(dict({"type": "subscribe", "room": room, "receipts": True, "unread": True}, **extra))
    assert "error" not in reply, reply
    return reply


def publish(client, room, text):
    reply = client.request({"type": "publish", "room": room, "message": text})
    assert "offset" in reply, reply
    return reply["offset"]


def unread(client, room, **want):
    """The first `unread` event of `room` with every field in `want`, waited for."""
    return client.wait_for(lambda m: m.get("type") == "unread" and m.get("room") == room
                           and all(m.get(k) == v for k, v in want.items()),
                           what="unread %r in %s" % (want, room))


def test_two_users_with_two_devices_each_across_two_nodes(two_nodes):
    a, b = two_nodes
    room = "team-" + uuid.uuid4().hex[:6]
    clients = []
    try:
        alice_phone, alice_laptop = device(a, "alice", "Alice"), device(b, "alice", "Alice")
        bob_phone, bob_laptop = device(b, "bob", "Bob"), device(a, "bob", "Bob")
        clients += [alice_phone, alice_laptop, bob_phone, bob_laptop]
        for client in clients:
            subscribe(client, room)
            unread(client, room, unread=0)
        watching = alice_laptop.request({"type": "inbox", "watch": True})
        assert [c["room"] for c in watching["conversations"]] == [room], watching

        first = publish(bob_phone, room, "morning")
        publish(bob_phone, room, "@alice can you look at this?")
        for client in (alice_phone, alice_laptop):
            unread(client, room, unread=2, mentions=1)
        for client in (bob_phone, bob_laptop):
            assert not [m for m in client.received.snapshot() if m.get("type") == "unread" and m.get("unread")], \
                "a user's own messages are never unread"

        # Alice's laptop (node b) reads the first: her phone (node a) follows, and both of
        # Bob's devices see the receipt, whichever node they are on.
        mark = alice_laptop.request({"type": "read", "room": room, "offset": first})
        assert mark["offset"] == first, mark
        unread(alice_phone, room, read_offset=first, unread=1, mentions=1)
        for client in (bob_phone, bob_laptop):
            client.wait_for(lambda m: m.get("type") == "read" and m.get("user") == "alice" and m.get("offset") == first,
                            what="alice's receipt")

        # Alice's phone drops; Bob writes; the phone comes back on the *other* node and its
        # subscribe says what is unread now.
        alice_phone.ws.close()
        last = publish(bob_laptop, room, "still there?")
        alice_back = device(b, "alice", "Alice")
        clients.append(alice_back)
        subscribe(alice_back, room, since=last - 1)
        # (Each wait reads on from the last one: the receipts list comes before the count.)
        receipts = alice_back.wait_for(lambda m: m.get("type") == "receipts" and m.get("room") == room, what="receipts")
        assert receipts["readers"] == [{"user": "alice", "name": "Alice", "offset": first}], receipts
        unread(alice_back, room, read_offset=first, unread=2, mentions=1)

        # Bob (node b) opens a direct room: Alice's live inbox on node b hears of it, and of
        # his message in it.
        opened = bob_phone.request({"type": "dm", "users": ["alice"]})
        direct = opened["room"]
        assert direct == "dm+alice+bob", opened
        alice_laptop.wait_for(lambda m: m.get("type") == "conversation" and m["conversation"]["room"] == direct,
                              what="the direct room in alice's inbox")
        subscribe(bob_phone, direct)
        publish(bob_phone, direct, "just between us")
        update = alice_laptop.wait_for(lambda m: m.get("type") == "conversation" and m["conversation"]["room"] == direct
                                       and m["conversation"]["unread"] == 1, what="the direct message counted")
        assert update["conversation"]["last"]["message"] == "just between us"
        assert update["conversation"]["last"]["name"] == "Bob"

        # Carol, on either node, reads none of it.
        for node in (a, b):
            carol = device(node, "carol", "Carol")
            clients.append(carol)
            for command in ({"type": "subscribe", "room": direct}, {"type": "history", "room": direct},
                            {"type": "publish", "room": direct, "message": "let me in"}):
                refused = carol.request(command)
                assert "direct room" in refused.get("error", ""), refused
        assert "let me in" not in bob_phone.chat(direct)

        # The inbox, on any device and node: newest activity first, with the counts.
        for client in (alice_back, alice_laptop):
            inbox = client.request({"type": "inbox"})
            assert [c["room"] for c in inbox["conversations"]] == [direct, room], inbox
            assert inbox["conversations"][0]["unread"] == 1 and inbox["conversations"][0]["users"] == ["alice", "bob"]
            assert inbox["conversations"][1]["unread"] == 2 and inbox["conversations"][1]["read_offset"] == first
    finally:
        close_all(clients)
