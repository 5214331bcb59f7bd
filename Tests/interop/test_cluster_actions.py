"""Message actions across two cluster nodes with real clients: a third-party `websockets`
client (the native door) on node a and the browser client in headless chromium on node b,
on one real `redis-server`. Both reply, react, edit and delete; each drops in the middle and
resumes from its offset (the websockets client on the *other* node), and gets what it missed
in order, with no gap and no duplicate; history then answers with the current state.

Run: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_cluster_actions.py
"""
import uuid

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from cluster_support import NativeClient, close_all, contiguous, eventually, two_nodes_on_redis
from test_browser import Browser, chips, hover_click, quote_of, row

ACTIONS = ("edit", "delete", "react", "unreact")


@pytest.fixture
def two_nodes():
    with two_nodes_on_redis("act") as nodes:
        yield nodes


def logged(client, room):
    """Every stored event (messages and actions) `client` received in `room`, in arrival order."""
    return [m for m in client.received.snapshot()
            if m.get("room") == room and "offset" in m and (m.get("type") == "publish" or m.get("type") in ACTIONS)]


def found(client, room, what, predicate):
    """The first logged event matching `predicate`, waited for."""
    return eventually(what, lambda: next((m for m in logged(client, room) if predicate(m)), None))


def key(event):
    return (event["type"], event["id"], event["offset"], event.get("target"), event.get("emoji"))


def pick(browser, text, emoji):
    node = hover_click(browser, text, "react")
    browser.wait(lambda d: node.find_element(By.CSS_SELECTOR, ".picker").is_displayed())
    node.find_element(By.CSS_SELECTOR, ".picker .pick[aria-label='React with %s']" % emoji).click()


def edit_in_page(browser, text, new_text):
    hover_click(browser, text, "edit")
    browser.wait(lambda d: d.find_element(By.ID, "composer").get_attribute("value") == text)
    box = browser.driver.find_element(By.ID, "composer")
    box.clear()
    box.send_keys(new_text, Keys.ENTER)


def test_actions_from_websockets_and_the_browser_across_two_nodes_with_a_resume(two_nodes):
    a, b = two_nodes
    room = "observable-actions-" + uuid.uuid4().hex[:6]
    clients, browser = [], None
    try:
        # A watcher on b sees the whole log live: what every resume is compared with.
        watcher = NativeClient(b, "watcher")
        clients.append(watcher)
        watcher.subscribe(room)
        wendy = NativeClient(a, "wendy")
        clients.append(wendy)
        wendy.subscribe(room)
        browser = Browser()
        browser.open(b.base, "bea", "#e53935", room=room)
        browser.wait(lambda d: "wendy" in browser.members(), message=str(browser.members()))

        # The browser writes on b; wendy on a replies to it and reacts.
        browser.say("hello from the browser")
        hello = found(wendy, room, "the browser's message on a", lambda m: m["message"] == "hello from the browser")
        reply = wendy.request({"type": "reply", "room": room, "reply_to": hello["id"], "message": "hi from websockets"})
        assert "error" not in reply and reply["offset"] > hello["offset"], reply
        browser.wait(lambda d: quote_of(browser, "hi from websockets") == "beahello from the browser",
                     message=str(browser.bubbles()))
        reacted = wendy.request({"type": "react", "room": room, "target": hello["id"], "emoji": "👍"})
        assert "error" not in reacted, reacted
        browser.wait(lambda d: chips(browser, "hello from the browser") == [["👍1", "wendy reacted with 👍", "false"]],
                     message=str(chips(browser, "hello from the browser")))

        # The browser reacts on the reply and edits its own message; wendy sees both on a.
        pick(browser, "hi from websockets", "🎉")
        found(wendy, room, "the browser's reaction", lambda m: m["type"] == "react" and m["target"] == reply["id"]
              and m["emoji"] == "🎉")
        edit_in_page(browser, "hello from the browser", "hello, edited")
        found(wendy, room, "the browser's edit", lambda m: m["type"] == "edit" and m["target"] == hello["id"]
              and m["message"] == "hello, edited")

        # Wendy edits her reply; another member's message is not hers to edit or delete.
        edited = wendy.request({"type": "edit", "room": room, "target": reply["id"], "message": "hi from websockets!"})
        assert "error" not in edited, edited
        browser.wait(lambda d: "hi from websockets!edited" in browser.bubbles(), message=str(browser.bubbles()))
        for command in ({"type": "edit", "room": room, "target": hello["id"], "message": "mine now"},
                        {"type": "delete", "room": room, "target": hello["id"]}):
            refused = wendy.request(command)
            assert refused.get("code") == "not_author" and refused.get("error"), refused
        refused = wendy.request({"type": "react", "room": room, "target": "no-such-message", "emoji": "👍"})
        assert refused.get("code") == "unknown_message", refused

        # Wendy drops. While she is away the browser writes, takes its 🎉 back, and deletes
        # its edited message (the quote above her reply follows).
        last = max(m["offset"] for m in logged(wendy, room))
        wendy.close()
        browser.say("while you were away")
        row(browser, "hi from websockets!").find_element(By.CSS_SELECTOR, ".chip").click()
        browser.wait(lambda d: chips(browser, "hi from websockets!") == [], message=str(chips(browser, "hi from websockets!")))
        hover_click(browser, "hello, edited", "delete")
        browser.wait(lambda d: d.switch_to.alert).accept()
        browser.wait(lambda d: quote_of(browser, "hi from websockets!") == "Deleted message")
        deleted = found(watcher, room, "the delete", lambda m: m["type"] == "delete" and m["target"] == hello["id"])

        # She comes back on the *other* node, from her offset: exactly what the watcher saw
        # after it, in order, once; the message she missed, the unreact, the delete.
        wendy = NativeClient(b, "wendy")
        clients.append(wendy)
        wendy.subscribe(room, since=last)
        eventually("wendy's replay up to the delete", lambda: any(m["offset"] == deleted["offset"] for m in logged(wendy, room)))
        missed = [key(m) for m in logged(watcher, room) if m["offset"] > last]
        assert [key(m) for m in logged(wendy, room)] == missed
        assert [k[0] for k in missed] == ["publish", "unreact", "delete"], missed

        # A native client id is per connection (docs/protocols.md): back on a new connection,
        # wendy is another member, and her old reply is not hers to edit any more.
        refused = wendy.request({"type": "edit", "room": room, "target": reply["id"], "message": "hi again"})
        assert refused.get("code") == "not_author", refused

        # The browser drops. Wendy, now on b, reacts on the message she missed, writes and
        # edits what she wrote; the browser's resume (`since`) shows all of it, once.
        away = found(wendy, room, "the message she missed", lambda m: m["message"] == "while you were away")
        browser.js("window.parley.state.attempt = 6; window.parley.state.ws.close();")
        browser.wait(lambda d: d.find_element(By.ID, "error-retry").is_displayed(), message="no retry button")
        assert "error" not in wendy.request({"type": "react", "room": room, "target": away["id"], "emoji": "❤️"})
        back = wendy.request({"type": "publish", "room": room, "message": "back on b"})
        assert "error" not in back, back
        assert "error" not in wendy.request({"type": "edit", "room": room, "target": back["id"], "message": "back on node b"})
        browser.driver.find_element(By.ID, "error-retry").click()
        browser.wait_connected()
        browser.wait(lambda d: "back on node bedited" in browser.bubbles(), message=str(browser.bubbles()))
        browser.wait(lambda d: chips(browser, "while you were away") == [["❤️1", "wendy reacted with ❤️", "false"]],
                     message=str(chips(browser, "while you were away")))
        assert browser.bubbles().count("while you were away") == 1
        assert quote_of(browser, "hi from websockets!") == "Deleted message"

        # The whole log, as the watcher saw it live, has no gap and no duplicate, and both
        # nodes' receivers agree on it.
        offsets = [m["offset"] for m in logged(watcher, room)]
        assert contiguous(offsets) is None, contiguous(offsets)

        # History on node a answers with the current state: the tombstone, the latest body
        # with its edit time, the reactions with names.
        fresh = NativeClient(a, "fresh")
        clients.append(fresh)
        fresh.subscribe(room, history_count=10)
        snapshot = eventually("four history messages", lambda: (lambda h: h if len(h) == 4 else None)(
            [m for m in fresh.received.snapshot() if m.get("type") == "history_message" and m.get("room") == room]))
        by_id = {m["id"]: m for m in snapshot}
        assert by_id[hello["id"]].get("deleted") is True and by_id[hello["id"]]["message"] is None, by_id[hello["id"]]
        assert by_id[reply["id"]]["message"] == "hi from websockets!" and by_id[reply["id"]]["edited"] > 0
        assert by_id[reply["id"]]["reply_to"] == hello["id"] and not by_id[reply["id"]].get("reactions")
        assert by_id[away["id"]]["reactions"] == [{"emoji": "❤️", "count": 1, "names": ["wendy"]}], by_id[away["id"]]
        assert by_id[back["id"]]["message"] == "back on node b" and by_id[back["id"]]["edited"] > 0

        # A reload of the page (history, not a replay) shows the same.
        browser.driver.refresh()
        browser.wait_connected()
        browser.wait_bubble("while you were away")
        assert quote_of(browser, "hi from websockets!") == "Deleted message"
        assert "back on node bedited" in browser.bubbles()
        assert not any(t.startswith("hello") for t in browser.bubbles()), browser.bubbles()
        assert chips(browser, "while you were away")[0][0] == "❤️1"
        severe = [e for e in browser.driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == [], severe
    finally:
        close_all(clients)
        if browser:
            browser.quit()
