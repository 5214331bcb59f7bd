"""The admin dashboard at /admin, driven in Debian's headless chromium (as test_browser.py
drives the chat client): sign in with the admin token, live charts, rooms and members across
doors, disconnect, ban and lift, delete a message (the chat client removes it too), close a
room. The screenshot lands in Tests/interop/artifacts/admin-dashboard.png (docs/ has a copy).

Run alone: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_admin.py
"""
import json
import os
import tempfile
import time
import urllib.request

import pytest
from selenium.webdriver.common.by import By

from parley_process import ParleyProcess
from test_browser import Browser, browsers  # noqa: F401  (the shared fixture)
from test_native import LineClient

TOKEN = "dashboard-admin-token-0123456789"
WAIT = 15


@pytest.fixture(scope="module")
def admin_server():
    directory = tempfile.mkdtemp(prefix="parley-admin-")
    config = os.path.join(directory, "parley.json")
    with open(config, "w") as handle:
        json.dump({"admin": {"token": TOKEN}}, handle)
    server = ParleyProcess(extra_args=("--config", config, "--rest-rate", "100000"))
    try:
        info = server.info
        info["base"] = "http://127.0.0.1:%d" % info["http"]
        yield info
    finally:
        server.kill()


def api(base, method, path, body=None, token=TOKEN):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + "/admin/api" + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return json.loads(response.read())


def rest_publish(base, room, body):
    request = urllib.request.Request("%s/demo/%s/publish" % (base, room), data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return json.loads(response.read())


def texts(browser, selector):
    return browser.js("return Array.from(document.querySelectorAll(arguments[0])).map(n => n.textContent);", selector)


def click_in_row(browser, rows, text, button):
    """Clicks `button` in the row of `rows` that shows `text`. The dashboard re-renders its
    lists as it refreshes, so a row found a moment ago may be gone: find and click again
    until one click lands (a stale row makes `wait` try again). Returns the row's
    `data-offset`, if any."""
    clicked = {}

    def attempt(driver):
        row = next((n for n in driver.find_elements(By.CSS_SELECTOR, rows) if text in n.text), None)
        if row is None:
            return False
        offset = row.get_attribute("data-offset")
        row.find_element(By.CSS_SELECTOR, button).click()
        clicked["offset"] = offset
        return True

    browser.wait(attempt, message="no row with %r in %s" % (text, rows))
    return clicked["offset"]


def test_dashboard_signs_in_shows_the_server_and_acts_on_it(admin_server, browsers):
    base = admin_server["base"]
    carol = LineClient(admin_server["line"])
    mallory = LineClient(admin_server["line"])
    try:
        carol.send("iam:carol\n")
        carol.read_until(lambda line: line == "carol has joined")
        mallory.send("iam:mallory\n")
        mallory.read_until(lambda line: line == "mallory has joined")
        carol.send("msg:hello from the line door\n")
        mallory.send("msg:buy cheap watches\n")
        carol.read_until(lambda line: line == "mallory:buy cheap watches")
        rest_publish(base, "observable-room", "a server notice")
        rest_publish(base, "quiet-room", "nobody here")

        # A chat client in the lobby sees the spam first.
        chat = browsers()
        chat.open(base, "watcher")
        chat.wait_bubble("buy cheap watches")

        admin = browsers(width=1280, height=900)
        admin.driver.get(base + "/admin")
        admin.wait(lambda d: d.find_element(By.ID, "token-input").is_displayed(), message="no sign-in screen")
        admin.driver.find_element(By.ID, "token-input").send_keys("not-the-token")
        admin.driver.find_element(By.ID, "login-button").click()
        admin.wait(lambda d: d.find_element(By.ID, "login-error").text == "That is not the admin token.",
                   message="a wrong token was not refused")
        field = admin.driver.find_element(By.ID, "token-input")
        field.clear()
        field.send_keys(TOKEN)
        admin.driver.find_element(By.ID, "login-button").click()
        admin.wait(lambda d: d.find_element(By.ID, "dashboard").is_displayed(), message="not signed in")

        # The overview and the charts.
        admin.wait(lambda d: d.find_element(By.ID, "version").text.startswith("Parley "), message="no version")
        admin.wait(lambda d: d.find_element(By.ID, "health").text == "ready", message="not ready")
        assert admin.driver.find_element(By.ID, "stat-doors").text.startswith("native 1 · socketio 0 · line 2")
        assert admin.driver.find_element(By.ID, "stat-push").text == "off", "no push provider on this server"
        admin.wait(lambda d: d.find_elements(By.CSS_SELECTOR, '#chart-connections polyline[data-series="line"]'),
                   message="no connections chart")
        series = admin.js("return Array.from(document.querySelectorAll('#chart-connections polyline')).map(p => p.dataset.series);")
        assert series[:3] == ["native", "socketio", "line"], series  # http too once the page's requests show
        points = admin.js("return document.querySelector('#chart-connections polyline[data-series=\"line\"]').getAttribute('points');")
        assert len(points.split()) >= 2
        assert admin.js("return document.querySelectorAll('#chart-messages polyline').length;") == 2

        # Rooms with member counts; a room's members across doors and its messages.
        admin.wait(lambda d: texts(admin, "#rooms-table tbody tr") == ["observable-room3"], message="rooms: %r" % texts(admin, "#rooms-table tbody tr"))
        admin.driver.find_element(By.CSS_SELECTOR, '#rooms-table tbody tr[data-room="observable-room"]').click()
        admin.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#members-list li[data-id]")) == 3, message="members")
        members = texts(admin, "#members-list li[data-id] strong")
        assert sorted(members) == ["carol", "mallory", "watcher"], members
        doors = sorted(texts(admin, "#members-list li[data-id] .badge"))
        assert doors == ["line", "line", "native"], doors
        admin.wait(lambda d: any("buy cheap watches" in t for t in texts(admin, "#messages-list li")), message="messages")
        # A little traffic elsewhere over a few samples (one every 5 s), so the charts have a shape.
        for n in range(24):
            rest_publish(base, "quiet-room", "tick %d" % n)
            time.sleep(0.5 if n < 12 else 0.2)
        admin.wait(lambda d: len(api(base, "GET", "/stats")["samples"]) >= 4, timeout=20, message="too few samples")
        admin.wait(lambda d: len((d.find_element(By.CSS_SELECTOR, '#chart-messages polyline').get_attribute("points") or "").split()) >= 4,
                   timeout=10, message="the charts did not refresh")
        admin.screenshot("admin-dashboard.png")

        # Delete the spam: the dashboard shows it deleted, the chat client removes it.
        offset = click_in_row(admin, "#messages-list li[data-offset]", "buy cheap watches", "button.delete")
        admin.wait(lambda d: "deleted" in d.find_element(By.CSS_SELECTOR, '#messages-list li[data-offset="%s"]' % offset).get_attribute("class"),
                   message="not shown deleted")
        admin.wait(lambda d: "was deleted" in d.find_element(By.ID, "banner").text, message="no confirmation")
        chat.wait(lambda d: "buy cheap watches" not in chat.bubbles(), message="the chat client still shows it")
        assert "hello from the line door" in chat.bubbles()
        # A client joining now gets the tombstone in its history, and shows nothing for it.
        late = browsers()
        late.open(base, "latecomer")
        late.wait_bubble("a server notice")
        assert "buy cheap watches" not in late.bubbles() and "hello from the line door" in late.bubbles()
        late.quit()

        # Disconnect carol; ban mallory by name, then lift the ban.
        click_in_row(admin, "#members-list li[data-id]", "carol", "button.disconnect")
        assert carol.read_until(lambda line: line.startswith("disconnected")) == "disconnected by an administrator: by the operator; bye"
        admin.wait(lambda d: sorted(texts(admin, "#members-list li[data-id] strong")) == ["mallory", "watcher"], message="carol still listed")
        click_in_row(admin, "#members-list li[data-id]", "mallory", "button.ban-name")
        assert "banned" in mallory.read_until(lambda line: line.startswith("disconnected"))
        admin.wait(lambda d: texts(admin, "#bans-list li strong") == ["mallory"], message="no ban listed")
        again = LineClient(admin_server["line"])
        again.send("iam:Mallory\n")
        assert again.read_line() == "error: banned from this server; bye"
        again.close()
        click_in_row(admin, "#bans-list li", "mallory", "button.lift")
        admin.wait(lambda d: d.find_element(By.ID, "bans-empty").is_displayed(), message="the ban was not lifted")
        assert api(base, "GET", "/bans")["bans"] == []

        # Close the lobby: the chat client is told, the room empties.
        admin.driver.find_element(By.ID, "close-room").click()
        admin.wait(lambda d: "was closed" in d.find_element(By.ID, "banner").text, message="no confirmation")
        deadline = time.time() + WAIT
        while api(base, "GET", "/channels/demo/rooms/observable-room/members")["total"] > 1 and time.time() < deadline:
            time.sleep(0.1)
        assert api(base, "GET", "/channels/demo/rooms/observable-room/members")["total"] <= 1

        # Signing out forgets the token.
        admin.driver.find_element(By.ID, "signout").click()
        admin.wait(lambda d: d.find_element(By.ID, "token-input").is_displayed(), message="still signed in")
        assert admin.js("return sessionStorage.getItem('parley-admin-token');") is None
    finally:
        carol.close()
        mallory.close()


def test_dashboard_assets_have_a_strict_policy(admin_server):
    for path, kind in [("/admin", "text/html"), ("/admin/admin.js", "text/javascript"), ("/admin/admin.css", "text/css")]:
        with urllib.request.urlopen(admin_server["base"] + path, timeout=WAIT) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith(kind)
            assert "default-src 'self'" in response.headers["Content-Security-Policy"]
            assert response.headers["X-Frame-Options"] == "DENY"
