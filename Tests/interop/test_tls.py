"""Interop tests: TLS with Python's own `ssl` module (not Parley's code) on every door.

A self-signed certificate for localhost is made with /usr/bin/openssl; the server runs with
--tls-cert/--tls-key/--line-tls; the clients trust exactly that certificate.

Run (from the repository root, after `swift build`):
    PARLEY_BIN=.build/debug/parley .venv-interop/bin/pytest -q Tests/interop/test_tls.py
"""
import asyncio
import json
import os
import socket
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request

import pytest

from parley_process import parley_server
from websockets.asyncio.client import connect

TIMEOUT = 5


def make_certificate(directory):
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


@pytest.fixture(scope="module")
def server():
    directory = tempfile.mkdtemp(prefix="parley-interop-tls-")
    cert, key = make_certificate(directory)
    for info in parley_server(extra_args=("--tls-cert", cert, "--tls-key", key, "--line-tls")):
        yield dict(info, cert=cert)


def trusting(server):
    context = ssl.create_default_context(cafile=server["cert"])
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def test_websocket_over_wss(server):
    async def scenario():
        url = "wss://localhost:%d/v3/websocket" % server["http"]
        async with connect(url, ssl=trusting(server)) as alice, connect(url, ssl=trusting(server)) as bob:
            for ws, n in ((alice, 0), (bob, 1)):
                await ws.send(json.dumps({"type": "handshake", "channel": "demo", "callback": n}))
                reply = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                assert reply["callback"] == n and reply["client_id"]
                await ws.send(json.dumps({"type": "subscribe", "room": "tls", "callback": 10 + n}))
                assert json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT)) == {"callback": 10 + n}
            await alice.send(json.dumps({"type": "publish", "room": "tls", "message": "secret", "callback": 20}))
            while True:
                push = json.loads(await asyncio.wait_for(bob.recv(), TIMEOUT))
                if push.get("type") == "publish":
                    break
            assert push["message"] == "secret"
            assert push["room"] == "tls"
    asyncio.run(scenario())


def test_https_rest(server):
    base = "https://localhost:%d" % server["http"]
    request = urllib.request.Request(base + "/demo/tls-rest/publish", data=b'"hello over https"',
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, context=trusting(server), timeout=TIMEOUT) as response:
        assert response.status == 200
        receipt = json.loads(response.read())
        assert receipt["offset"] == 1
    with urllib.request.urlopen(base + "/metrics", context=trusting(server), timeout=TIMEOUT) as response:
        text = response.read().decode()
        assert 'parley_limit_breaches_total{limit="max_connections"} 0' in text


def test_untrusted_client_refuses(server):
    with pytest.raises(urllib.error.URLError) as failure:
        urllib.request.urlopen("https://localhost:%d/demo/stats" % server["http"],
                               context=ssl.create_default_context(), timeout=TIMEOUT)
    assert isinstance(failure.value.reason, ssl.SSLCertVerificationError)


def test_plain_http_on_tls_port_is_not_served(server):
    with socket.create_connection(("127.0.0.1", server["http"]), timeout=TIMEOUT) as plain:
        plain.sendall(b"GET /demo/stats HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        try:
            while True:
                chunk = plain.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        assert b"HTTP/1.1 200" not in data


def test_line_door_over_tls(server):
    raw = socket.create_connection(("127.0.0.1", server["line"]), timeout=TIMEOUT)
    with trusting(server).wrap_socket(raw, server_hostname="localhost") as alice:
        reader = alice.makefile("rb")
        alice.sendall(b"iam:tlsalice\n")
        lines = []
        while "tlsalice has joined" not in lines:
            lines.append(reader.readline().decode().rstrip("\n"))
        alice.sendall(b"msg:hello over tls\n")
        while True:
            line = reader.readline().decode().rstrip("\n")
            if line == "tlsalice:hello over tls":
                break
