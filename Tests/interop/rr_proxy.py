"""A plain round-robin HTTP load balancer on 127.0.0.1, for cluster tests: every request goes to
the next backend in turn, on a fresh backend connection (never sticky by sid or by client
connection). An Upgrade request's connection is joined to its backend for good, as any load
balancer does with a WebSocket.
"""
import contextlib
import itertools
import socket
import threading


def _read_head(sock, buffered):
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buffered
        buffered += chunk
    head, _, rest = buffered.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def _length(head):
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def _header(head, wanted):
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == wanted:
            return value.strip().lower()
    return b""


def _read_body(sock, rest, length):
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return rest[:length], rest[length:]


def _listen():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    return listener, listener.getsockname()[1]


def _accept_forever(listener, handle):
    """Calls `handle(client)` on a thread of its own for every connection, until closed."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(client,), daemon=True).start()


def _pipe(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    for sock in (source, target):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class RoundRobinProxy:
    def __init__(self, backends):
        self.backends = list(backends)  # [(host, port)]
        self.turn = itertools.cycle(range(len(self.backends)))
        self.lock = threading.Lock()
        self.counts = [0] * len(self.backends)
        self.listener, self.port = _listen()
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=_accept_forever, args=(self.listener, self._serve), daemon=True).start()

    def _connect(self):
        """The next backend that takes a connection: a dead one is skipped, as balancers do.
        Each request takes one turn and tries the backends in order from it, each once (with
        a turn per try, requests on other threads could take every live backend's turn and
        leave this one the dead backend three times: a 503 that no balancer would send)."""
        with self.lock:
            start = next(self.turn)
        for offset in range(len(self.backends)):
            index = (start + offset) % len(self.backends)
            try:
                connection = socket.create_connection(self.backends[index], timeout=60)
            except OSError:
                continue
            with self.lock:
                self.counts[index] += 1
            return connection
        return None

    def _serve(self, client):
        buffered = b""
        try:
            while True:
                head, buffered = _read_head(client, buffered)
                if head is None:
                    return
                body, buffered = _read_body(client, buffered, _length(head))
                backend = self._connect()
                if backend is None:
                    client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                backend.sendall(head + body)
                if _header(head, b"upgrade") == b"websocket":
                    if buffered:
                        backend.sendall(buffered)
                    threading.Thread(target=_pipe, args=(backend, client), daemon=True).start()
                    _pipe(client, backend)
                    return
                response, rest = _read_head(backend, b"")
                if response is None:
                    return
                answer, _ = _read_body(backend, rest, _length(response))
                backend.close()
                client.sendall(response + answer)
                if _header(response, b"connection") == b"close":
                    return
        except OSError:
            return
        finally:
            try:
                client.close()
            except OSError:
                pass

    def stop(self):
        self.listener.close()


class TCPRoundRobinProxy:
    """Round robin for a plain TCP door (the line door): each connection to the next backend."""

    def __init__(self, backends):
        self.backends = list(backends)
        self.turn = itertools.cycle(range(len(self.backends)))
        self.lock = threading.Lock()
        self.listener, self.port = _listen()
        threading.Thread(target=_accept_forever, args=(self.listener, self._join), daemon=True).start()

    def _join(self, client):
        with self.lock:
            backend = self.backends[next(self.turn)]
        try:
            upstream = socket.create_connection(backend, timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
        _pipe(client, upstream)

    def stop(self):
        self.listener.close()


@contextlib.contextmanager
def two_balanced_nodes(prefix):
    """Two cluster nodes on one fresh Redis behind a RoundRobinProxy: yields (proxy, nodes)."""
    from cluster_support import two_nodes_on_redis
    with two_nodes_on_redis(prefix) as nodes:
        for node in nodes:
            node.wait_ready()
        proxy = RoundRobinProxy([("127.0.0.1", node.http) for node in nodes])
        try:
            yield proxy, nodes
        finally:
            proxy.stop()
