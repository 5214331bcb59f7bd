"""The browser client's users screens in Debian's headless chromium: "seen by" under your own
message, a conversation list with unread badges, a direct message started from the member
list, and a direct room nobody else can open.

Run alone: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_browser_users.py
"""
import os

from selenium.webdriver.common.by import By

from test_browser import DOCS, browsers, row, server  # noqa: F401  (fixtures)
from test_native import server as native_server  # noqa: F401  (the fixture test_browser's server uses)


def conversations(b):
    """[title, badge or None, last line] of each conversation in the list, newest first."""
    return b.js("""return Array.from(document.querySelectorAll('#conversations .conversation a')).map(a => [
        a.querySelector('.conversation-title').textContent,
        a.querySelector('.badge') ? a.querySelector('.badge').textContent : null,
        a.querySelector('.conversation-last') ? a.querySelector('.conversation-last').textContent : '']);""")


def seen_by(b):
    return b.js("const s = document.querySelector('#messages .seen-by'); return s ? s.textContent : null;")


def test_seen_by_unread_badges_and_a_direct_message_from_the_member_list(server, browsers):
    room = "observable-users"
    alice = browsers()
    alice.open(server["base"], "alice", "#e53935", room=room)
    bob = browsers()
    bob.open(server["base"], "bob", "#1e88e5", room=room)
    alice.wait(lambda d: sorted(alice.members()) == ["alice", "bob"], message=str(alice.members()))
    alice_user = alice.js("return window.parley.state.userId;")
    bob_user = bob.js("return window.parley.state.userId;")
    assert alice_user != bob_user and alice_user.startswith("u-")

    # Alice writes; Bob's page shows it and marks it read; Alice sees who saw it.
    alice.say("hi bob, are you there?")
    bob.wait_bubble("hi bob, are you there?")
    alice.wait(lambda d: seen_by(alice) == "Seen by bob", message=str(seen_by(alice)))
    assert seen_by(bob) is None, "nobody has seen bob's messages: he has none"
    # Both have the room in their conversation list, read.
    for b in (alice, bob):
        b.wait(lambda d: conversations(b)[:1] and conversations(b)[0][0] == "#" + room, message=str(conversations(b)))
        assert conversations(b)[0][1] is None

    # Bob starts a direct message from the member list.
    member = bob.wait(lambda d: d.execute_script(
        "return Array.from(document.querySelectorAll('#members .member')).find(m => m.querySelector('.member-name').textContent === 'alice');"))
    member.find_element(By.CSS_SELECTOR, ".dm-button").click()
    dm = "dm+" + "+".join(sorted([alice_user, bob_user]))
    bob.wait(lambda d: bob.js("return window.parley.state.room;") == dm, message=bob.js("return location.hash;"))
    bob.wait_connected()
    assert bob.driver.find_element(By.ID, "room-name").text == "@alice"
    bob.say("psst, just us")
    bob.wait_bubble("psst, just us")

    # Alice, still in the room, gets the direct message in her list with a badge, newest first.
    alice.wait(lambda d: conversations(alice)[:1] and conversations(alice)[0][0] == "@bob" and conversations(alice)[0][1] == "1",
               message=str(conversations(alice)))
    assert conversations(alice)[0][2] == "bob: psst, just us"
    assert conversations(alice)[1][0] == "#" + room
    os.makedirs(DOCS, exist_ok=True)
    alice.driver.save_screenshot(os.path.join(DOCS, "screenshot-conversations.png"))

    # She opens it: the message is there, her badge goes, and Bob sees she saw it.
    alice.driver.find_element(By.CSS_SELECTOR, "#conversations .conversation a").click()
    alice.wait_bubble("psst, just us")
    alice.wait(lambda d: conversations(alice)[0][1] is None, message=str(conversations(alice)))
    bob.wait(lambda d: seen_by(bob) == "Seen by alice", message=str(seen_by(bob)))

    # A third browser cannot open their direct room, even by its name.
    carol = browsers()
    carol.open(server["base"], "carol", "#2f9e44", room=room)
    carol.js("location.hash = arguments[0];", "#" + dm)
    carol.wait(lambda d: "direct room" in carol.error_text(), message=carol.error_text())
    assert "psst, just us" not in carol.bubbles()
