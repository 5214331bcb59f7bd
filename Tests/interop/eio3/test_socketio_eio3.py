"""Interop: python-socketio 4.6.1 / python-engineio 3.14.2 (Socket.IO 2, Engine.IO 3, like
older Socket.IO-Client-Swift releases) against Parley's Socket.IO door.

Runs in its own venv (make interop builds .venv-interop-eio3 from
Tests/interop/requirements-eio3.txt).
"""
import os
import sys

import pytest
import requests
import socketio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sio_support import (TIMEOUT, parley_server, run_late_post_after_upgrade, run_reconnect_sequence,  # noqa: E402
                         run_socketchat_sequence)


@pytest.fixture(scope="module")
def server():
    yield from parley_server()


def base(server):
    return "http://127.0.0.1:%d" % server["http"]


def test_client_speaks_engineio_3():
    import engineio
    assert engineio.__version__.startswith("3.") and socketio.__version__.startswith("4.")


def test_socketchat_over_polling_then_websocket(server):
    run_socketchat_sequence(socketio, base(server), ["polling", "websocket"], "websocket")


def test_socketchat_over_websocket_only(server):
    run_socketchat_sequence(socketio, base(server), ["websocket"], "websocket")


def test_socketchat_polling_only(server):
    run_socketchat_sequence(socketio, base(server), ["polling"], "polling")


@pytest.mark.parametrize("transports", [["polling", "websocket"], ["polling"]])
def test_an_app_that_reconnects_without_connect_user_keeps_chatting(server, transports):
    run_reconnect_sequence(socketio, base(server), transports)


def test_a_post_that_arrives_just_after_the_upgrade_is_answered_and_handled(server):
    for _ in range(5):
        run_late_post_after_upgrade(base(server), 3)


def test_eio3_open_packet_has_no_max_payload_and_connects_at_once(server):
    r = requests.get(base(server) + "/socket.io/?EIO=3&transport=polling&b64=1", timeout=TIMEOUT)
    assert r.status_code == 200
    length, rest = r.text.split(":", 1)
    open_packet = rest[:int(length)]
    assert open_packet.startswith('0{') and "maxPayload" not in open_packet
    assert rest[int(length):] == "2:40"
