"""The browser client's Web Push in Debian's headless chromium: the permission is asked for
only when the user presses the button, the service worker (sw.js) is registered then, the
subscription reaches the server, the server's encrypted push reaches a local push service
(decrypted there by `http-ece`, as a browser's push service would hand it on), and the
service worker shows it as a notification that leads to the room.

What stands in for what cannot run here: the browser's own push service (Chrome's is Google's,
outside 127.0.0.0/8). `PushManager.subscribe` is replaced in the page by one that returns a
subscription to the local push service, and the decrypted payload is handed to the real
service worker through the DevTools protocol (`ServiceWorker.deliverPushMessage`), as the
browser does with what its push service delivers. Everything else is the real page, worker
and server.

Run alone: PARLEY_BIN=.build/release/parley .venv-interop/bin/pytest -q Tests/interop/test_browser_push.py
"""
import base64
import json
import time

from cluster_support import close_all, eventually
from test_browser import browsers  # noqa: F401  (fixture)
from test_push import ADMIN_TOKEN, Subscription, device, push_service, start, vapid_keys  # noqa: F401  (fixture)

REPLACE_SUBSCRIBE = """
const sub = arguments[0];
const local = { endpoint: sub.endpoint, expirationTime: null, toJSON() { return sub; },
  unsubscribe: async () => { window.__localSubscription = null; return true; } };
PushManager.prototype.subscribe = async function (options) {
  window.__subscribeOptions = { userVisibleOnly: options.userVisibleOnly,
    key: btoa(String.fromCharCode.apply(null, new Uint8Array(options.applicationServerKey))) };
  window.__localSubscription = local;
  return local;
};
PushManager.prototype.getSubscription = async function () { return window.__localSubscription || null; };
"""

NOTIFICATIONS = """const done = arguments[arguments.length - 1];
navigator.serviceWorker.ready.then((r) => r.getNotifications())
  .then((ns) => done(ns.map((n) => ({ title: n.title, body: n.body, tag: n.tag, data: n.data }))))
  .catch((e) => done('error: ' + e));"""


def push_button(b):
    return b.js("const x = document.getElementById('push-button'); return [document.getElementById('push-panel').hidden,"
                " x.textContent, x.getAttribute('aria-pressed'), document.getElementById('push-note').textContent];")


def test_notifications_are_asked_for_on_a_click_and_shown_by_the_service_worker(push_service, browsers):
    keys = vapid_keys()
    server = start(push_service, keys, coalesce_ms=300)
    base = "http://127.0.0.1:%d" % server.ports["http"]
    clients = []
    try:
        bob = browsers()
        bob.driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": base, "permissions": ["notifications"]})
        bob.open(base, "bob", "#1e88e5", room="observable-push")
        bob.wait(lambda d: push_button(bob)[0] is False, message=str(push_button(bob)))
        hidden, text, pressed, _ = push_button(bob)
        assert text == "Notify me when I'm away" and pressed == "false"
        # Nothing was asked or registered on page load.
        assert bob.driver.execute_async_script("const done = arguments[arguments.length - 1];"
                                               "navigator.serviceWorker.getRegistration('/').then((r) => done(!!r));") is False

        subscription = Subscription(push_service, "bob-browser")
        bob.js(REPLACE_SUBSCRIBE, subscription.json)
        bob.driver.find_element("id", "push-button").click()
        bob.wait(lambda d: push_button(bob)[2] == "true", message=str(push_button(bob)))
        options = bob.js("return window.__subscribeOptions;")
        assert options["userVisibleOnly"] is True
        assert base64.b64decode(options["key"]) == base64.urlsafe_b64decode(keys[0] + "=" * (-len(keys[0]) % 4)), \
            "the browser subscribes with the server's VAPID key"
        assert bob.driver.execute_async_script("const done = arguments[arguments.length - 1];"
                                               "navigator.serviceWorker.getRegistration('/').then((r) => done(r ? r.active && r.active.scriptURL : null));") \
            == base + "/sw.js"

        # Bob goes to another room; Alice writes in this one: the server pushes to Bob's browser.
        bob.js("location.hash = '#elsewhere';")
        bob.wait(lambda d: bob.js("return window.parley.state.room;") == "elsewhere")
        bob.wait_connected()
        alice = device(server, "alice", room="observable-push")
        clients.append(alice)
        time.sleep(0.3)
        alice.request({"type": "publish", "room": "observable-push", "message": "are you around?"})
        eventually("the push to bob's browser", lambda: push_service.requests("bob-browser"))
        payload = subscription.open(push_service.requests("bob-browser")[0])
        assert payload["title"] == "#observable-push" and payload["body"] == "Alice: are you around?", payload

        # What the push service delivers, the service worker shows.
        bob.driver.execute_cdp_cmd("ServiceWorker.enable", {})
        shown = []

        def delivered():
            # A fresh profile's first registration: its id is small; an unknown id is ignored.
            for registration in range(4):
                bob.driver.execute_cdp_cmd("ServiceWorker.deliverPushMessage", {
                    "origin": base + "/", "registrationId": str(registration), "data": json.dumps(payload)})
                time.sleep(0.2)
                shown[:] = bob.driver.execute_async_script(NOTIFICATIONS)
                if shown:
                    return True
            return False

        eventually("the notification", delivered, timeout=10)
        assert len(shown) == 1, shown
        note = shown[0]
        assert note["title"] == "#observable-push" and note["body"] == "Alice: are you around?" and note["tag"] == "observable-push", note
        assert note["data"]["url"] == "/#observable-push" and note["data"]["room"] == "observable-push", note
        # A click on it sends the open page to the room (the worker posts this message).
        bob.js("navigator.serviceWorker.dispatchEvent(new MessageEvent('message', {data: "
               "{type: 'parley-open-room', channel: 'demo', room: 'observable-push'}}));")
        bob.wait(lambda d: bob.js("return window.parley.state.room;") == "observable-push")
        bob.wait_bubble("are you around?")

        # The admin dashboard shows the push queue and what was sent.
        admin = browsers()
        admin.driver.get(base + "/admin/")
        admin.wait(lambda d: d.find_element("id", "token-input").is_displayed())
        admin.driver.find_element("id", "token-input").send_keys(ADMIN_TOKEN)
        admin.driver.find_element("id", "login-button").click()
        admin.wait(lambda d: d.find_element("id", "stat-push").text == "0", message=admin.js("return document.getElementById('stat-push').textContent;"))
        detail = admin.driver.find_element("id", "stat-push-detail").text
        assert detail == "of 100000 · sent 1 · failed 0 · removed 0", detail

        # Turned off: the device is unregistered, and nothing more is pushed to it.
        bob.driver.find_element("id", "push-button").click()
        bob.wait(lambda d: push_button(bob)[2] == "false", message=str(push_button(bob)))
        bob.js("location.hash = '#elsewhere';")
        bob.wait(lambda d: bob.js("return window.parley.state.room;") == "elsewhere")
        bob.wait_connected()
        alice.request({"type": "publish", "room": "observable-push", "message": "never mind"})
        time.sleep(1.5)
        assert len(push_service.requests("bob-browser")) == 1, "no push after turning notifications off"
    finally:
        close_all(clients)
        server.kill()


def test_no_button_without_vapid_keys(browsers):
    from test_browser import own_server
    with own_server() as base:
        b = browsers()
        b.open(base, "carol", room="observable-nopush")
        time.sleep(0.5)
        assert push_button(b)[0] is True, "push is off on this server: no button"
