"""The cluster tests' round-robin balancer (rr_proxy.py) itself: with one backend dead, every
request still reaches a live one, however many come at once. (It once took a turn per connect
attempt, so concurrent requests could leave one request the dead backend's turn every time
and answer it 503: the killed-node cluster test then lost a client.)
"""
import http.server
import socket
import threading
import urllib.request

from rr_proxy import RoundRobinProxy


class _Ok(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _dead_port():
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_every_request_reaches_a_live_backend_while_one_is_dead():
    live = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=live.serve_forever, daemon=True).start()
    proxy = RoundRobinProxy([("127.0.0.1", _dead_port()), ("127.0.0.1", live.server_address[1])])
    statuses, lock = [], threading.Lock()

    def client():
        for _ in range(40):
            try:
                with urllib.request.urlopen(proxy.url + "/", timeout=10) as response:
                    status = response.status
            except urllib.error.HTTPError as error:
                status = error.code
            with lock:
                statuses.append(status)

    try:
        threads = [threading.Thread(target=client) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads), "clients still running after 60 s"
        assert len(statuses) == 320
        assert statuses.count(200) == 320, "not every request reached the live backend: %d of %d (%s)" % (
            statuses.count(200), len(statuses), sorted(set(statuses)))
        assert proxy.counts == [0, 320]
    finally:
        proxy.stop()
        live.shutdown()
        live.server_close()
