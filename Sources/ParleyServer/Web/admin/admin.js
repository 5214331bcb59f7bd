/* Parley admin dashboard. Plain JS, no framework, no CDN. Talks to /admin/api/ with the admin
   token (kept in sessionStorage for this tab only). Everything shown is set as text, never as
   HTML. */
(function () {
  "use strict";

  const POLL_MS = 5000;
  const WINDOW_MS = 15 * 60 * 1000;
  const MIN_WINDOW_MS = 2 * 60 * 1000;
  const DOORS = ["native", "socketio", "line", "http"];
  const TOKEN_KEY = "parley-admin-token";
  const $ = (id) => document.getElementById(id);

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    channel: null,
    room: null,
    roomsAfter: null,
    timer: null,
    busy: false,
  };

  // ------------------------------------------------------------------ API
  class Unauthorized extends Error {}

  async function api(method, path, body) {
    const options = { method: method, headers: { "Authorization": "Bearer " + state.token } };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const response = await fetch("/admin/api" + path, options);
    if (response.status === 401) throw new Unauthorized("The token was refused.");
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) throw new Error((data && data.error) || ("HTTP " + response.status));
    return data;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function button(label, className, onClick) {
    const node = el("button", className, label);
    node.type = "button";
    node.addEventListener("click", onClick);
    return node;
  }

  function say(text, isError) {
    const banner = $("banner");
    banner.textContent = text;
    banner.classList.toggle("error", !!isError);
    banner.hidden = !text;
  }

  function duration(seconds) {
    const d = Math.floor(seconds / 86400), h = Math.floor(seconds % 86400 / 3600), m = Math.floor(seconds % 3600 / 60);
    if (d > 0) return d + "d " + h + "h";
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m";
    return Math.max(0, Math.floor(seconds)) + "s";
  }

  function clock(millis) {
    return new Date(millis).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  // ------------------------------------------------------------------ signing in
  function showLogin(message) {
    stopPolling();
    $("dashboard").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("login-error").hidden = !message;
    $("token-input").focus();
  }

  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    state.token = $("token-input").value.trim();
    try {
      await api("GET", "/overview");
    } catch (error) {
      showLogin(error instanceof Unauthorized ? "That is not the admin token." : "The server did not answer: " + error.message);
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, state.token);
    $("token-input").value = "";
    enter();
  });

  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = "";
    showLogin("");
  });

  function enter() {
    $("login").hidden = true;
    $("dashboard").hidden = false;
    refresh();
    stopPolling();
    state.timer = setInterval(refresh, POLL_MS);
  }

  function stopPolling() {
    if (state.timer) clearInterval(state.timer);
    state.timer = null;
  }

  // ------------------------------------------------------------------ refreshing
  async function refresh() {
    if (state.busy) return;
    state.busy = true;
    try {
      const [overview, stats, channels, bans] = await Promise.all([
        api("GET", "/overview"), api("GET", "/stats"), api("GET", "/channels"), api("GET", "/bans")]);
      showOverview(overview);
      drawCharts(stats);
      showChannels(channels);
      showBans(bans.bans);
      await showRooms();
      if (state.room) await showRoom();
      readiness();
    } catch (error) {
      if (error instanceof Unauthorized) { showLogin("Signed out: the token is no longer accepted."); return; }
      say("Could not refresh: " + error.message, true);
    } finally {
      state.busy = false;
    }
  }

  async function readiness() {
    const health = $("health");
    try {
      const response = await fetch("/readyz", { cache: "no-store" });
      const text = (await response.text()).trim().split("\n");
      health.textContent = response.ok ? "ready" : text.slice(1).join("; ") || "not ready";
      health.className = "health " + (response.ok ? "ok" : "bad");
    } catch (_) {
      health.textContent = "unreachable";
      health.className = "health bad";
    }
  }

  function showOverview(o) {
    $("version").textContent = "Parley " + o.version + " (" + o.commit + ")";
    $("uptime").textContent = duration(o.uptime_seconds);
    const doors = o.connections || {};
    const total = DOORS.reduce((sum, door) => sum + (doors[door] || 0), 0);
    $("stat-connections").textContent = String(total);
    $("stat-doors").textContent = DOORS.map((d) => d + " " + (doors[d] || 0)).join(" · ");
    $("stat-rooms").textContent = String(o.rooms_in_memory);
    $("stat-members").textContent = o.members_in_memory + " members";
    $("stat-bans").textContent = String(o.bans);
    showPush(o.push);
  }

  // The push queue (docs/push.md): waiting, its bound, and what each provider did.
  function showPush(push) {
    if (!push) {
      $("stat-push").textContent = "off";
      $("stat-push-detail").textContent = "no provider configured";
      return;
    }
    $("stat-push").textContent = String(push.queued);
    const total = (outcome) => Object.values(push.by_provider || {}).reduce((sum, p) => sum + (p[outcome] || 0), 0);
    const parts = ["of " + push.max_queued, "sent " + total("sent"), "failed " + total("failed"), "removed " + total("removed")];
    if (push.dropped) parts.push("dropped " + push.dropped);
    $("stat-push-detail").textContent = parts.join(" · ");
    $("stat-push-detail").title = (push.providers || []).join(", ") + ": " + Object.entries(push.by_provider || {})
      .filter(([name]) => (push.providers || []).includes(name))
      .map(([name, p]) => name + " sent " + p.sent + ", failed " + p.failed + ", removed " + p.removed).join("; ");
  }

  // ------------------------------------------------------------------ charts (SVG, no library)
  const SVG = "http://www.w3.org/2000/svg";
  const PLOT = { left: 40, right: 590, top: 10, bottom: 158 };

  function svg(tag, attributes, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /** A round upper bound for the axis: 1, 2, 5 × 10^n. */
  function niceMax(value) {
    if (!(value > 0)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    for (const step of [1, 2, 5, 10]) if (value <= step * power) return step * power;
    return 10 * power;
  }

  /** The time the charts span: the last 15 minutes, or since the first sample when the
      server is younger (at least two minutes), so a fresh server's charts are not a sliver. */
  function chartWindow(samples, now) {
    const first = samples.length ? samples[0].time : now;
    return Math.min(WINDOW_MS, Math.max(MIN_WINDOW_MS, now - first));
  }

  function spanLabel(millis) {
    const minutes = Math.round(millis / 60000);
    return minutes >= 1 ? minutes + " min ago" : Math.round(millis / 1000) + " s ago";
  }

  function drawChart(target, samples, series, now) {
    while (target.firstChild) target.removeChild(target.firstChild);
    const span = chartWindow(samples, now);
    const start = now - span;
    let max = 0;
    for (const s of series) for (const sample of samples) max = Math.max(max, s.value(sample));
    max = niceMax(max);
    const x = (t) => PLOT.left + (PLOT.right - PLOT.left) * Math.max(0, (t - start)) / span;
    const y = (v) => PLOT.bottom - (PLOT.bottom - PLOT.top) * v / max;
    for (const fraction of [0, 0.5, 1]) {
      const value = max * fraction;
      target.appendChild(svg("line", { x1: PLOT.left, x2: PLOT.right, y1: y(value), y2: y(value), class: "grid-line" }));
      target.appendChild(svg("text", { x: PLOT.left - 6, y: y(value) + 4, "text-anchor": "end", class: "axis-label" },
        Number.isInteger(value) ? String(value) : value.toFixed(1)));
    }
    target.appendChild(svg("text", { x: PLOT.left, y: 176, class: "axis-label" }, spanLabel(span)));
    target.appendChild(svg("text", { x: PLOT.right, y: 176, "text-anchor": "end", class: "axis-label" }, "now"));
    for (const s of series) {
      const points = samples.filter((sample) => sample.time >= start)
        .map((sample) => x(sample.time).toFixed(1) + "," + y(s.value(sample)).toFixed(1));
      if (points.length === 1) points.push(PLOT.right.toFixed(1) + "," + points[0].split(",")[1]);
      const line = svg("polyline", { points: points.join(" "), class: "series " + s.className });
      line.dataset.series = s.name;
      line.appendChild(svg("title", {}, s.name));
      target.appendChild(line);
    }
  }

  function drawCharts(stats) {
    const samples = (stats.samples || []).slice().sort((a, b) => a.time - b.time);
    const now = samples.length ? Math.max(Date.now(), samples[samples.length - 1].time) : Date.now();
    const present = DOORS.filter((door) => door !== "http" || samples.some((s) => (s.connections[door] || 0) > 0));
    drawChart($("chart-connections"), samples, present.map((door) => ({
      name: door, className: "series-" + door, value: (sample) => sample.connections[door] || 0,
    })), now);
    const legend = $("legend-connections");
    legend.textContent = "";
    for (const door of present) legend.appendChild(el("span", "key door-" + door, door));
    drawChart($("chart-messages"), samples, [
      { name: "received", className: "series-messages", value: (s) => s.messages_per_second || 0 },
      { name: "delivered", className: "series-deliveries", value: (s) => s.deliveries_per_second || 0 },
    ], now);
    const last = samples[samples.length - 1];
    $("stat-messages-rate").textContent = last ? (Math.round(last.messages_per_second * 10) / 10).toString() : "0";
  }

  // ------------------------------------------------------------------ rooms
  function showChannels(data) {
    const select = $("channel-select");
    const ids = data.channels.map((c) => c.id);
    if (!state.channel || !ids.includes(state.channel)) state.channel = data.lobby.split("/")[0];
    const current = Array.from(select.options).map((o) => o.value);
    if (current.join("\n") !== ids.join("\n")) {
      select.textContent = "";
      for (const c of data.channels) {
        const option = el("option", null, c.id + (c.open ? "" : " (closed)"));
        option.value = c.id;
        select.appendChild(option);
      }
    }
    select.value = state.channel;
  }

  $("channel-select").addEventListener("change", (event) => {
    state.channel = event.target.value;
    state.roomsAfter = null;
    selectRoom(null);
    showRooms();
  });

  async function showRooms() {
    if (!state.channel) return;
    const data = await api("GET", "/channels/" + encodeURIComponent(state.channel) + "/rooms?limit=100");
    const body = $("rooms-table").tBodies[0];
    body.textContent = "";
    for (const room of data.rooms) {
      const row = el("tr");
      row.dataset.room = room.room;
      row.tabIndex = 0;
      if (room.room === state.room) row.classList.add("selected");
      row.appendChild(el("td", null, room.room));
      row.appendChild(el("td", "num", room.members));
      row.addEventListener("click", () => selectRoom(room.room));
      row.addEventListener("keydown", (event) => { if (event.key === "Enter") selectRoom(room.room); });
      body.appendChild(row);
    }
    $("rooms-empty").hidden = data.rooms.length > 0;
    $("rooms-more").hidden = !data.next;
  }

  $("room-open").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("room-input").value.trim();
    if (name) { selectRoom(name); $("room-input").value = ""; }
  });

  function roomPath() {
    return "/channels/" + encodeURIComponent(state.channel) + "/rooms/" + encodeURIComponent(state.room);
  }

  async function selectRoom(name) {
    state.room = name;
    for (const row of $("rooms-table").tBodies[0].rows) row.classList.toggle("selected", row.dataset.room === name);
    $("room-title").textContent = name ? state.channel + "/" + name : "Pick a room";
    $("close-room").hidden = !name;
    $("room-body").hidden = !name;
    if (name) {
      try { await showRoom(); } catch (error) { say("Could not read the room: " + error.message, true); }
    }
  }

  async function showRoom() {
    const room = state.room;
    const [members, messages] = await Promise.all([api("GET", roomPath() + "/members"), api("GET", roomPath() + "/messages?limit=50")]);
    if (room !== state.room) return;
    showMembers(members);
    showMessages(messages);
  }

  function showMembers(data) {
    const list = $("members-list");
    list.textContent = "";
    $("members-count").textContent = "(" + data.total + ")";
    if (data.members.length === 0) list.appendChild(el("li", "muted", "Nobody is in this room."));
    for (const member of data.members) {
      const item = el("li");
      item.dataset.id = member.id;
      const who = el("div", "grow");
      who.appendChild(el("strong", null, member.name));
      who.appendChild(document.createTextNode(" "));
      who.appendChild(el("span", "muted small", member.id));
      item.appendChild(who);
      if (member.door) item.appendChild(el("span", "badge door-" + member.door, member.door));
      if (member.ip) item.appendChild(el("span", "muted small", member.ip));
      const actions = el("div", "actions");
      if (member.node) item.appendChild(el("span", "muted small", "on " + member.node));
      if (member.connected_here || member.node) {
        const done = member.connected_here ? member.name + " was disconnected."
          : "Node " + member.node + " was asked to disconnect " + member.name + ".";
        actions.appendChild(button("Disconnect", "small disconnect", () => act(
          "POST", "/clients/" + encodeURIComponent(member.id) + "/disconnect", {}, done)));
      }
      actions.appendChild(button("Ban name", "small danger ban-name", () => ban({ name: member.name })));
      if (member.ip) actions.appendChild(button("Ban IP", "small danger ban-ip", () => ban({ ip: member.ip })));
      item.appendChild(actions);
      list.appendChild(item);
    }
  }

  function text(message) {
    if (message.deleted) return "message deleted";
    if (typeof message.message === "string") return message.message;
    return JSON.stringify(message.message);
  }

  function showMessages(data) {
    const list = $("messages-list");
    list.textContent = "";
    const messages = data.messages.slice().reverse();
    if (messages.length === 0) list.appendChild(el("li", "muted", "No stored messages."));
    for (const message of messages) {
      const item = el("li", message.deleted ? "deleted" : "");
      item.dataset.offset = String(message.offset);
      const body = el("div", "grow");
      body.appendChild(el("span", "time", "#" + message.offset + " " + clock(message.time)));
      body.appendChild(document.createTextNode(" "));
      body.appendChild(el("span", "who", message.name || "server"));
      body.appendChild(document.createTextNode(": "));
      body.appendChild(el("span", "text", text(message)));
      item.appendChild(body);
      if (!message.deleted) {
        const actions = el("div", "actions");
        actions.appendChild(button("Delete", "small danger delete", () => act(
          "DELETE", roomPath() + "/messages/" + message.offset, undefined, "Message #" + message.offset + " was deleted.")));
        item.appendChild(actions);
      }
      list.appendChild(item);
    }
  }

  $("close-room").addEventListener("click", () => {
    act("POST", roomPath() + "/close", { reason: "closed by an administrator" }, "Room " + state.room + " was closed.");
  });

  // ------------------------------------------------------------------ bans
  function ban(target) {
    const body = Object.assign({ seconds: Number($("ban-duration").value) || 3600, reason: "banned from the dashboard" }, target);
    act("POST", "/bans", body, "Banned " + (target.name || target.ip) + ".");
  }

  $("ban-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("ban-value").value.trim();
    if (!value) return;
    const isIP = /^[0-9.]+$/.test(value) || value.includes(":");
    ban(isIP ? { ip: value } : { name: value });
    $("ban-value").value = "";
  });

  function showBans(bans) {
    const list = $("bans-list");
    list.textContent = "";
    $("bans-empty").hidden = bans.length > 0;
    for (const b of bans) {
      const item = el("li");
      item.dataset.id = String(b.id);
      const what = el("div", "grow");
      what.appendChild(el("strong", null, b.name || b.ip));
      what.appendChild(document.createTextNode(" "));
      what.appendChild(el("span", "muted small", (b.name ? "name" : "address") + " · until " + clock(b.until)));
      item.appendChild(what);
      item.appendChild(button("Lift", "small lift", () => act("DELETE", "/bans/" + b.id, undefined, "Ban lifted.")));
      list.appendChild(item);
    }
  }

  // ------------------------------------------------------------------ acting
  async function act(method, path, body, done) {
    try {
      await api(method, path, body);
      say(done, false);
    } catch (error) {
      if (error instanceof Unauthorized) { showLogin("Signed out: the token is no longer accepted."); return; }
      say(error.message, true);
    }
    state.busy = false;
    await refresh();
  }

  // ------------------------------------------------------------------ start
  if (state.token) {
    api("GET", "/overview").then(enter, () => showLogin(""));
  } else {
    showLogin("");
  }
})();
