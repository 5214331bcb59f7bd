"""APNs with a local peer: an HTTP/2 server over TLS on 127.0.0.1 (the `h2` library, no
HTTP/1.1 at all) plays Apple's provider API. It checks the provider token (an ES256 JWT with
the key id and team id, verified against the .p8 key's public key), the headers APNs requires
and the payload, and answers 410 Unregistered for one device. Parley sends one coalesced push
with the badge to the offline user, and removes the unregistered device.

Run: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_push_apns.py
"""
import base64
import datetime
import ipaddress
import json
import os
import socket
import ssl
import tempfile
import threading
import time

import h2.config
import h2.connection
import h2.events
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.x509.oid import NameOID

from cluster_support import close_all, eventually
from parley_process import ParleyProcess
from test_push import device, metric

KEY_ID, TEAM_ID, TOPIC = "ABC123DEFG", "TEAM123456", "com.example.chat"


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def self_signed(directory):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


class FakeAPNs:
    """Apple's provider API on 127.0.0.1 over HTTP/2 + TLS. Every request is checked and kept;
    a device token starting with `dead` is answered 410 Unregistered."""

    def __init__(self, public_key):
        self.public_key = public_key
        self.directory = tempfile.mkdtemp(prefix="parley-apns-")
        self.cert, key = self_signed(self.directory)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(self.cert, key)
        self.context.set_alpn_protocols(["h2"])
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.requests, self.problems = [], []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw):
        try:
            conn = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as error:
            self.problems.append("TLS: %r" % error)
            return
        if conn.selected_alpn_protocol() != "h2":
            self.problems.append("not HTTP/2: ALPN %r" % conn.selected_alpn_protocol())
            conn.close()
            return
        h2c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
        h2c.initiate_connection()
        conn.sendall(h2c.data_to_send())
        streams = {}
        try:
            while True:
                data = conn.recv(65535)
                if not data:
                    return
                for event in h2c.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        streams[event.stream_id] = {"headers": {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                                                                for k, v in event.headers}, "body": b""}
                    elif isinstance(event, h2.events.DataReceived):
                        streams[event.stream_id]["body"] += event.data
                        h2c.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        self._answer(h2c, event.stream_id, streams.pop(event.stream_id))
                conn.sendall(h2c.data_to_send())
        except (OSError, ssl.SSLError):
            return

    def _answer(self, h2c, stream, request):
        headers, token = request["headers"], request["headers"].get(":path", "").rsplit("/", 1)[-1]
        try:
            self._check(headers, request["body"])
        except AssertionError as error:
            self.problems.append(str(error))
            body = json.dumps({"reason": "BadRequest: %s" % error}).encode()
            h2c.send_headers(stream, [(":status", "400"), ("content-length", str(len(body)))])
            h2c.send_data(stream, body, end_stream=True)
            return
        with self.lock:
            self.requests.append((token, headers, json.loads(request["body"])))
        if token.startswith("dead"):
            body = json.dumps({"reason": "Unregistered", "timestamp": int(time.time() * 1000)}).encode()
            h2c.send_headers(stream, [(":status", "410"), ("content-length", str(len(body)))])
            h2c.send_data(stream, body, end_stream=True)
        else:
            h2c.send_headers(stream, [(":status", "200"), ("apns-id", "00000000-0000-0000-0000-000000000001")], end_stream=True)

    def _check(self, headers, body):
        assert headers[":method"] == "POST" and headers[":path"].startswith("/3/device/"), headers
        assert headers.get("apns-topic") == TOPIC and headers.get("apns-push-type") == "alert", headers
        assert headers.get("apns-priority") == "10" and int(headers["apns-expiration"]) > time.time(), headers
        assert 0 < len(headers.get("apns-collapse-id", "")) <= 64, headers
        scheme, _, jwt = headers["authorization"].partition(" ")
        assert scheme == "bearer", headers["authorization"]
        head, claims, signature = jwt.split(".")
        assert json.loads(b64d(head)) == {"alg": "ES256", "kid": KEY_ID}
        claims = json.loads(b64d(claims))
        assert claims["iss"] == TEAM_ID and abs(claims["iat"] - time.time()) < 3600, claims
        raw = b64d(signature)
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        self.public_key.verify(der, (head + "." + jwt.split(".")[1]).encode(), ec.ECDSA(hashes.SHA256()))
        json.loads(body)

    def for_token(self, token):
        with self.lock:
            return [r for r in self.requests if r[0] == token]

    def stop(self):
        self.listener.close()


def test_apns_pushes_over_http2_with_a_provider_token():
    key = ec.generate_private_key(ec.SECP256R1())
    directory = tempfile.mkdtemp(prefix="parley-apns-key-")
    p8 = os.path.join(directory, "AuthKey_%s.p8" % KEY_ID)
    with open(p8, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    apns = FakeAPNs(key.public_key())
    config = os.path.join(directory, "parley.json")
    with open(config, "w") as f:
        json.dump({"push": {"coalesce_ms": 400}}, f)
    endpoint = "https://127.0.0.1:%d" % apns.port
    server = ParleyProcess(extra_args=["--config", config, "--apns-key-file", p8, "--apns-key-id", KEY_ID, "--apns-team-id", TEAM_ID,
                                       "--apns-endpoint", endpoint, "--apns-sandbox-endpoint", endpoint, "--push-ca", apns.cert], loops=1)
    clients = []
    try:
        phone, dead = "a1b2" * 16, "dead" * 16

        def register(user, token):
            client = device(server, user)
            reply = client.request({"type": "register_device", "platform": "apns", "token": token, "topic": TOPIC, "environment": "sandbox"})
            assert "error" not in reply, reply
            client.close()

        register("bob", phone)
        register("erin", dead)
        alice = device(server, "alice")
        clients.append(alice)
        time.sleep(0.3)
        first = alice.request({"type": "publish", "room": "team", "message": "standup in 5"})["offset"]
        last = alice.request({"type": "publish", "room": "team", "message": "@bob you're up"})["offset"]
        assert last == first + 1
        eventually("bob's push", lambda: apns.for_token(phone))
        time.sleep(0.8)
        assert apns.problems == [], apns.problems
        pushes = apns.for_token(phone)
        assert len(pushes) == 1, "one coalesced push: %r" % pushes
        _, headers, payload = pushes[0]
        aps = payload["aps"]
        assert aps["alert"] == {"title": "#team", "body": "2 new messages · Alice: @bob you're up"}, aps
        assert aps["badge"] == 2 and aps["thread-id"] == "team" and aps["mutable-content"] == 1
        assert payload["room"] == "team" and payload["offset"] == last and payload["channel"] == "demo"
        # The unregistered device was told once and is gone.
        assert len(apns.for_token(dead)) == 1
        eventually("the device removed", lambda: metric(server, "parley_push_total", provider="apns", outcome="removed") == 1)
        alice.request({"type": "publish", "room": "team", "message": "again"})
        eventually("bob's second push", lambda: len(apns.for_token(phone)) == 2)
        time.sleep(0.5)
        assert len(apns.for_token(dead)) == 1
        assert metric(server, "parley_push_total", provider="apns", outcome="sent") == 2
        # Devices are checked: a token that is not hex, or no topic, is refused.
        carol = device(server, "carol", room=None)
        clients.append(carol)
        assert "error" in carol.request({"type": "register_device", "platform": "apns", "token": "not-hex", "topic": TOPIC})
        assert "error" in carol.request({"type": "register_device", "platform": "apns", "token": phone})
    finally:
        close_all(clients)
        server.kill()
        apns.stop()
