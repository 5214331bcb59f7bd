"""`parley chat` driven in a real terminal (tmux), and its plain line mode through pipes.

Run (from the repository root, after `swift build`; needs tmux):
    PARLEY_BIN=.build/debug/parley .venv-interop/bin/pytest -q Tests/interop/test_chat_tmux.py

Every tmux session lives on a private tmux server (`-L <unique socket>`) that the finalizer
kills, so nothing leaks into the user's tmux. Every wait has a timeout.
"""
import os
import select
import shlex
import subprocess
import time
import uuid

import pytest

from parley_process import parley_server

TIMEOUT = 10
BIN = os.path.abspath(os.environ.get("PARLEY_BIN", ".build/debug/parley"))

# `make test` installs tmux; without it these tests fail rather than skip.


@pytest.fixture()
def server():
    for info in parley_server(loops=1):
        yield "ws://127.0.0.1:%d/v3/websocket" % info["http"]


class Tmux:
    """A private tmux server; sessions are killed with it."""

    def __init__(self):
        self.socket = "parley-test-%s" % uuid.uuid4().hex[:12]

    def run(self, *args, check=True):
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=TIMEOUT, check=check)

    def start(self, name, command, width=100, height=24):
        # After the client exits, show the terminal's settings so a test can check they were
        # restored, then keep the pane open for inspection.
        shell = "%s; echo EXITED=$?; stty -a; sleep 120" % command
        self.run("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), shell)

    def keys(self, name, *keys):
        self.run("send-keys", "-t", name, *keys)

    def literal(self, name, text):
        self.run("send-keys", "-t", name, "-l", text)

    def screen(self, name, escapes=False):
        args = ["capture-pane", "-p", "-t", name] + (["-e"] if escapes else [])
        return self.run(*args).stdout

    def wait_for(self, name, predicate, what, timeout=TIMEOUT, escapes=False):
        deadline = time.time() + timeout
        screen = ""
        while time.time() < deadline:
            screen = self.screen(name, escapes)
            if predicate(screen):
                return screen
            time.sleep(0.05)
        raise AssertionError("timed out waiting for %s in %s; screen:\n%s" % (what, name, screen))

    def wait_text(self, name, text, **kwargs):
        return self.wait_for(name, lambda s: text in s, repr(text), **kwargs)

    def kill(self):
        self.run("kill-server", check=False)
        # tmux leaves its socket file behind; it is ours, remove it.
        path = os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), "tmux-%d" % os.getuid(), self.socket)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


@pytest.fixture()
def tmux():
    t = Tmux()
    try:
        yield t
    finally:
        t.kill()


def chat(url, name, color=None, extra=""):
    command = [BIN, "chat", "--url", url, "--name", name]
    if color:
        command += ["--color", color]
    return " ".join(shlex.quote(c) for c in command) + (" " + extra if extra else "")


def status_line(screen):
    return screen.splitlines()[0] if screen else ""


def test_two_terminals_chat_type_and_quit(server, tmux):
    tmux.start("alice", chat(server, "alice", "#FF0000"))
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s) and "connected" in status_line(s), "alice online")
    tmux.start("bob", chat(server, "bob", "#00FF00"))
    tmux.wait_for("alice", lambda s: "2 online" in status_line(s), "2 online")
    tmux.wait_text("alice", "bob joined")

    # Bob types: alice sees the typing line, then the message, and the typing line goes away.
    tmux.literal("bob", "hi alice, ça va? 你好")
    tmux.wait_text("alice", "bob is typing")
    tmux.keys("bob", "Enter")
    screen = tmux.wait_text("alice", "bob: hi alice, ça va? 你好")
    tmux.wait_for("alice", lambda s: "bob is typing" not in s, "typing line cleared")

    # Alice answers: bob sees her name in her member color (24-bit), and his own line is marked.
    tmux.literal("alice", "hello bob")
    tmux.keys("alice", "Enter")
    tmux.wait_text("bob", "alice", escapes=True)
    tmux.wait_for("bob", lambda s: "38;2;255;0;0m" in s and "hello bob" in s, "alice in red", escapes=True)
    bob_screen = tmux.screen("bob")
    assert "›bob: hi alice" in bob_screen, bob_screen

    # Line editing: type, move left, fix a typo, go home, use history.
    tmux.literal("alice", "helo")
    tmux.keys("alice", "Left", "Left")
    tmux.literal("alice", "l")
    tmux.keys("alice", "Home")
    tmux.literal("alice", ">> ")
    tmux.keys("alice", "End")
    tmux.literal("alice", "!")
    tmux.keys("alice", "Enter")
    tmux.wait_text("bob", "alice: >> hello!")
    tmux.keys("alice", "Up", "Enter")
    tmux.wait_for("bob", lambda s: s.count("alice: >> hello!") == 2, "history resend")

    # /members lists both.
    tmux.literal("bob", "/members")
    tmux.keys("bob", "Enter")
    tmux.wait_text("bob", "2 online: alice, bob (you)")

    # Bob quits: alice's online count drops and she sees the leave notice; bob's terminal is back.
    tmux.literal("bob", "/quit")
    tmux.keys("bob", "Enter")
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "1 online")
    tmux.wait_text("alice", "bob left")
    tmux.wait_text("bob", "EXITED=0")

    # Ctrl-C restores the terminal: the shell's stty shows canonical mode and echo again.
    tmux.keys("alice", "C-c")
    screen = tmux.wait_for("alice", lambda s: "EXITED=0" in s and "icanon" in s, "exit and stty")
    assert " icanon" in screen and "-icanon" not in screen, screen
    assert " echo " in screen and "-echo " not in screen, screen
    assert "bob: hi alice" not in screen, "still on the alternate screen:\n" + screen


def test_recent_history_shown_on_join_and_room_switch(server, tmux):
    tmux.start("alice", chat(server, "alice"))
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "alice online")
    for text in ["first", "second"]:
        tmux.literal("alice", text)
        tmux.keys("alice", "Enter")
        tmux.wait_text("alice", "alice: " + text)
    tmux.start("carol", chat(server, "carol"))
    tmux.wait_text("carol", "alice: second")
    tmux.literal("carol", "/room observable-other")
    tmux.keys("carol", "Enter")
    tmux.wait_for("carol", lambda s: "#observable-other" in status_line(s) and "1 online" in status_line(s), "room switch")
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "carol gone from alice's room")
    tmux.literal("carol", "/name caroline")
    tmux.keys("carol", "Enter")
    tmux.wait_for("carol", lambda s: "caroline" in status_line(s) and "connected" in status_line(s), "renamed")


def test_resize_redraws(server, tmux):
    tmux.start("alice", chat(server, "alice"), width=100, height=24)
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "alice online")
    tmux.run("resize-window", "-t", "alice", "-x", "60", "-y", "12")
    tmux.wait_for("alice", lambda s: len(s.splitlines()) <= 12 and "1 online" in status_line(s)
                  and s.splitlines()[-1].startswith(">"), "redraw at 60x12")


def test_plain_line_mode_through_pipes(server, tmux):
    tmux.start("alice", chat(server, "alice"))
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "alice online")
    proc = subprocess.Popen([BIN, "chat", "--url", server, "--name", "piper"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        tmux.wait_for("alice", lambda s: "2 online" in status_line(s), "piper online")
        proc.stdin.write("hello from a pipe\n".encode())
        proc.stdin.flush()
        tmux.wait_text("alice", "piper: hello from a pipe")
        tmux.literal("alice", "hello piper")
        tmux.keys("alice", "Enter")
        deadline = time.time() + TIMEOUT
        out = b""
        while b"alice: hello piper\n" not in out:
            left = deadline - time.time()
            assert left > 0, "piper did not print alice's message: %r" % out
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 4096)
                assert chunk, "piper exited early"
                out += chunk
        proc.stdin.close()
        assert proc.wait(timeout=TIMEOUT) == 0
        assert b"piper: hello from a pipe" not in out, "own messages are not echoed in line mode"
        tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "piper left")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)

    # A one-shot pipeline: `echo ... | parley chat` sends and exits 0 once acknowledged.
    result = subprocess.run("printf 'one-shot line\\n' | %s" % chat(server, "echoer"), shell=True,
                            capture_output=True, timeout=TIMEOUT)
    assert result.returncode == 0, result
    tmux.wait_text("alice", "echoer: one-shot line")


def test_rejected_connection_exits_with_an_error(tmux, server):
    result = subprocess.run([BIN, "chat", "--url", server, "--channel", "bad/channel"], stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=TIMEOUT)
    assert result.returncode == 1
    assert b"refused" in result.stderr
    tmux.start("nobody", chat(server, "x") + " --channel bad/channel")
    screen = tmux.wait_for("nobody", lambda s: "EXITED=1" in s and "icanon" in s, "exit and stty")
    assert "refused" in screen
    assert " icanon" in screen and "-icanon" not in screen


def test_upload_a_file_and_see_others_files(server, tmux):
    import struct
    import tempfile
    import zlib
    directory = tempfile.mkdtemp(prefix="parley-chat-files-")
    photo = os.path.join(directory, "my photo.png")
    raw = b"".join(b"\x00" + b"".join(bytes([(x * 2) % 256, (y * 2) % 256, 90]) for x in range(160)) for y in range(120))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(photo, "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 160, 120, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    notes = os.path.join(directory, "notes.txt")
    with open(notes, "w") as handle:
        handle.write("agenda\n")

    tmux.start("alice", chat(server, "alice"), width=120)
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "alice online")
    tmux.start("bob", chat(server, "bob"), width=120)
    tmux.wait_for("alice", lambda s: "2 online" in status_line(s), "2 online")
    # A path with a space goes in quotes; the rest is the caption.
    tmux.literal("bob", '/upload "%s" the view from here' % photo)
    tmux.keys("bob", "Enter")
    screen = tmux.wait_text("alice", "[image my photo.png")
    assert "bob: the view from here" in screen, screen
    assert "/demo/files/" in screen, screen
    tmux.wait_text("bob", "[image my photo.png")
    tmux.literal("bob", "/upload /no/such/file.txt")
    tmux.keys("bob", "Enter")
    tmux.wait_text("bob", "cannot read /no/such/file.txt")

    # Line mode: `/upload` from a pipe, and files from others printed a line each.
    result = subprocess.run("printf '/upload %s\\n' | %s" % (notes, chat(server, "scribe")), shell=True,
                            capture_output=True, timeout=TIMEOUT)
    assert result.returncode == 0, result
    assert b"uploading 100%" in result.stderr, result.stderr
    tmux.wait_text("alice", "scribe: [file notes.txt 7 B]")


class PipeReader:
    """A plain-mode `parley chat` process's stdout, read with a deadline."""

    def __init__(self, proc):
        self.proc = proc
        self.out = b""

    def wait_for(self, text, timeout=TIMEOUT):
        wanted = text.encode()
        deadline = time.time() + timeout
        while wanted not in self.out:
            left = deadline - time.time()
            assert left > 0, "no %r in the pipe's output: %r" % (text, self.out)
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                assert chunk, "the piped chat exited early: %r" % self.out
                self.out += chunk


def test_replies_edits_deletes_and_reactions(server, tmux):
    """Both modes show message actions and run the short commands for them (docs: README, parley chat)."""
    tmux.start("alice", chat(server, "alice"))
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "alice online")
    bob = subprocess.Popen([BIN, "chat", "--url", server, "--name", "bob"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = PipeReader(bob)

    def say(text):
        bob.stdin.write((text + "\n").encode())
        bob.stdin.flush()

    def alice(text):
        tmux.literal("alice", text)
        tmux.keys("alice", "Enter")

    try:
        tmux.wait_for("alice", lambda s: "2 online" in status_line(s), "bob online")
        say("hello alice")
        tmux.wait_text("alice", "bob: hello alice")
        # A reply quotes the message it answers, on both sides.
        alice("/reply hi bob")
        out.wait_for('alice (reply to bob: "hello alice"): hi bob\n')
        tmux.wait_text("alice", 'alice (reply to bob: "hello alice"): hi bob')
        # Bob fixes his last message: alice sees it edited, and her quote follows.
        say("/edit hello alice!")
        tmux.wait_text("alice", "bob (edited): hello alice!")
        tmux.wait_text("alice", 'alice (reply to bob: "hello alice!"): hi bob')
        # Alice reacts on bob's message: a chip row on her screen, a line on bob's pipe.
        alice("/react 👍")
        out.wait_for('alice reacted 👍 to "hello alice!"\n')
        tmux.wait_text("alice", "👍 1")
        alice("/edit hi bob!")
        out.wait_for('alice (reply to bob: "hello alice!", edited): hi bob!\n')
        # A refusal is the server's word for it.
        alice("/unreact 🎉")
        tmux.wait_text("alice", "unreact refused:")
        # Bob takes his message back: a tombstone for alice, her quote says so.
        say("/delete")
        tmux.wait_text("alice", "bob: (message deleted)")
        tmux.wait_text("alice", "alice (reply to bob: (deleted), edited): hi bob!")
        assert "👍 1" not in tmux.screen("alice")
        bob.stdin.close()
        assert bob.wait(timeout=TIMEOUT) == 0
        assert b"you have" not in bob.stderr.read()
    finally:
        if bob.poll() is None:
            bob.kill()
            bob.wait(timeout=TIMEOUT)


def test_direct_messages_inbox_and_seen_by(server, tmux):
    """`--user` makes a user: /dm starts a direct room, /inbox lists conversations with their
    unread counts, /seen says who has read your last message (README, parley chat)."""
    tmux.start("alice", chat(server, "alice", extra="--user alice --room observable-inbox"))
    tmux.wait_for("alice", lambda s: "1 online" in status_line(s), "alice online")
    bob = subprocess.Popen([BIN, "chat", "--url", server, "--name", "bob", "--user", "bob", "--room", "observable-inbox"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = PipeReader(bob)

    def say(text):
        bob.stdin.write((text + "\n").encode())
        bob.stdin.flush()

    def alice(text):
        tmux.literal("alice", text)
        tmux.keys("alice", "Enter")

    try:
        tmux.wait_for("alice", lambda s: "2 online" in status_line(s), "bob online")
        alice("anyone around?")
        out.wait_for("alice: anyone around?\n")
        def ask_until(command, text):
            """Runs `command` in alice's screen until its answer shows `text` (the state it
            reads arrives on its own time)."""
            deadline = time.time() + TIMEOUT
            while text not in tmux.screen("alice"):
                assert time.time() < deadline, "%r never showed %r: %s" % (command, text, tmux.screen("alice"))
                alice(command)
                time.sleep(0.3)

        # Bob's client shows it and marks it read: alice learns he saw it.
        ask_until("/seen", "Seen by bob")
        say("/dm alice")
        say("psst, alice")
        # Alice is still in the room: her inbox has the direct room, unread, newest first.
        ask_until("/inbox", "@bob (1 unread): bob: psst, alice")
        alice("/dm bob")
        tmux.wait_text("alice", "bob: psst, alice")
        bob.stdin.close()
        assert bob.wait(timeout=TIMEOUT) == 0
    finally:
        if bob.poll() is None:
            bob.kill()
            bob.wait(timeout=TIMEOUT)
