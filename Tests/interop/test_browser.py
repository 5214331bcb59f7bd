"""Browser tests: the web client served at / by Parley, driven in Debian's headless chromium.

Needs `chromium chromium-driver` (Debian) and selenium (requirements.txt); `make test` installs
both. Screenshots land in Tests/interop/artifacts/ (git-ignored).
Run alone: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_browser.py
"""
import contextlib
import json
import os
import signal
import tempfile
import time
import urllib.request

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from parley_process import ParleyProcess
from test_native import LineClient, server as native_server  # noqa: F401  (the shared fixture)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT = 15
ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "artifacts")
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# `make test` installs chromium and chromium-driver; without them these tests fail (they are
# never skipped), so a missing install step cannot hide behind a green run.


@pytest.fixture(scope="module")
def server(request):
    """test_native's server fixture, started from an unrelated working directory: the binary
    must find its embedded web client wherever it is run from."""
    if not os.environ.get("PARLEY_BIN"):
        release = os.path.join(REPO, ".build", "release", "parley")
        os.environ["PARLEY_BIN"] = release if os.path.exists(release) else os.path.join(REPO, ".build", "debug", "parley")
    os.environ["PARLEY_BIN"] = os.path.abspath(os.environ["PARLEY_BIN"])
    previous = os.getcwd()
    os.chdir(tempfile.gettempdir())
    try:
        info = request.getfixturevalue("native_server")
    finally:
        os.chdir(previous)
    info["base"] = "http://127.0.0.1:%d" % info["http"]
    return info


@contextlib.contextmanager
def own_server(*flags):
    """A `parley serve` of the test's own, with `flags`; yields its base URL and stops it after."""
    proc = ParleyProcess(extra_args=list(flags), loops=1, cwd=tempfile.gettempdir())
    try:
        yield "http://127.0.0.1:%d" % proc.ports["http"]
    finally:
        proc.kill()


class Browser:
    """One headless chromium (its own profile, so its own localStorage)."""

    def __init__(self, width=1280, height=800, mobile=False, dark=False):
        options = Options()
        options.binary_location = CHROMIUM
        for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--window-size=%d,%d" % (width, height), "--lang=en-US", "--hide-scrollbars",
                    "--no-first-run", "--disable-extensions"]:
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.closed = False
        self.service = Service(CHROMEDRIVER)
        self.driver = webdriver.Chrome(service=self.service, options=options)
        self.driver.set_page_load_timeout(WAIT)
        self.driver.set_script_timeout(WAIT)
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 2 if mobile else 1, "mobile": mobile})
        self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})

    def wait(self, condition, timeout=WAIT, message=""):
        def safe(driver):
            try:
                return condition(driver)
            except StaleElementReferenceException:
                return False
        return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(safe, message)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def open(self, base, name, color="#d81b60", room=None, dialog_screenshot=None):
        """First visit: the identity dialog, then connected to the room."""
        self.driver.get(base + "/" + ("#" + room if room else ""))
        name_input = self.wait(lambda d: d.find_element(By.ID, "name-input").is_displayed() and d.find_element(By.ID, "name-input"),
                               message="identity dialog not shown")
        suggested = name_input.get_attribute("value")
        assert suggested and suggested.islower() and suggested.isalpha(), suggested
        name_input.clear()
        name_input.send_keys(name)
        self.js("const c = document.getElementById('color-input'); c.value = arguments[0];"
                "c.dispatchEvent(new Event('input'));", color)
        if dialog_screenshot:
            self.screenshot(dialog_screenshot)
        self.driver.find_element(By.ID, "identity-save").click()
        self.wait_connected()

    def wait_connected(self):
        self.wait(lambda d: d.find_element(By.ID, "status-text").text == "Connected",
                  message="never connected: %s / %s" % (self.status(), self.error_text()))

    def status(self):
        return self.driver.find_element(By.ID, "status-text").text

    def error_text(self):
        return self.js("const e = document.getElementById('error'); return e.hidden ? '' : document.getElementById('error-text').textContent.trim();")

    def say(self, text):
        """Types `text` (Shift+Enter between lines) and sends it with Enter."""
        box = self.driver.find_element(By.ID, "composer")
        for index, line in enumerate(text.split("\n")):
            if index:
                ActionChains(self.driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
            box.send_keys(line)
        box.send_keys(Keys.ENTER)

    def bubbles(self):
        return self.js("return Array.from(document.querySelectorAll('#messages .bubble')).map(b => b.textContent);")

    def messages(self):
        """[(sender name, text, own)] for every message shown."""
        return self.js("""return Array.from(document.querySelectorAll('#messages .message')).map(m =>
            [m.querySelector('.meta .name').textContent, m.querySelector('.bubble').textContent,
             m.classList.contains('own')]);""")

    def notices(self):
        return self.js("return Array.from(document.querySelectorAll('#messages .notice')).map(n => n.textContent);")

    def members(self):
        return self.js("return Array.from(document.querySelectorAll('#members .member-name')).map(n => n.textContent);")

    def wait_bubble(self, text):
        return self.wait(lambda d: text in self.bubbles(), message="no bubble %r in %r" % (text, self.bubbles()))

    def screenshot(self, name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name)
        self.driver.save_screenshot(path)
        return path

    def quit(self):
        if self.closed:
            return
        self.closed = True
        pid = self.service.process.pid if self.service.process else None
        try:
            self.driver.quit()
        except WebDriverException:
            pass
        if pid:  # chromedriver, by its own pid, in case quit did not end it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


@pytest.fixture
def browsers():
    opened = []

    def make(**kwargs):
        b = Browser(**kwargs)
        opened.append(b)
        return b
    yield make
    for b in opened:
        b.quit()


def http_get(base, path):
    with urllib.request.urlopen(base + path, timeout=WAIT) as response:
        return response.status, response.headers, response.read()


def rest_publish(base, room, body):
    data = json.dumps(body).encode()
    request = urllib.request.Request("%s/demo/%s/publish" % (base, room), data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        assert response.status == 200


# Message actions in the page (hover a bubble, press an action; read quotes and chips).


def row(b, text):
    """The `.message` row whose bubble starts with `text`."""
    return b.wait(lambda d: d.execute_script(
        "return Array.from(document.querySelectorAll('#messages .message')).find(m => "
        "m.querySelector('.bubble').firstChild && m.querySelector('.bubble').firstChild.textContent === arguments[0]);", text),
        message="no message %r" % text)


def hover_click(b, text, action):
    """Hovers the message starting with `text` and presses its `action` button (reply, react,
    edit, delete); returns the row."""
    node = row(b, text)
    ActionChains(b.driver).move_to_element(node.find_element(By.CSS_SELECTOR, ".bubble")).perform()
    button = b.wait(lambda d: node.find_element(By.CSS_SELECTOR, ".actions ." + action).is_displayed()
                    and node.find_element(By.CSS_SELECTOR, ".actions ." + action))
    button.click()
    return node


def fresh(read, tries=5):
    """`read()`, again when the page re-rendered the row between finding and reading it."""
    for attempt in range(tries):
        try:
            return read()
        except StaleElementReferenceException:
            if attempt == tries - 1:
                raise
            time.sleep(0.05)


def quote_of(b, text):
    """The text of the quote above a reply, or None."""
    return fresh(lambda: b.js("const q = arguments[0].querySelector('.quote'); return q ? q.textContent : null;", row(b, text)))


def chips(b, text):
    """[chip text, title (who reacted), aria-pressed] of each reaction chip."""
    return fresh(lambda: b.js("return Array.from(arguments[0].querySelectorAll('.chip')).map(c => "
                              "[c.textContent, c.title, c.getAttribute('aria-pressed')]);", row(b, text)))


def test_assets_served_with_content_types(server):
    status, headers, body = http_get(server["base"], "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'id="composer"' in body and b"app.js" in body
    assert http_get(server["base"], "/app.js")[1]["Content-Type"].startswith("text/javascript")
    assert http_get(server["base"], "/style.css")[1]["Content-Type"].startswith("text/css")
    with pytest.raises(urllib.error.HTTPError) as missing:
        http_get(server["base"], "/no-such-file.js")
    assert missing.value.code == 404


def test_two_browsers_chat_with_members_typing_and_notices(server, browsers):
    room = "observable-browsers"
    alice = browsers()
    alice.open(server["base"], "alice", "#e53935", room=room)
    alice.wait(lambda d: alice.members() == ["alice"])
    bob = browsers()
    bob.open(server["base"], "bob", "#1e88e5", room=room)

    # Both see both in the members panel, with the online count.
    alice.wait(lambda d: sorted(alice.members()) == ["alice", "bob"], message=str(alice.members()))
    bob.wait(lambda d: sorted(bob.members()) == ["alice", "bob"], message=str(bob.members()))
    assert alice.driver.find_element(By.ID, "online-count").text == "2"
    alice.wait(lambda d: "bob joined" in alice.notices(), message=str(alice.notices()))

    # Typing indicator, then it goes away when the message arrives.
    bob.driver.find_element(By.ID, "composer").send_keys("hel")
    alice.wait(lambda d: d.find_element(By.ID, "typing").text == "bob is typing…",
               message="typing: %r" % alice.driver.find_element(By.ID, "typing").text)
    assert bob.driver.find_element(By.ID, "typing").text == ""  # never your own
    bob.driver.find_element(By.ID, "composer").send_keys("lo alice", Keys.ENTER)
    alice.wait_bubble("hello alice")
    alice.wait(lambda d: d.find_element(By.ID, "typing").text == "")
    assert ["bob", "hello alice", False] in alice.messages()

    # And back, with Shift+Enter for a second line; the sender sees it on the right.
    box = alice.driver.find_element(By.ID, "composer")
    box.send_keys("hi bob")
    ActionChains(alice.driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    box.send_keys("how are you?", Keys.ENTER)
    bob.wait_bubble("hi bob\nhow are you?")
    alice.wait(lambda d: ["alice (you)", "hi bob\nhow are you?", True] in alice.messages(), message=str(alice.messages()))
    assert box.get_attribute("value") == ""

    # Both typing at once.
    carol = browsers()
    carol.open(server["base"], "carol", "#43a047", room=room)
    alice.driver.find_element(By.ID, "composer").send_keys("x")
    bob.driver.find_element(By.ID, "composer").send_keys("y")
    carol.wait(lambda d: d.find_element(By.ID, "typing").text in ("alice, bob are typing…", "bob, alice are typing…"),
               message=carol.driver.find_element(By.ID, "typing").text)

    # No script errors, no CSP violations, no failed requests.
    for b in (alice, bob):
        severe = [e for e in b.driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == [], severe

    # Leaving: the others get a notice and the panel shrinks.
    bob.quit()
    alice.wait(lambda d: "bob left" in alice.notices(), message=str(alice.notices()))
    alice.wait(lambda d: sorted(alice.members()) == ["alice", "carol"])
    carol.wait(lambda d: carol.driver.find_element(By.ID, "typing").text in ("alice is typing…", ""))


def test_line_protocol_user_and_browser(server, browsers):
    dora = browsers()
    dora.open(server["base"], "dora", "#8e24aa")  # default room: the line door's lobby
    assert dora.driver.find_element(By.ID, "room-name").text == "#observable-room"
    carol = LineClient(server["line"])
    try:
        carol.send("iam:carol\n")
        assert carol.read_line() == "carol has joined"
        dora.wait(lambda d: "carol" in dora.members(), message=str(dora.members()))
        dora.wait(lambda d: "carol joined" in dora.notices())
        # The tab is in the background: unread messages count up in the title.
        dora.js("Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});"
                "document.dispatchEvent(new Event('visibilitychange'));")
        carol.send("msg:hi from the terminal: <b>plain</b>\n")
        dora.wait_bubble("hi from the terminal: <b>plain</b>")
        dora.wait(lambda d: d.title == "(1) #observable-room · Parley", message=dora.driver.title)
        dora.js("delete document.hidden; document.dispatchEvent(new Event('visibilitychange'));")
        dora.wait(lambda d: d.title == "#observable-room · Parley", message=dora.driver.title)
        assert ["carol", "hi from the terminal: <b>plain</b>", False] in dora.messages()
        assert dora.js("return document.querySelectorAll('#messages .bubble b').length") == 0
        dora.say("hello carol")
        assert carol.read_until(lambda line: line.startswith("dora:")) == "dora:hello carol"
    finally:
        carol.close()
    dora.wait(lambda d: "carol left" in dora.notices(), message=str(dora.notices()))


def test_reload_keeps_identity_and_shows_history(server, browsers):
    erin = browsers()
    erin.open(server["base"], "erin", "#00897b", room="observable-reload")
    erin.say("before the reload")
    erin.say('{"not": "json, just text"}')
    erin.wait_bubble("before the reload")
    erin.driver.refresh()
    erin.wait_connected()  # no identity dialog this time
    assert not erin.driver.find_element(By.ID, "identity-dialog").is_displayed()
    assert erin.driver.find_element(By.ID, "identity-name").text == "erin"
    erin.wait(lambda d: ["erin (you)", "before the reload", True] in erin.messages(), message=str(erin.messages()))
    assert erin.bubbles().count("before the reload") == 1
    assert '{"not": "json, just text"}' in erin.bubbles()
    assert erin.driver.find_element(By.ID, "room-name").text == "#observable-reload"

    # Switching rooms by name updates the hash and starts with that room's history.
    room_input = erin.driver.find_element(By.ID, "room-input")
    room_input.send_keys("elsewhere", Keys.ENTER)
    erin.wait(lambda d: d.current_url.endswith("#elsewhere"))
    erin.wait(lambda d: d.find_element(By.ID, "room-name").text == "#elsewhere")
    erin.wait_connected()
    assert erin.bubbles() == []
    erin.say("in another room")
    erin.wait_bubble("in another room")
    erin.driver.back()
    erin.wait(lambda d: d.find_element(By.ID, "room-name").text == "#observable-reload")
    erin.wait_bubble("before the reload")
    assert "in another room" not in erin.bubbles()


def test_html_is_rendered_as_text_and_links_are_safe(server, browsers):
    frank = browsers()
    frank.open(server["base"], "frank", "#f4511e", room="observable-xss")
    attack = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    frank.say(attack)
    frank.say("docs at https://example.com/a?b=1. and javascript:alert(1) and http://x.test/(y)")
    frank.wait_bubble(attack)
    assert frank.js("return window.pwned === undefined")
    assert frank.js("return document.querySelectorAll('#messages script, #messages img').length") == 0
    frank.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages .bubble a")) == 2)
    links = frank.js("""return Array.from(document.querySelectorAll('#messages .bubble a')).map(a =>
        [a.getAttribute('href'), a.textContent, a.rel, a.target]);""")
    assert links[0][:2] == ["https://example.com/a?b=1", "https://example.com/a?b=1"]
    assert links[1][:2] == ["http://x.test/(y)", "http://x.test/(y)"]
    assert all("noopener" in link[2] and link[3] == "_blank" for link in links)

    # Too long: said in plain words, and the text stays in the box.
    frank.js("document.getElementById('composer').value = 'x'.repeat(10001)")
    frank.driver.find_element(By.ID, "composer").send_keys(Keys.ENTER)
    frank.wait(lambda d: "too long" in frank.error_text(), message=frank.error_text())
    assert len(frank.driver.find_element(By.ID, "composer").get_attribute("value")) == 10001
    frank.js("document.getElementById('composer').value = ''")
    frank.driver.find_element(By.ID, "error-close").click()
    assert frank.error_text() == ""

    # Bodies from other clients: non-string JSON as compact JSON, typing never shown.
    rest_publish(server["base"], "observable-xss", {"kind": "card", "n": [1, 2]})
    rest_publish(server["base"], "observable-xss", {"typing": True})
    rest_publish(server["base"], "observable-xss", "<i>rest</i>")
    frank.wait_bubble("<i>rest</i>")
    bubbles = frank.bubbles()
    assert '{"kind":"card","n":[1,2]}' in bubbles
    assert not any("typing" in b for b in bubbles)


def test_rate_limit_is_explained(browsers):
    # A server of its own with a low publish rate (5/s, burst 10). Each submit costs the page
    # a layout, so on a busy machine 150 of them took longer than the default rate (50/s, burst
    # 100) needed to refill, and nothing was refused. At 5/s they would have to take 28 s.
    with own_server("--publish-rate", "5") as base:
        kim = browsers()
        kim.open(base, "kim", "#c2255c", room="observable-flood")
        # Far past the burst, in one go: the server refuses the excess.
        kim.js("""const box = document.getElementById('composer'), form = document.getElementById('composer-form');
            for (let i = 0; i < 150; i++) { box.value = 'flood ' + i; form.requestSubmit(); }""")
        kim.wait(lambda d: "too fast" in kim.error_text(), message=kim.error_text())
        kim.wait_bubble("flood 0")


def test_history_paging_feature_detected(server, browsers):
    room = "observable-paging"
    for i in range(70):
        rest_publish(server["base"], room, "old message %d" % i)
    grace = browsers(width=1280, height=800)
    grace.open(server["base"], "grace", "#6d4c41", room=room)
    grace.wait_bubble("old message 69")
    grace.wait(lambda d: len(grace.bubbles()) >= 50)
    grace.js("document.getElementById('log').scrollTop = 0;")
    # With the durability extension the client pages back to the very first message; without
    # it, the server's error switches paging off and the 50 newest stay shown.
    grace.wait(lambda d: "old message 0" in grace.bubbles() or grace.js("return window.parley.state.historySupported === false"),
               message="paging neither worked nor was switched off")
    if "old message 0" in grace.bubbles():
        assert grace.bubbles()[:3] == ["old message 0", "old message 1", "old message 2"]
        assert len(grace.bubbles()) == 70
    else:
        assert len(grace.bubbles()) == 50
        assert grace.error_text() == ""  # an unknown-type reply is not the person's problem
    grace.say("still works")
    grace.wait_bubble("still works")


def test_reconnect_after_server_restart_and_plain_error(browsers):
    """A server of its own: killed (by pid) and restarted on the same port."""
    data_dir = tempfile.mkdtemp(prefix="parley-browser-")

    def start(port):
        server = ParleyProcess(http_port=port, data_dir=data_dir, loops=1, cwd=tempfile.gettempdir())
        return server, server.ports["http"]

    def stop(server):
        server.kill()

    proc, port = start(0)
    try:
        base = "http://127.0.0.1:%d" % port
        hana = browsers()
        hana.open(base, "hana", "#3949ab", room="observable-reconnect")
        hana.say("first")
        hana.wait_bubble("first")
        stop(proc)
        hana.wait(lambda d: d.find_element(By.ID, "status-text").text.startswith("Offline"),
                  message=hana.status())
        hana.wait(lambda d: "server" in hana.error_text().lower() or "connection" in hana.error_text().lower(),
                  message=hana.error_text())
        assert hana.members() == []  # not known while offline
        hana.screenshot("reconnecting-desktop.png")
        # Typed while offline: kept in the box, with a plain explanation.
        hana.say("while offline")
        hana.wait(lambda d: "Not connected" in hana.error_text())
        assert hana.driver.find_element(By.ID, "composer").get_attribute("value").startswith("while offline")
        hana.js("document.getElementById('composer').value = ''")
        proc, _ = start(port)
        hana.wait(lambda d: hana.status() == "Connected", timeout=30, message=hana.status())
        hana.wait(lambda d: "Reconnected" in hana.notices())
        hana.wait(lambda d: hana.members() == ["hana"])
        assert hana.error_text() == ""  # the connection error goes away by itself
        assert hana.bubbles().count("first") == 1  # de-duplicated whatever the server replays
        hana.say("second")
        hana.wait_bubble("second")
    finally:
        stop(proc)


def test_screenshots_desktop_phone_and_dark(server, browsers):
    room = "observable-showcase"
    ivy = browsers(width=1280, height=800)
    ivy.open(server["base"], "hiddensun", "#e8590c", room=room)
    jay = browsers(width=1280, height=800)
    jay.open(server["base"], "mistyriver", "#1c7ed6", room=room)
    ivy.wait(lambda d: len(ivy.members()) == 2)
    script = [
        (jay, "Hey! Is the new Parley build up yet?"),
        (ivy, "Yes, just deployed it. Open http://127.0.0.1:8080/ and pick a name."),
        (ivy, "Rooms are in the URL hash, so you can share a link to one."),
        (jay, "Nice. The typing indicator works across tabs too."),
        (jay, "And the telnet folks show up in the same room?"),
        (ivy, "They do: line users land in observable-room.\nEven multi-line messages work."),
    ]
    for who, text in script:
        who.say(text)
        ivy.wait_bubble(text)
    jay.wait_bubble(script[-1][1])
    jay.driver.find_element(By.ID, "composer").send_keys("Sounds")
    ivy.wait(lambda d: d.find_element(By.ID, "typing").text == "mistyriver is typing…")
    ivy.screenshot("desktop-1280x800.png")

    phone = browsers(width=390, height=844, mobile=True)
    phone.open(server["base"], "wildfrost", "#2f9e44", room=room, dialog_screenshot="phone-welcome-390x844.png")
    phone.wait_bubble(script[-1][1])
    time.sleep(2.6)  # typing is re-announced every 2.5 s while it goes on, so late joiners see it
    jay.driver.find_element(By.ID, "composer").send_keys(" great")
    phone.wait(lambda d: d.find_element(By.ID, "typing").text == "mistyriver is typing…")
    phone.say("Reading along on my phone, café wifi")
    phone.wait_bubble("Reading along on my phone, café wifi")
    phone.screenshot("phone-390x844.png")
    phone.driver.find_element(By.ID, "members-toggle").click()
    phone.wait(lambda d: sorted(phone.members()) == ["hiddensun", "mistyriver", "wildfrost"])
    time.sleep(0.4)  # the drawer's slide-in transition
    phone.screenshot("phone-members-390x844.png")

    dark = browsers(width=1280, height=800, dark=True)
    dark.open(server["base"], "darkstar", "#ffd43b", room=room)
    dark.wait_bubble("Reading along on my phone, café wifi")
    dark.say("Dark mode here.")
    dark.wait_bubble("Dark mode here.")
    dark.screenshot("desktop-dark-1280x800.png")
    for name in ["desktop-1280x800.png", "phone-390x844.png", "desktop-dark-1280x800.png"]:
        assert os.path.getsize(os.path.join(ARTIFACTS, name)) > 10000


# ---------------------------------------------------------------- files

DOCS = os.path.join(REPO, "docs")


def png_bytes(width, height):
    """An RGB gradient PNG (zlib from the standard library)."""
    import struct
    import zlib
    rows = []
    for y in range(height):
        row = bytearray([0])
        for x in range(width):
            row += bytes([(x * 255) // max(1, width - 1), (y * 255) // max(1, height - 1), 160])
        rows.append(bytes(row))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))


PDF = b"%PDF-1.4\n1 0 obj<< /Type /Catalog >>endobj\ntrailer<< /Root 1 0 R >>\n%%EOF\n"


def write_temp(name, data):
    directory = tempfile.mkdtemp(prefix="parley-files-")
    path = os.path.join(directory, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def tray_states(b):
    return b.js("return Array.from(document.querySelectorAll('#tray .tray-item')).map(i => "
                "[i.querySelector('.tray-name').textContent, i.classList.contains('ready')]);")


def severe_logs(b):
    return [e for e in b.driver.get_log("browser") if e["level"] == "SEVERE"]


def test_png_and_pdf_reach_the_other_browser(server, browsers):
    room = "observable-files"
    alice = browsers()
    alice.open(server["base"], "alice", "#e8590c", room=room)
    bob = browsers()
    bob.open(server["base"], "bob", "#1c7ed6", room=room)
    alice.wait(lambda d: sorted(alice.members()) == ["alice", "bob"])
    alice.say("Here are the plans for the weekend")
    bob.wait_bubble("Here are the plans for the weekend")

    photo = write_temp("lake.png", png_bytes(960, 640))
    report = write_temp("itinerary.pdf", PDF)
    # The attach button's file input (several files at once).
    alice.driver.find_element(By.ID, "file-input").send_keys(photo + "\n" + report)
    alice.wait(lambda d: tray_states(alice) == [["lake.png", True], ["itinerary.pdf", True]],
               message="uploads not ready: %r / %s" % (tray_states(alice), alice.error_text()))
    alice.say("Photo from the lake, and the itinerary")
    alice.wait(lambda d: tray_states(alice) == [] and d.find_element(By.ID, "tray").get_attribute("hidden") is not None)

    # Bob sees the picture as a thumbnail (loaded, same origin) and the PDF as a chip.
    bob.wait(lambda d: bob.js("const i = document.querySelector('#messages .attachment-image img');"
                              "return !!i && i.complete && i.naturalWidth > 0;"), message="no thumbnail shown")
    image = bob.js("const i = document.querySelector('#messages .attachment-image img');"
                   "return [i.getAttribute('src'), i.alt, i.naturalWidth, i.naturalHeight];")
    assert image[0].endswith("/thumbnail") and image[0].startswith("/demo/files/"), image
    assert image[1] == "lake.png" and image[2] == 480 and image[3] == 320, image
    chip = bob.js("const a = document.querySelector('#messages .file-chip');"
                  "return [a.getAttribute('href'), a.getAttribute('download'), a.querySelector('.file-name').textContent,"
                  " a.querySelector('.file-size').textContent];")
    assert chip[0].startswith("/demo/files/") and chip[1] == "itinerary.pdf" and chip[2] == "itinerary.pdf", chip
    assert chip[3] == "%d B" % len(PDF), chip
    assert "Photo from the lake, and the itinerary" in bob.bubbles()[-1]
    # The download link serves the PDF as an attachment, never inline.
    status, headers, body = http_get(server["base"], chip[0])
    assert status == 200 and body == PDF
    assert headers["Content-Disposition"].startswith("attachment;")
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Content-Security-Policy"] == "sandbox"
    # Alice sees her own message the same way.
    alice.wait(lambda d: alice.js("return document.querySelectorAll('#messages .message.own .attachment-image').length") == 1)
    time.sleep(0.3)  # let the thumbnails paint before the screenshot
    os.makedirs(DOCS, exist_ok=True)
    bob.driver.save_screenshot(os.path.join(DOCS, "screenshot-attachments.png"))

    # The thumbnail opens the full picture in a viewer; Esc closes it.
    bob.driver.find_element(By.CSS_SELECTOR, "#messages .attachment-image").click()
    bob.wait(lambda d: bob.js("const v = document.getElementById('viewer'), i = document.getElementById('viewer-image');"
                              "return v.open && i.complete && i.naturalWidth === 960;"), message="viewer not showing the image")
    time.sleep(0.2)
    bob.driver.save_screenshot(os.path.join(DOCS, "screenshot-image-viewer.png"))
    ActionChains(bob.driver).send_keys(Keys.ESCAPE).perform()
    bob.wait(lambda d: not bob.js("return document.getElementById('viewer').open"), message="Esc did not close the viewer")
    for b in (alice, bob):
        assert severe_logs(b) == []
    for name in ["screenshot-attachments.png", "screenshot-image-viewer.png"]:
        assert os.path.getsize(os.path.join(DOCS, name)) > 10000


def test_drop_and_paste_attach_files(server, browsers):
    carol = browsers()
    carol.open(server["base"], "carol", "#2f9e44", room="observable-drop")
    # A file dropped anywhere on the page, and an image pasted into the message box.
    carol.js("""const dt = new DataTransfer();
        dt.items.add(new File(['dropped notes'], 'notes.txt', {type: 'text/plain'}));
        const app = document.getElementById('app');
        app.dispatchEvent(new DragEvent('dragenter', {dataTransfer: dt, bubbles: true}));
        app.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));""")
    carol.wait(lambda d: tray_states(carol) == [["notes.txt", True]], message=str(tray_states(carol)))
    assert carol.js("return document.getElementById('drop').hidden")
    png = list(png_bytes(40, 30))
    carol.js("""const dt = new DataTransfer();
        dt.items.add(new File([new Uint8Array(arguments[0])], 'image.png', {type: 'image/png'}));
        document.getElementById('composer').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true}));""", png)
    carol.wait(lambda d: tray_states(carol) == [["notes.txt", True], ["image.png", True]], message=str(tray_states(carol)))
    carol.driver.find_element(By.ID, "composer").send_keys(Keys.ENTER)  # files alone, no caption
    carol.wait(lambda d: carol.js("return document.querySelectorAll('#messages .file-chip, #messages .attachment-image').length") == 2)


def test_upload_progress_cancel_and_errors_in_the_page(browsers):
    """A server of its own with a 100 kB limit."""
    with own_server("--max-upload-size", "100000") as base:
        dana = browsers()
        dana.open(base, "dana", "#ae3ec9", room="observable-errors")
        box = dana.driver.find_element(By.ID, "file-input")
        # Too big: said in the page, nothing left in the tray.
        box.send_keys(write_temp("huge.txt", b"x" * 300000))
        dana.wait(lambda d: "too big" in dana.error_text(), message=dana.error_text())
        assert "huge.txt" in dana.error_text() and tray_states(dana) == []
        dana.driver.find_element(By.ID, "error-close").click()
        # A type the server does not take.
        box.send_keys(write_temp("setup.exe", b"MZ\x90\x00" + b"\x00" * 500))
        dana.wait(lambda d: "can't be sent here" in dana.error_text(), message=dana.error_text())
        dana.driver.find_element(By.ID, "error-close").click()

        # Progress and cancel: the upload is slowed down to 20 kB/s.
        dana.driver.execute_cdp_cmd("Network.enable", {})
        dana.driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 20 * 1024})
        box.send_keys(write_temp("slow.txt", b"y" * 90000))
        dana.wait(lambda d: dana.js("const p = document.querySelector('#tray progress'); return !!p && p.value > 0 && p.value < 1;"),
                  message="no progress shown: %r" % tray_states(dana))
        state = dana.js("return document.querySelector('#tray .tray-state').textContent")
        assert "%" in state, state
        dana.driver.save_screenshot(os.path.join(DOCS, "screenshot-upload-progress.png"))
        dana.driver.find_element(By.CSS_SELECTOR, "#tray .tray-cancel").click()
        dana.wait(lambda d: tray_states(dana) == [])
        dana.driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        assert dana.bubbles() == []  # nothing was sent
        assert dana.error_text() == ""


def test_replies_edits_deletes_and_reactions(server, browsers):
    """Hover actions on a message: reply (quoted above), react (chips with counts and names),
    edit and delete your own; every change reaches the other browser and survives a reload."""
    room = "observable-actions"
    alice = browsers()
    alice.open(server["base"], "alice", "#e53935", room=room)
    bob = browsers()
    bob.open(server["base"], "bob", "#1e88e5", room=room)
    alice.wait(lambda d: sorted(alice.members()) == ["alice", "bob"], message=str(alice.members()))
    bob.say("hello alice")
    alice.wait_bubble("hello alice")

    # Another member's message offers reply and react only.
    node = row(alice, "hello alice")
    ActionChains(alice.driver).move_to_element(node.find_element(By.CSS_SELECTOR, ".bubble")).perform()
    assert alice.js("return Array.from(arguments[0].querySelectorAll('.actions > .action')).map(b => b.getAttribute('aria-label'));",
                    node) == ["Reply", "Add a reaction"]

    # Reply: the composer says what it answers; the reply shows the quote on both sides.
    hover_click(alice, "hello alice", "reply")
    alice.wait(lambda d: d.find_element(By.ID, "composer-context-text").text == "Replying to bob: hello alice")
    alice.say("hi bob")
    for b in (alice, bob):
        b.wait(lambda d: quote_of(b, "hi bob") == "bobhello alice", message=str(b.bubbles()))
    assert not alice.driver.find_element(By.ID, "composer-context").is_displayed()

    # React from the picker: a chip with the count, names on hover, pressed for the reactor.
    node = hover_click(alice, "hello alice", "react")
    alice.wait(lambda d: node.find_element(By.CSS_SELECTOR, ".picker").is_displayed())
    node.find_element(By.CSS_SELECTOR, ".picker .pick[aria-label='React with 👍']").click()
    alice.wait(lambda d: chips(alice, "hello alice") == [["👍1", "alice reacted with 👍", "true"]], message=str(chips(alice, "hello alice")))
    bob.wait(lambda d: chips(bob, "hello alice") == [["👍1", "alice reacted with 👍", "false"]], message=str(chips(bob, "hello alice")))
    # Bob taps the chip: he joins in; a second tap takes his back.
    row(bob, "hello alice").find_element(By.CSS_SELECTOR, ".chip").click()
    alice.wait(lambda d: chips(alice, "hello alice") == [["👍2", "alice, bob reacted with 👍", "true"]], message=str(chips(alice, "hello alice")))
    bob.wait(lambda d: chips(bob, "hello alice") == [["👍2", "alice, bob reacted with 👍", "true"]])
    row(bob, "hello alice").find_element(By.CSS_SELECTOR, ".chip").click()
    alice.wait(lambda d: chips(alice, "hello alice") == [["👍1", "alice reacted with 👍", "true"]])

    # Bob edits his own message: the composer holds its text; both see it edited, and the
    # quote above alice's reply follows.
    hover_click(bob, "hello alice", "edit")
    bob.wait(lambda d: d.find_element(By.ID, "composer").get_attribute("value") == "hello alice")
    assert bob.driver.find_element(By.ID, "composer-context-text").text == "Editing your message"
    bob.driver.find_element(By.ID, "composer").send_keys("!", Keys.ENTER)
    for b in (alice, bob):
        b.wait(lambda d: "hello alice!edited" in b.bubbles(), message=str(b.bubbles()))
        b.wait(lambda d: quote_of(b, "hi bob") == "bobhello alice!")
    alice.wait(lambda d: chips(alice, "hello alice!") == [["👍1", "alice reacted with 👍", "true"]])
    os.makedirs(DOCS, exist_ok=True)
    alice.driver.save_screenshot(os.path.join(DOCS, "screenshot-message-actions.png"))

    # Alice's connection drops; while she is away bob writes, reacts on her reply and edits
    # again. Her resume (`since`) brings all of it, in order, once.
    alice.js("window.parley.state.attempt = 6; window.parley.state.ws.close();")
    alice.wait(lambda d: d.find_element(By.ID, "error-retry").is_displayed(), message="no retry button")
    bob.say("missed me?")
    node = hover_click(bob, "hi bob", "react")
    bob.wait(lambda d: node.find_element(By.CSS_SELECTOR, ".picker").is_displayed())
    node.find_element(By.CSS_SELECTOR, ".picker .pick[aria-label='React with 🎉']").click()
    bob.wait(lambda d: chips(bob, "hi bob") == [["🎉1", "bob reacted with 🎉", "true"]])
    hover_click(bob, "hello alice!", "edit")
    box = bob.driver.find_element(By.ID, "composer")
    box.clear()
    box.send_keys("hello again", Keys.ENTER)
    bob.wait(lambda d: "hello againedited" in bob.bubbles())
    alice.driver.find_element(By.ID, "error-retry").click()
    alice.wait_connected()
    alice.wait(lambda d: "missed me?" in alice.bubbles() and "hello againedited" in alice.bubbles(), message=str(alice.bubbles()))
    alice.wait(lambda d: chips(alice, "hi bob") == [["🎉1", "bob reacted with 🎉", "false"]], message=str(chips(alice, "hi bob")))
    assert quote_of(alice, "hi bob") == "bobhello again"
    assert chips(alice, "hello again") == [["👍1", "alice reacted with 👍", "true"]]
    assert alice.bubbles().count("missed me?") == 1

    # Bob deletes it (after confirming): it leaves both pages; the quote says it was deleted.
    hover_click(bob, "hello again", "delete")
    bob.wait(lambda d: d.switch_to.alert).accept()
    for b in (alice, bob):
        b.wait(lambda d: not any(t.startswith("hello a") for t in b.bubbles()), message=str(b.bubbles()))
        b.wait(lambda d: quote_of(b, "hi bob") == "Deleted message")

    # A reload shows the same from history.
    alice.driver.refresh()
    alice.wait_connected()
    alice.wait_bubble("hi bob")
    assert quote_of(alice, "hi bob") == "Deleted message"
    assert not any(t.startswith("hello a") for t in alice.bubbles())
    severe = [e for b in (alice, bob) for e in b.driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe
