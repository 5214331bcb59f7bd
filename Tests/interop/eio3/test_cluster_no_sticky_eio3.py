"""No sticky sessions on Engine.IO 3: python-socketio 4.x (Socket.IO 2, like older
Socket.IO-Client-Swift releases) through a plain round-robin balancer in front of two cluster
nodes on one Redis (see Tests/interop/test_cluster_no_sticky.py for EIO 4).
"""
import os
import sys

import pytest
import socketio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rr_proxy import two_balanced_nodes  # noqa: E402
from sio_support import run_late_post_after_upgrade, run_reconnect_sequence, run_socketchat_sequence  # noqa: E402


@pytest.fixture(scope="module")
def balanced():
    with two_balanced_nodes("nosticky3") as balanced:
        yield balanced


@pytest.mark.parametrize("transports,expected", [(["polling"], "polling"), (["polling", "websocket"], "websocket"),
                                                 (["websocket"], "websocket")])
def test_socketchat_through_a_round_robin_balancer(balanced, transports, expected):
    proxy, nodes = balanced
    before = sum(node.metric("parley_engineio_relayed_total") or 0 for node in nodes)
    run_socketchat_sequence(socketio, proxy.url, transports, expected)
    if "polling" in transports:
        assert sum(node.metric("parley_engineio_relayed_total") or 0 for node in nodes) > before


def test_a_reconnecting_app_through_the_balancer(balanced):
    proxy, _ = balanced
    run_reconnect_sequence(socketio, proxy.url, ["polling", "websocket"])


def test_a_post_right_after_the_upgrade_through_the_balancer(balanced):
    proxy, _ = balanced
    run_late_post_after_upgrade(proxy.url, 3)
