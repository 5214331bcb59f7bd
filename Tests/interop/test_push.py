"""Push notifications for users who are away, with an independent Web Push implementation
as the peer: a local push service on 127.0.0.1 decrypts every payload with the
subscription's private key (`http-ece`, RFC 8291) and checks the VAPID signature against the
server's public key (`cryptography`, RFC 8292).

Offline users get exactly one coalesced push with the right badge; online users get none;
muted users get none (but a mention reaches them); a 410 removes the device; a restart in
the middle loses no due push.

Run: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_push.py
"""
import base64
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from cluster_support import NativeClient, close_all, eventually
from parley_process import ParleyProcess, binary


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class PushService:
    """A push service on 127.0.0.1: every POST to /push/NAME is kept; NAME starting with
    `gone-` is answered 410 (the subscription expired), anything else 201."""

    def __init__(self):
        self.received = []
        self.lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with service.lock:
                    service.received.append((self.path, dict(self.headers), body))
                self.send_response(410 if self.path.startswith("/push/gone-") else 201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def requests(self, name):
        with self.lock:
            return [r for r in self.received if r[0] == "/push/" + name]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Subscription:
    """A browser's push subscription: its own P-256 key pair and auth secret."""

    def __init__(self, service, name):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        self.endpoint = "http://127.0.0.1:%d/push/%s" % (service.port, name)
        public = self.key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        self.json = {"endpoint": self.endpoint, "keys": {"p256dh": b64e(public), "auth": b64e(self.auth)}}

    def open(self, request):
        """The push's JSON, decrypted by http-ece; its VAPID header checked."""
        path, headers, body = request
        assert headers["Content-Encoding"] == "aes128gcm", headers
        return json.loads(http_ece.decrypt(body, private_key=self.key, auth_secret=self.auth, version="aes128gcm"))


def check_vapid(headers, public_key, port):
    """The `Authorization: vapid t=JWT, k=KEY` header: KEY is the server's, the JWT is signed
    by it (ES256) for this push service's origin, and not expired."""
    scheme, _, rest = headers["Authorization"].partition(" ")
    assert scheme == "vapid", headers["Authorization"]
    fields = dict(part.strip().split("=", 1) for part in rest.split(","))
    assert fields["k"] == public_key
    header, claims, signature = fields["t"].split(".")
    assert json.loads(b64d(header)) == {"typ": "JWT", "alg": "ES256"}
    claims = json.loads(b64d(claims))
    assert claims["aud"] == "http://127.0.0.1:%d" % port and claims["exp"] > time.time() and claims["sub"].startswith("mailto:")
    raw = b64d(signature)
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64d(fields["k"]))
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        key.verify(der, (header + "." + fields["t"].split(".")[1]).encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise AssertionError("the VAPID signature does not verify")


@pytest.fixture
def push_service():
    service = PushService()
    yield service
    service.stop()


def vapid_keys():
    """A key pair from `parley vapid-keys`."""
    out = subprocess.run([binary(), "vapid-keys"], capture_output=True, text=True, timeout=10, check=True).stdout
    keys = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("PARLEY_VAPID_"))
    return keys["PARLEY_VAPID_PUBLIC_KEY"], keys["PARLEY_VAPID_PRIVATE_KEY"]


ADMIN_TOKEN = "push-admin-token-0123456789abcdef"


def admin_overview(server):
    request = urllib.request.Request("http://127.0.0.1:%d/admin/api/overview" % server.ports["http"],
                                     headers={"Authorization": "Bearer " + ADMIN_TOKEN})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def start(service, keys, coalesce_ms, data_dir=None):
    config = os.path.join(tempfile.mkdtemp(prefix="parley-push-config-"), "parley.json")
    with open(config, "w") as f:
        json.dump({"push": {"coalesce_ms": coalesce_ms}, "admin": {"token": ADMIN_TOKEN}}, f)
    return ParleyProcess(extra_args=["--config", config, "--vapid-public-key", keys[0], "--vapid-private-key", keys[1],
                                     "--webpush-endpoints", "http://127.0.0.1:%d/" % service.port], loops=1, data_dir=data_dir)


def device(server, user, subscription=None, room="team"):
    """A connection of `user` that registered `subscription` and joined `room`."""
    client = NativeClient("ws://127.0.0.1:%d/v3/websocket" % server.ports["http"], user, handshake=False)
    reply = client.request({"type": "handshake", "channel": "demo", "user_id": user, "client_data": {"name": user.capitalize()}})
    assert reply.get("user_id") == user, reply
    client.handshake_reply = reply
    if subscription:
        answer = client.request({"type": "register_device", "platform": "webpush", "subscription": subscription.json})
        assert "error" not in answer, answer
    if room:
        assert "error" not in client.request({"type": "subscribe", "room": room})
    return client


def metric(server, name, **labels):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % server.ports["http"], timeout=5) as response:
        text = response.read().decode()
    want = name + ("{" + ",".join('%s="%s"' % kv for kv in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return None


def test_offline_online_muted_and_gone_devices(push_service):
    keys = vapid_keys()
    server = start(push_service, keys, coalesce_ms=400)
    clients = []
    try:
        subs = {name: Subscription(push_service, name) for name in ["bob", "carol", "dave", "gone-erin"]}
        bob = device(server, "bob", subs["bob"])
        assert bob.handshake_reply.get("vapid_public_key") == keys[0], "browsers subscribe with it"
        carol = device(server, "carol", subs["carol"])  # stays online
        dave = device(server, "dave", subs["dave"])
        assert "error" not in dave.request({"type": "mute", "room": "team", "until": int(time.time()) + 3600})
        erin = device(server, "erin", subs["gone-erin"])
        alice = device(server, "alice")
        clients += [carol, alice]
        for away in (bob, dave, erin):
            away.close()
        time.sleep(0.3)  # their leaves are in presence

        offsets = [alice.request({"type": "publish", "room": "team", "message": text})["offset"]
                   for text in ["one", "two", "three: the last"]]
        # Bob: exactly one push for the burst, saying so, with his badge and where it leads.
        eventually("bob's push", lambda: push_service.requests("bob"))
        time.sleep(1.0)  # nothing more comes for the same burst
        assert len(push_service.requests("bob")) == 1
        request = push_service.requests("bob")[0]
        check_vapid(request[1], keys[0], push_service.port)
        push = subs["bob"].open(request)
        assert push["title"] == "#team" and push["body"] == "3 new messages · Alice: three: the last", push
        assert push["badge"] == 3 and push["tag"] == "team"
        assert push["data"] == {"channel": "demo", "room": "team", "offset": offsets[-1], "id": push["data"]["id"]}
        assert request[1]["TTL"] == "86400" and len(request[1]["Topic"]) <= 32 and request[1]["Urgency"] == "normal"
        # Carol is online, Dave muted the room: nothing for them. Erin's service said 410.
        assert push_service.requests("carol") == [] and push_service.requests("dave") == []
        assert len(push_service.requests("gone-erin")) == 1
        eventually("the gone device counted", lambda: metric(server, "parley_push_total", provider="webpush", outcome="removed") == 1)
        assert metric(server, "parley_push_total", provider="webpush", outcome="sent") == 1
        # The admin overview shows the queue and what each provider did.
        push = admin_overview(server)["push"]
        assert push["providers"] == ["webpush"] and push["max_queued"] == 100000, push
        assert push["by_provider"]["webpush"] == {"sent": 1, "failed": 0, "removed": 1}, push
        assert push["enqueued"] == 6 and push["dropped"] == 0, push  # 3 messages for bob and erin, coalesced into 2 pushes

        # A mention reaches Dave through his mute; Erin's device is gone, so nothing for her.
        alice.request({"type": "publish", "room": "team", "message": "@dave can you check?"})
        eventually("dave's push", lambda: push_service.requests("dave"))
        assert subs["dave"].open(push_service.requests("dave")[0])["body"] == "Alice: @dave can you check?"
        eventually("bob's second push", lambda: len(push_service.requests("bob")) == 2)
        assert subs["bob"].open(push_service.requests("bob")[1])["badge"] == 4
        time.sleep(0.6)
        assert len(push_service.requests("gone-erin")) == 1 and push_service.requests("carol") == []

        # Bob reads the room on another device: the next message is pushed only once more,
        # and a message he has read by the time it is due is not pushed at all.
        phone = device(server, "bob", room=None)
        clients.append(phone)
        last = alice.request({"type": "publish", "room": "team", "message": "read me"})["offset"]
        assert phone.request({"type": "read", "room": "team", "offset": last})["offset"] == last
        time.sleep(1.0)
        assert len(push_service.requests("bob")) == 2, "read before it was due: no push"
    finally:
        close_all(clients)
        server.kill()


def test_a_restart_loses_no_due_push(push_service):
    keys = vapid_keys()
    server = start(push_service, keys, coalesce_ms=2500)
    clients = []
    try:
        sub = Subscription(push_service, "bob")
        device(server, "bob", sub).close()
        alice = device(server, "alice")
        clients.append(alice)
        time.sleep(0.3)
        alice.request({"type": "publish", "room": "team", "message": "before the crash"})
        time.sleep(0.5)  # planned and queued (durably), not yet due
        assert push_service.requests("bob") == []
        data = server.data_dir
        server.kill()  # SIGKILL
        close_all(clients)
        clients = []
        server = start(push_service, keys, coalesce_ms=2500, data_dir=data)
        eventually("the push after the restart", lambda: push_service.requests("bob"), timeout=10)
        assert sub.open(push_service.requests("bob")[0])["body"] == "Alice: before the crash"
    finally:
        close_all(clients)
        server.kill()


def start_two_nodes(push_service, push_settings):
    """Nodes a and b of a cluster on a fresh Redis, Web Push pointed at `push_service`, with
    the config file's `push` object `push_settings`. Returns (redis, nodes)."""
    from cluster_support import RedisProcess, start_nodes
    import uuid

    keys = vapid_keys()
    config = os.path.join(tempfile.mkdtemp(prefix="parley-push-config-"), "parley.json")
    with open(config, "w") as f:
        json.dump({"push": push_settings}, f)
    redis = RedisProcess()
    try:
        nodes = start_nodes(["a", "b"], redis=redis, prefix="push-" + uuid.uuid4().hex[:8],
                            extra=["--config", config, "--vapid-public-key", keys[0], "--vapid-private-key", keys[1],
                                   "--webpush-endpoints", "http://127.0.0.1:%d/" % push_service.port])
    except BaseException:
        redis.stop()
        raise
    return redis, nodes


def test_two_nodes_send_one_push(push_service):
    """Two cluster nodes on one Redis share devices and the queue: messages published through
    both nodes for an away user become one coalesced push, sent by one node."""
    redis, nodes = start_two_nodes(push_service, {"coalesce_ms": 1000})
    clients = []
    try:
        a, b = nodes
        sub = Subscription(push_service, "bob")
        device(a.process, "bob", sub).close()
        on_a, on_b = device(a.process, "alice"), device(b.process, "alice")
        clients += [on_a, on_b]
        time.sleep(0.5)
        for i in range(3):
            on_b.request({"type": "publish", "room": "team", "message": "from b %d" % i})
            on_a.request({"type": "publish", "room": "team", "message": "from a %d" % i})
        eventually("bob's push", lambda: push_service.requests("bob"), timeout=10)
        time.sleep(1.5)
        pushes = push_service.requests("bob")
        assert len(pushes) == 1, "one push for the burst, from one node: %d" % len(pushes)
        push = sub.open(pushes[0])
        assert push["body"] == "6 new messages · Alice: from a 2" and push["badge"] == 6, push
        sent = [metric(n.process, "parley_push_total", provider="webpush", outcome="sent") for n in nodes]
        assert sorted(sent) == [0, 1], sent
    finally:
        close_all(clients)
        for node in nodes:
            node.stop()
        redis.stop()


def test_a_users_push_rate_holds_over_the_whole_cluster(push_service):
    """`push.max_per_user_per_minute` is one budget for the whole cluster (Redis), not one per
    node: bob, away from twelve rooms written to through two nodes, gets at most the budget's
    pushes in the minute, whichever node sends them."""
    redis, nodes = start_two_nodes(push_service, {"coalesce_ms": 200, "max_per_user_per_minute": 2})
    clients = []
    try:
        a, b = nodes
        rooms = ["r%d" % n for n in range(12)]
        sub = Subscription(push_service, "bob")
        bob = device(a.process, "bob", sub, room=None)
        for room in rooms:
            assert "error" not in bob.request({"type": "subscribe", "room": room})
        bob.close()
        on_a, on_b = device(a.process, "alice", room=None), device(b.process, "alice", room=None)
        clients += [on_a, on_b]
        time.sleep(0.5)
        # Due one after another, so the jobs are taken by both nodes' workers (each looks every
        # 200 ms): with a budget per node, each would send its own two.
        for n, room in enumerate(rooms):
            (on_a if n % 2 == 0 else on_b).request({"type": "publish", "room": room, "message": "to %s" % room})
            time.sleep(0.3)
        eventually("bob's first pushes", lambda: len(push_service.requests("bob")) >= 2, timeout=10)
        time.sleep(2)
        pushes = push_service.requests("bob")
        assert len(pushes) == 2, "at most 2 a minute for bob over both nodes: %d" % len(pushes)
        sent = [metric(n.process, "parley_push_total", provider="webpush", outcome="sent") or 0 for n in nodes]
        assert sum(sent) == 2, sent
    finally:
        close_all(clients)
        for node in nodes:
            node.stop()
        redis.stop()


def test_edits_and_deletes_before_delivery_change_or_withdraw_the_push(push_service):
    keys = vapid_keys()
    server = start(push_service, keys, coalesce_ms=700)
    clients = []
    try:
        sub = Subscription(push_service, "bob-edits")
        bob = device(server, "bob", sub)
        alice = device(server, "alice")
        clients.append(alice)
        bob.close()
        time.sleep(0.3)

        def publish(text):
            reply = alice.request({"type": "publish", "room": "team", "message": text})
            assert "error" not in reply, reply
            return reply["id"]

        # Edited before it was due: the push shows the new text.
        typo = publish("standup at 10")
        assert "error" not in alice.request({"type": "edit", "room": "team", "target": typo, "message": "standup at 11"})
        eventually("the push of the edited message", lambda: push_service.requests("bob-edits"))
        push = sub.open(push_service.requests("bob-edits")[0])
        assert push["body"] == "Alice: standup at 11", push
        # Deleted before it was due: no push at all.
        oops = publish("wrong room, sorry")
        assert "error" not in alice.request({"type": "delete", "room": "team", "target": oops})
        time.sleep(1.6)
        assert len(push_service.requests("bob-edits")) == 1, "a deleted message is not pushed"
        # One of two deleted: the push tells of the one left.
        publish("lunch?")
        drop = publish("ignore that")
        assert "error" not in alice.request({"type": "delete", "room": "team", "target": drop})
        eventually("the push of what is left", lambda: len(push_service.requests("bob-edits")) == 2)
        push = sub.open(push_service.requests("bob-edits")[1])
        assert push["body"] == "Alice: lunch?", push
    finally:
        close_all(clients)
        server.kill()
