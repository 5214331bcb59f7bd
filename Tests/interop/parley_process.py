"""Starts and stops a real `parley serve` for the interop tests.

One place for it: the server binds 127.0.0.1 with OS-chosen ports (or a given HTTP port, to
restart on the same one), gets a fresh `--data` directory unless told otherwise (so runs never
share history), prints its ports, and is killed by its own pid. Every wait has a timeout.
"""
import os
import select
import signal
import subprocess
import tempfile
import time

START_TIMEOUT = 10


def binary():
    """$PARLEY_BIN, else the debug build, as an absolute path (tests may change directory)."""
    return os.path.abspath(os.environ.get("PARLEY_BIN", ".build/debug/parley"))


class ParleyProcess:
    def __init__(self, extra_args=(), http_port=0, data_dir=None, loops=2, cwd=None, log_path=None):
        """`log_path`: the server's standard error goes to this file (for long or noisy runs,
        where a pipe nobody reads could fill up and stall the server)."""
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="parley-interop-")
        self.log_file = open(log_path, "wb") if log_path else None
        self.proc = subprocess.Popen(
            [binary(), "serve", "--host", "127.0.0.1", "--http-port", str(http_port), "--line-port", "0",
             "--loops", str(loops), "--data", self.data_dir, *extra_args],
            stdout=subprocess.PIPE, stderr=self.log_file or subprocess.PIPE, cwd=cwd)
        self.ports = {}
        try:
            self._read_ports()
        except BaseException:
            self.kill()
            raise

    def _read_ports(self):
        deadline = time.time() + START_TIMEOUT
        buffered = b""
        while len(self.ports) < 2:
            left = deadline - time.time()
            assert left > 0, "server did not print its ports: %r" % buffered
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            assert chunk, "server exited: %r %r" % (buffered, self._stderr())
            buffered += chunk
            for line in buffered.decode().splitlines():
                # "http listening on 127.0.0.1:PORT" / "line listening on 127.0.0.1:PORT"
                parts = line.split()
                if len(parts) == 4 and parts[1:3] == ["listening", "on"]:
                    self.ports[parts[0]] = int(parts[3].rsplit(":", 1)[1])

    def _stderr(self):
        if self.proc.stderr is not None:
            return self.proc.stderr.read()
        self.log_file.flush()
        with open(self.log_file.name, "rb") as f:
            return f.read()[-2000:]

    @property
    def pid(self):
        return self.proc.pid

    @property
    def info(self):
        return {"http": self.ports["http"], "line": self.ports["line"], "pid": self.proc.pid}

    def kill(self):
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        if self.log_file:
            self.log_file.close()


def parley_server(extra_args=(), loops=2, cwd=None):
    """Generator for pytest fixtures: yields {http, line, pid}; the server dies afterwards."""
    server = ParleyProcess(extra_args=extra_args, loops=loops, cwd=cwd)
    try:
        yield server.info
    finally:
        server.kill()
