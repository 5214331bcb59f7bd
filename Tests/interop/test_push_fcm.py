"""FCM HTTP v1 with local peers: one HTTPS server on 127.0.0.1 plays both Google's OAuth2
token endpoint and FCM's send endpoint. The token endpoint checks the service account's
RS256 assertion (signature against the key's public half, issuer, scope, audience, lifetime)
and hands out an access token; the send endpoint checks that token and the v1 message. A
token starting with `dead` is answered 404 UNREGISTERED; one starting with `busy` is answered
429 with Retry-After once, then accepted.

Offline users get one coalesced push with the badge; the unregistered device is removed; a
429 is retried after its Retry-After; the access token is exchanged once and reused.

Run: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_push_fcm.py
"""
import base64
import json
import os
import ssl
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from cluster_support import close_all, eventually
from parley_process import ParleyProcess
from test_push import device, metric
from test_push_apns import self_signed

PROJECT, EMAIL, KEY_ID = "chat-app-1", "push@chat-app-1.iam.gserviceaccount.com", "0123456789abcdef"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class FakeGoogle:
    """The token endpoint (POST /token) and FCM (POST /v1/projects/P/messages:send) over TLS."""

    def __init__(self, public_key):
        self.public_key = public_key
        self.directory = tempfile.mkdtemp(prefix="parley-fcm-")
        self.cert, key = self_signed(self.directory)
        self.lock = threading.Lock()
        self.tokens_issued, self.sends, self.problems = [], [], []
        self.busy_answered = set()
        google = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    status, answer, headers = google.answer(self.path, dict(self.headers), body)
                except AssertionError as error:
                    google.problems.append(str(error))
                    status, answer, headers = 400, {"error": {"code": 400, "message": str(error), "status": "INVALID_ARGUMENT"}}, {}
                data = json.dumps(answer).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.base = "https://127.0.0.1:%d" % self.port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path, headers, body):
        if path == "/token":
            return self.exchange(headers, body)
        assert path == "/v1/projects/%s/messages:send" % PROJECT, path
        with self.lock:
            issued = list(self.tokens_issued)
        if headers.get("Authorization", "").removeprefix("Bearer ") not in issued:
            return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}}, {}
        assert headers.get("Content-Type") == "application/json", headers
        message = json.loads(body)["message"]
        token = message["token"]
        with self.lock:
            self.sends.append(message)
        if token.startswith("dead"):
            return 404, {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND",
                                   "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}]}}, {}
        if token.startswith("busy") and token not in self.busy_answered:
            self.busy_answered.add(token)
            return 429, {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED",
                                   "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "QUOTA_EXCEEDED"}]}}, {"Retry-After": "1"}
        return 200, {"name": "projects/%s/messages/%d" % (PROJECT, len(self.sends))}, {}

    def exchange(self, headers, body):
        assert headers.get("Content-Type") == "application/x-www-form-urlencoded", headers
        form = urllib.parse.parse_qs(body.decode(), strict_parsing=True)
        assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"], form
        jwt = form["assertion"][0]
        head, claims, signature = jwt.split(".")
        assert json.loads(b64d(head)) == {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        self.public_key.verify(b64d(signature), (head + "." + claims).encode(), padding.PKCS1v15(), hashes.SHA256())
        claims = json.loads(b64d(claims))
        assert claims["iss"] == EMAIL and claims["scope"] == SCOPE and claims["aud"] == self.base + "/token", claims
        assert abs(claims["iat"] - time.time()) < 60 and claims["exp"] - claims["iat"] <= 3600, claims
        token = "ya29.test-%d" % len(self.tokens_issued)
        with self.lock:
            self.tokens_issued.append(token)
        return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}, {}

    def sends_to(self, token):
        with self.lock:
            return [m for m in self.sends if m["token"] == token]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_fcm_pushes_with_a_service_account_token():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    google = FakeGoogle(key.public_key())
    directory = tempfile.mkdtemp(prefix="parley-fcm-key-")
    account = os.path.join(directory, "service-account.json")
    with open(account, "w") as f:
        json.dump({"type": "service_account", "project_id": PROJECT, "private_key_id": KEY_ID, "client_email": EMAIL,
                   "private_key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()).decode(),
                   "token_uri": "https://oauth2.googleapis.com/token"}, f)
    config = os.path.join(directory, "parley.json")
    with open(config, "w") as f:
        json.dump({"push": {"coalesce_ms": 400}}, f)
    server = ParleyProcess(extra_args=["--config", config, "--fcm-service-account", account, "--fcm-endpoint", google.base,
                                       "--fcm-token-endpoint", google.base + "/token", "--push-ca", google.cert], loops=1)
    clients = []
    try:
        phone, dead, busy = "bobPhone:APA91b" + "x" * 40, "dead:APA91b" + "y" * 40, "busy:APA91b" + "z" * 40

        def register(user, token):
            client = device(server, user)
            reply = client.request({"type": "register_device", "platform": "fcm", "token": token})
            assert "error" not in reply, reply
            client.close()

        register("bob", phone)
        register("erin", dead)
        # REST registers an FCM device too.
        request = urllib.request.Request("http://127.0.0.1:%d/demo/users/frank/devices" % server.ports["http"],
                                         data=json.dumps({"platform": "fcm", "token": busy}).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
        frank = device(server, "frank")
        frank.close()
        alice = device(server, "alice")
        clients.append(alice)
        time.sleep(0.3)
        alice.request({"type": "publish", "room": "team", "message": "standup in 5"})
        last = alice.request({"type": "publish", "room": "team", "message": "@bob you're up"})["offset"]
        eventually("bob's push", lambda: google.sends_to(phone))
        time.sleep(0.8)
        assert google.problems == [], google.problems
        pushes = google.sends_to(phone)
        assert len(pushes) == 1, "one coalesced push: %r" % pushes
        message = pushes[0]
        assert message["notification"] == {"title": "#team", "body": "2 new messages · Alice: @bob you're up"}, message
        assert message["data"]["room"] == "team" and message["data"]["offset"] == str(last) and message["data"]["channel"] == "demo"
        assert message["android"]["notification"]["notification_count"] == 2 and message["apns"]["payload"]["aps"]["badge"] == 2
        assert message["android"]["collapse_key"] == message["apns"]["headers"]["apns-collapse-id"]
        # UNREGISTERED: told once, then gone.
        assert len(google.sends_to(dead)) == 1
        eventually("the device removed", lambda: metric(server, "parley_push_total", provider="fcm", outcome="removed") == 1)
        # 429 with Retry-After: 1 — tried again, and delivered.
        eventually("frank's push after the 429", lambda: len(google.sends_to(busy)) == 2, timeout=10)
        alice.request({"type": "publish", "room": "team", "message": "again"})
        eventually("bob's second push", lambda: len(google.sends_to(phone)) == 2)
        eventually("frank's second push", lambda: len(google.sends_to(busy)) == 3)
        time.sleep(0.5)
        assert len(google.sends_to(dead)) == 1
        assert len(google.tokens_issued) == 1, "one access token, reused: %r" % google.tokens_issued
        assert metric(server, "parley_push_total", provider="fcm", outcome="sent") == 4  # bob 2, frank 2
        assert google.problems == [], google.problems
        # Tokens are checked.
        carol = device(server, "carol", room=None)
        clients.append(carol)
        assert "error" in carol.request({"type": "register_device", "platform": "fcm", "token": "bad token"})
    finally:
        close_all(clients)
        server.kill()
        google.stop()


def test_a_wrong_service_account_file_stops_the_start():
    directory = tempfile.mkdtemp(prefix="parley-fcm-bad-")
    account = os.path.join(directory, "service-account.json")
    with open(account, "w") as f:
        json.dump({"type": "service_account", "project_id": PROJECT, "client_email": EMAIL}, f)
    import subprocess
    from parley_process import binary
    result = subprocess.run([binary(), "serve", "--host", "127.0.0.1", "--http-port", "0", "--line-port", "0", "--data", directory, "--fcm-service-account", account],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "private_key_id" in result.stderr, result.stderr
