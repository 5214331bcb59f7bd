// Parley's service worker: shows the Web Push notifications the server sends for rooms you
// are away from (docs/push.md), and opens the right room when you click one.
//
// The payload is JSON: { title, body, tag, badge, data: { channel, room, offset, id } }. The
// tag is the room, so a newer notification of a room replaces the older one.
"use strict";

const DEFAULT_CHANNEL = "demo";

// "#room" for the default channel, "#channel/room" otherwise (as the page's own links).
function roomURL(data) {
  const channel = data && typeof data.channel === "string" ? data.channel : DEFAULT_CHANNEL;
  const room = data && typeof data.room === "string" && data.room ? data.room : "observable-room";
  return "/#" + (channel === DEFAULT_CHANNEL ? "" : encodeURIComponent(channel) + "/") + encodeURIComponent(room);
}

// What showNotification is given for one push payload (bounded: a payload is at most 4 KiB).
function notificationFor(payload) {
  const p = payload && typeof payload === "object" ? payload : {};
  const title = typeof p.title === "string" && p.title ? p.title.slice(0, 200) : "Parley";
  const data = p.data && typeof p.data === "object" ? p.data : {};
  return {
    title: title,
    options: {
      body: typeof p.body === "string" ? p.body.slice(0, 500) : "New message",
      tag: typeof p.tag === "string" ? p.tag : roomURL(data),
      renotify: true,
      icon: "/favicon.svg",
      data: { channel: data.channel, room: data.room, offset: data.offset, id: data.id, url: roomURL(data) },
    },
    badge: Number.isInteger(p.badge) && p.badge >= 0 ? p.badge : null,
  };
}

if (typeof ServiceWorkerGlobalScope !== "undefined" && self instanceof ServiceWorkerGlobalScope) {
  self.addEventListener("install", () => self.skipWaiting());
  self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

  self.addEventListener("push", (event) => {
    let payload = null;
    try { payload = event.data ? event.data.json() : null; } catch (e) { payload = { body: event.data ? event.data.text() : "" }; }
    const shown = notificationFor(payload);
    const work = [self.registration.showNotification(shown.title, shown.options)];
    if (shown.badge !== null && self.navigator.setAppBadge) work.push(self.navigator.setAppBadge(shown.badge).catch(() => {}));
    event.waitUntil(Promise.all(work));
  });

  self.addEventListener("notificationclick", (event) => {
    event.notification.close();
    const data = event.notification.data || {};
    const url = data.url || roomURL(data);
    event.waitUntil((async () => {
      const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
      for (const client of windows) {
        if (new URL(client.url).origin !== self.location.origin) continue;
        // The open page switches rooms itself (no reload: the connection stays).
        client.postMessage({ type: "parley-open-room", channel: data.channel, room: data.room });
        return client.focus();
      }
      return self.clients.openWindow(url);
    })());
  });
}
