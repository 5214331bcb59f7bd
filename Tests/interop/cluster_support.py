"""Processes and clients for the multi-process cluster tests (Tests/interop/test_cluster*.py).

- `RedisProcess`: a real `redis-server` on a free 127.0.0.1 port in a temporary directory
  (optionally with an append-only file), killed, restarted on the same data, paused and
  resumed by its own pid.
- `RedisCluster`: three of them with `--cluster-enabled yes`, joined by
  `redis-cli --cluster create`.
- `Node`: a real `parley serve` in cluster mode (`--redis` / `--redis-cluster`), its log in a
  file, SIGKILLed or stopped by its own pid.
- `NativeClient` (the third-party `websockets` client, its sync API), `LineClient` (a plain
  socket) and `SocketChatClient` (python-socketio): each reads on a thread of its own and
  keeps everything it received, so a test can check whole sequences (no gap, no duplicate)
  after the fact. `Publisher` drives a native client with receipts and retries.

Every wait has a timeout; every process started here is stopped by its pid.
"""
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid


from parley_process import ParleyProcess

TIMEOUT = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def eventually(what, predicate, timeout=TIMEOUT, interval=0.05):
    """Waits until `predicate()` is truthy and returns its value; fails naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except (AssertionError, OSError, ValueError, KeyError) as error:
            last = error
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s (last: %r)" % (timeout, what, last))
        time.sleep(interval)


# MARK: Redis


class RedisProcess:
    """One `redis-server`, stopped by its pid. `appendonly` turns on the AOF with
    `appendfsync` (`always`, `everysec`, `no`)."""

    def __init__(self, appendonly=False, fsync="always", extra=(), port=None, directory=None):
        self.port = port or free_port()
        self.directory = directory or tempfile.mkdtemp(prefix="parley-redis-%d-" % self.port)
        self.args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--dir", self.directory, "--daemonize", "no", "--logfile", os.path.join(self.directory, "redis.log"),
                     "--appendonly", "yes" if appendonly else "no"]
        if appendonly:
            self.args += ["--appendfsync", fsync]
        self.args += list(extra)
        self.proc = None
        self._launch()

    def _launch(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            try:
                self.wait_ready(max(0.5, deadline - time.monotonic()))
                return
            except AssertionError:
                # A restart may find the old socket still bound for a moment.
                if self.proc.poll() is not None and "Address already in use" in self.log() and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                self._kill_now()
                raise

    def log(self):
        try:
            with open(os.path.join(self.directory, "redis.log")) as f:
                return f.read()
        except OSError:
            return ""

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    @property
    def pid(self):
        return self.proc.pid

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def wait_ready(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("redis-server on %d exited: %s" % (self.port, self.log()[-600:]))
            if self.ping():
                return
            time.sleep(0.02)
        raise AssertionError("redis-server on %d did not answer PING" % self.port)

    def cli(self, *args, timeout=TIMEOUT):
        """`redis-cli -p PORT args…`, its output (stripped)."""
        out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), *map(str, args)],
                             capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, "redis-cli %s: %s %s" % (" ".join(map(str, args)), out.stdout, out.stderr)
        return out.stdout.strip()

    def info(self, section):
        """`INFO section` as a dict."""
        fields = {}
        for line in self.cli("INFO", section).splitlines():
            if ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        return fields

    def _kill_now(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def kill(self):
        """SIGKILL (a crash: nothing is flushed); the data stays for `restart`."""
        self._kill_now()

    def restart(self):
        """The same port and data directory again."""
        self._kill_now()
        self._launch()

    def pause(self):
        """SIGSTOP: the server keeps its sockets and answers nothing (a network pause)."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


class RedisSentinel(RedisProcess):
    """One `redis-server --sentinel` on a free port, watching `master` as `name` (quorum 2,
    down after 1 s, failover timeout 3 s)."""

    def __init__(self, master, name="mymaster"):
        port = free_port()
        directory = tempfile.mkdtemp(prefix="parley-sentinel-%d-" % port)
        config = os.path.join(directory, "sentinel.conf")
        with open(config, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\n"
                    "sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 3000\n"
                    "sentinel parallel-syncs %s 1\n" % (port, directory, name, master.port, name, name, name))
        self.port, self.directory = port, directory
        self.args = ["redis-server", config, "--sentinel", "--logfile", os.path.join(directory, "redis.log")]
        self.proc = None
        self._launch()

    def master_port(self, name="mymaster"):
        out = self.cli("SENTINEL", "get-master-addr-by-name", name).split()
        return int(out[1]) if len(out) == 2 else None


class RedisCluster:
    """A local Redis Cluster of `masters` masters without replicas."""

    def __init__(self, masters=3, extra=()):
        self.nodes = []
        try:
            for _ in range(masters):
                self.nodes.append(RedisProcess(extra=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                                      "--cluster-port", str(free_port()), "--cluster-node-timeout", "5000",
                                                      *extra]))
            out = subprocess.run(["redis-cli", "--cluster", "create", *[n.address for n in self.nodes],
                                  "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, "redis-cli --cluster create: %s %s" % (out.stdout[-600:], out.stderr[-600:])
            eventually("the Redis Cluster to be stable", self._stable, timeout=60)
        except BaseException:
            self.stop()
            raise

    def _stable(self):
        infos = [n.cli("CLUSTER", "INFO") for n in self.nodes]
        slots = {n.cli("CLUSTER", "SLOTS") for n in self.nodes}
        return all("cluster_state:ok" in i and "cluster_known_nodes:%d" % len(self.nodes) in i for i in infos) and len(slots) == 1

    @property
    def seeds(self):
        return ",".join(n.address for n in self.nodes)

    def keyslot(self, key):
        return int(self.nodes[0].cli("CLUSTER", "KEYSLOT", key))

    def owner(self, slot):
        """The master serving `slot`."""
        for line in self.nodes[0].cli("CLUSTER", "NODES").splitlines():
            fields = line.split()
            if len(fields) < 9 or "master" not in fields[2]:
                continue
            port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
            for bounds in fields[8:]:
                if bounds.startswith("["):
                    continue
                low, _, high = bounds.partition("-")
                if int(low) <= slot <= int(high or low):
                    return next(n for n in self.nodes if n.port == port)
        raise AssertionError("no master serves slot %d" % slot)

    def stop(self):
        for node in self.nodes:
            node.stop()


# MARK: Parley nodes


class Node:
    """A `parley serve` node in cluster mode, on free ports, its stderr in a log file."""

    def __init__(self, name, redis=None, cluster=None, prefix="parley", lease=3, extra=()):
        assert (redis is None) != (cluster is None)
        self.name = name
        self.prefix = prefix
        self.log_path = tempfile.mktemp(prefix="parley-node-%s-" % name, suffix=".log")
        target = ["--redis", redis.url] if redis else ["--redis-cluster", cluster.seeds]
        self.process = ParleyProcess(extra_args=[*target, "--node-id", name, "--redis-prefix", prefix,
                                                 "--presence-lease", str(lease), "--rest-rate", "100000",
                                                 *extra], log_path=self.log_path)
        self.http = self.process.ports["http"]
        self.line = self.process.ports["line"]

    @property
    def pid(self):
        return self.process.pid

    @property
    def ws_url(self):
        return "ws://127.0.0.1:%d/v3/websocket" % self.http

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.http

    def get(self, path, timeout=5):
        """(status, body text) of a GET."""
        try:
            with urllib.request.urlopen(self.base + path, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def members(self, room, channel="demo"):
        """Member ids of a room, as this node answers `GET /{channel}/{room}/members`."""
        status, body = self.get("/%s/%s/members" % (channel, room))
        assert status == 200, "members of %s on %s: %d %s" % (room, self.name, status, body)
        return json.loads(body)

    def metric(self, name):
        """A metric's value (the first sample named exactly `name`), or None."""
        status, body = self.get("/metrics")
        if status != 200:
            return None
        for line in body.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def redis_up(self):
        return self.metric("parley_redis_up") == 1

    def wait_ready(self, timeout=TIMEOUT):
        eventually("node %s ready (/readyz)" % self.name, lambda: self.get("/readyz")[0] == 200, timeout)

    def kill(self):
        """SIGKILL: no goodbye, the members stay in Redis until the lease expires."""
        self.process.kill()

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        self.process.kill()
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


@contextlib.contextmanager
def two_nodes_on_redis(prefix):
    """Nodes a and b on one fresh `redis-server`, key prefix `prefix-…`; all stopped after."""
    redis = RedisProcess()
    try:
        nodes = start_nodes(["a", "b"], redis=redis, prefix=prefix + "-" + uuid.uuid4().hex[:8])
    except BaseException:
        redis.stop()
        raise
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()
        redis.stop()


def start_nodes(names, **kwargs):
    nodes = []
    try:
        for name in names:
            nodes.append(Node(name, **kwargs))
        for node in nodes:
            node.wait_ready()
        return nodes
    except BaseException:
        for node in nodes:
            node.stop()
        raise


# MARK: clients


class Recorder:
    """What a reader thread received, kept whole; `wait_for` consumes up to a match."""

    def __init__(self):
        self.cond = threading.Condition()
        self.items = []
        self.cursor = 0
        self.closed = False

    def add(self, item):
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wait_for(self, predicate, timeout=TIMEOUT, what="a matching message"):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                while self.cursor < len(self.items):
                    item = self.items[self.cursor]
                    self.cursor += 1
                    if predicate(item):
                        return item
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise AssertionError("no %s within %.1f s%s; last: %r" % (
                        what, timeout, " (connection closed)" if self.closed else "", self.items[-3:]))
                self.cond.wait(left)

    def wait_until(self, condition, timeout=TIMEOUT, what="a condition"):
        """Waits until `condition(items)` holds (items are not consumed)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not condition(self.items):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("timed out after %.1f s waiting for %s; the last of %d received: %r" % (
                        timeout, what, len(self.items), self.items[-5:]))
                self.cond.wait(min(left, 0.5))

    def snapshot(self):
        with self.cond:
            return list(self.items)

    def wait_for_all(self, wanted, timeout=TIMEOUT, what="every expected item"):
        """Waits until every item of `wanted` has arrived, in any order (nothing is consumed)."""
        wanted = set(wanted)
        try:
            self.wait_until(lambda items: wanted <= set(items), timeout, what)
        except AssertionError:
            raise AssertionError("missing %r (of %s)" % (sorted(wanted - set(self.snapshot())), what))


class NativeClient:
    """A Scaledrone-protocol client on the third-party `websockets` (sync API)."""

    def __init__(self, node_or_url, name=None, channel="demo", handshake=True):
        url = node_or_url if isinstance(node_or_url, str) else node_or_url.ws_url
        self.name = name
        # Imported here: the Engine.IO 3 venv (Tests/interop/eio3) uses this module without websockets.
        from websockets.sync.client import connect as ws_connect
        self.ws = ws_connect(url, open_timeout=TIMEOUT, max_size=None, compression=None, max_queue=None, legacy=True)
        self.received = Recorder()
        # Called with every message on the reader thread (before it is recorded).
        self.listeners = []
        self.callbacks = itertools.count(1000)
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.client_id = None
        if handshake:
            command = {"type": "handshake", "channel": channel}
            if name is not None:
                command["client_data"] = {"name": name}
            reply = self.request(command)
            assert "error" not in reply, reply
            self.client_id = reply["client_id"]

    def _read(self):
        try:
            while True:
                message = json.loads(self.ws.recv())
                for listener in self.listeners:
                    listener(message)
                self.received.add(message)
        except Exception:
            pass
        finally:
            self.received.close()

    def send(self, command):
        text = json.dumps(command)
        with self.lock:
            self.ws.send(text)

    def request(self, command, timeout=TIMEOUT):
        """Sends with a fresh callback and waits for its reply."""
        callback = next(self.callbacks)
        self.send(dict(command, callback=callback))
        return self.received.wait_for(lambda m: m.get("callback") == callback, timeout, "reply to %r" % command)

    def subscribe(self, room, since=None, history_count=None):
        command = {"type": "subscribe", "room": room}
        if since is not None:
            command["since"] = since
        if history_count is not None:
            command["history_count"] = history_count
        reply = self.request(command)
        assert "error" not in reply, reply
        return reply

    def publish(self, room, message, callback=None, message_id=None):
        command = {"type": "publish", "room": room, "message": message}
        if callback is not None:
            command["callback"] = callback
        if message_id is not None:
            command["message_id"] = message_id
        self.send(command)

    def wait_for(self, predicate, timeout=TIMEOUT, what="a matching message"):
        return self.received.wait_for(predicate, timeout, what)

    def publishes(self, room):
        """Every `publish` delivered in `room`, in arrival order."""
        return [m for m in self.received.snapshot() if m.get("type") == "publish" and m.get("room") == room]

    def chat(self, room):
        """The chat texts (string bodies) delivered in `room`."""
        return [m["message"] for m in self.publishes(room) if isinstance(m.get("message"), str)]

    def member_view(self, room):
        """Member ids of `room` as this client's events tell them: the observable_members
        snapshot, then joins and leaves, in order."""
        members = []
        for m in self.received.snapshot():
            if m.get("room") != room:
                continue
            if m.get("type") == "observable_members":
                members = [x["id"] for x in m["data"]]
            elif m.get("type") == "observable_member_join":
                members.append(m["data"]["id"])
            elif m.get("type") == "observable_member_leave" and m["data"]["id"] in members:
                members.remove(m["data"]["id"])
        return members

    def member_events(self, room, kind):
        """(id, name) of every observable_member_join/leave (`kind`) seen in `room`."""
        return [(m["data"]["id"], (m["data"].get("clientData") or {}).get("name")) for m in self.received.snapshot()
                if m.get("type") == "observable_member_" + kind and m.get("room") == room]

    @property
    def closed(self):
        return self.received.closed

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass


class Publisher:
    """Publishes `TAG-N` (body and `message_id`) with callbacks on a thread of its own, at
    most `window` unanswered, every `interval` seconds (0: as fast as the window allows),
    `count` messages or until `stop()`. A publish refused with an error is sent again (same
    `message_id`) after `retry_after` seconds; `move_to` sends everything unanswered again on
    another connection (after its node died). Records each message's acknowledged offset."""

    def __init__(self, client, room, tag, window=20, interval=0.0, count=None, retry_after=0.2):
        self.room, self.tag, self.window, self.interval, self.count = room, tag, window, interval, count
        self.retry_after = retry_after
        self.cond = threading.Condition()
        self.sent = 0
        self.pending = {}       # callback -> n
        self.retry = []         # n refused, to send again
        self.acked = {}         # n -> offset
        self.acks_in_order = []  # (n, offset) as the receipts came
        self.errors = []        # error texts of refused publishes
        self.send_failures = 0
        self.stopping = False
        self.callbacks = itertools.count(1_000_000)
        self.client = None
        self._attach(client)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def body(self, n):
        return "%s-%d" % (self.tag, n)

    def _attach(self, client):
        with self.cond:
            self.client = client
        client.listeners.append(self._on_message)

    def _on_message(self, message):
        if "callback" not in message or "type" in message:
            return
        with self.cond:
            n = self.pending.pop(message["callback"], None)
            if n is None:
                return
            if "error" in message:
                self.errors.append(message["error"])
                self.retry.append((time.monotonic() + self.retry_after, n))
            else:
                self.acked[n] = message["offset"]
                self.acks_in_order.append((n, message["offset"]))
            self.cond.notify_all()

    def _send(self, n):
        callback = next(self.callbacks)
        with self.cond:
            self.pending[callback] = n
            client = self.client
        try:
            client.publish(self.room, self.body(n), callback=callback, message_id=self.body(n))
        except Exception:
            # The connection is gone (its node was killed): `move_to` sends it again.
            with self.cond:
                self.send_failures += 1

    def _run(self):
        while True:
            with self.cond:
                while True:
                    finished = self.stopping or (self.count is not None and self.sent >= self.count)
                    if finished and not self.retry and not self.pending:
                        return
                    due = [item for item in self.retry if item[0] <= time.monotonic()]
                    can_send = len(self.pending) < self.window and not self.client.closed
                    if can_send and due:
                        self.retry.remove(due[0])
                        n = due[0][1]
                        break
                    if can_send and not self.stopping and (self.count is None or self.sent < self.count):
                        n = self.sent
                        self.sent += 1
                        break
                    self.cond.wait(0.05)
            self._send(n)
            if self.interval:
                time.sleep(self.interval)

    def move_to(self, client):
        """Everything sent and not acknowledged goes again (same message ids) on `client`."""
        with self.cond:
            lost = list(self.pending.values())
            self.pending.clear()
            self.retry.extend((0, n) for n in lost)
        self._attach(client)
        with self.cond:
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    def wait_done(self, timeout=60):
        """Waits until every message is sent (`count`; without one, stops first) and
        acknowledged."""
        if self.count is None:
            self.stop()
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.pending or self.retry or len(self.acked) < max(self.sent, self.count or 0):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("%s: %d of %d acknowledged, %d waiting, %d to retry; errors %r" % (
                        self.tag, len(self.acked), self.sent, len(self.pending), len(self.retry), self.errors[-3:]))
                self.cond.wait(min(left, 0.2))
        self.thread.join(5)

    def wait_acked(self, count, timeout=60):
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.acked) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("%s: only %d of %d acknowledged; errors %r" % (
                        self.tag, len(self.acked), count, self.errors[-3:]))
                self.cond.wait(min(left, 0.2))


class LineClient:
    """A line-protocol client on a plain socket; a reader thread keeps every line."""

    def __init__(self, port, name=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock.settimeout(None)
        self.received = Recorder()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.name = name
        if name is not None:
            self.send("iam:%s\n" % name)
            self.wait_for(lambda line: line == "%s has joined" % name)

    def _read(self):
        buffer = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self.received.add(line.decode())
        except OSError:
            pass
        finally:
            self.received.close()

    def send(self, text):
        self.sock.sendall(text.encode())

    def wait_for(self, predicate, timeout=TIMEOUT, what="a matching line"):
        return self.received.wait_for(predicate, timeout, what)

    def lines(self):
        return self.received.snapshot()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def close_all(clients):
    for client in clients:
        try:
            client.close()
        except Exception:
            pass


def contiguous(offsets, first=1):
    """None when `offsets` is exactly first, first+1, …; else a description of the first fault."""
    for index, offset in enumerate(offsets):
        if offset != first + index:
            seen = set(offsets[:index])
            kind = "duplicate" if offset in seen else ("gap" if offset > first + index else "out of order")
            return "%s at position %d: expected offset %d, got %d" % (kind, index, first + index, offset)
    return None


SOCKETCHAT_EVENTS = ["userList", "userConnectUpdate", "userExitUpdate", "userTypingUpdate", "newChatMessage", "error"]


class SocketChatClient:
    """A python-socketio client speaking the SocketChat event set; keeps every event as
    (name, args)."""

    def __init__(self, node, nickname=None, transports=("websocket",)):
        import socketio  # the interop venv has it; imported here so the module loads without it
        self.nickname = nickname
        self.received = Recorder()
        debug = os.environ.get("PARLEY_SIO_DEBUG") == "1"
        self.sio = socketio.Client(reconnection=False, logger=debug, engineio_logger=debug)
        for name in SOCKETCHAT_EVENTS:
            self.sio.on(name, self._recorder(name))
        self.sio.connect(node.base, transports=list(transports), wait_timeout=TIMEOUT)
        eventually("socket.io connected", lambda: self.sio.connected and self.sio.sid)
        if nickname is not None:
            self.emit("connectUser", nickname)
            self.wait_for("userConnectUpdate", lambda a: a[0]["nickname"] == nickname)

    def _recorder(self, name):
        def record(*args):
            self.received.add((name, args))
        return record

    def emit(self, event, *args):
        self.sio.emit(event, args if len(args) != 1 else args[0])

    def wait_for(self, name, predicate=lambda args: True, timeout=TIMEOUT):
        return self.received.wait_for(lambda e: e[0] == name and predicate(e[1]), timeout, "%s event" % name)[1]

    def events(self, name):
        return [args for (event, args) in self.received.snapshot() if event == name]

    def transport(self):
        return self.sio.transport()

    def disconnect(self):
        self.sio.disconnect()

    def close(self):
        try:
            self.sio.disconnect()
        except Exception:
            pass
