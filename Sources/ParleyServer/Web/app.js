// Parley browser client: speaks the native protocol (Scaledrone API v3 + Parley extensions)
// to /v3/websocket on the page's own origin. Plain JavaScript, no build step, no framework.
// User data is only ever put into the page with textContent / createTextNode.
"use strict";

(function () {
  const HISTORY_COUNT = 50;       // messages shown on join
  const PAGE_SIZE = 50;           // messages per "history" page when scrolling back
  const TYPING_IDLE_MS = 3000;    // send {typing:false} after this long without a keystroke
  const TYPING_REPEAT_MS = 2500;  // repeat {typing:true} this often while still typing
  const TYPING_SHOW_MS = 6000;    // forget someone's typing if no update arrives
  const MAX_MESSAGE_CHARS = 10000;
  const GROUP_WINDOW_S = 180;     // consecutive messages by one sender within this are grouped
  const MAX_ATTACHMENTS = 10;     // files per message (the server's limit too)
  const QUICK_REACTIONS = ["👍", "❤️", "😂", "🎉", "😮", "😢"]; // the picker's emoji
  const QUOTE_CHARS = 80;         // how much of a message a reply's quote shows
  const NAMES_SHOWN = 10;         // reactors' names the server lists per reaction
  // A file this server serves: /{channel}/files/{id}[/thumbnail]. Attachment URLs are shown
  // only as such paths on the page's own origin (they may name another host or port).
  const FILE_PATH = /^\/[^/?#]+\/files\/[0-9a-f]{32}(\/thumbnail)?$/;
  const DEFAULT_CHANNEL = "demo";
  const DEFAULT_ROOM = "observable-room";
  const STORAGE = {
    identity: "parley.identity",
    known: "parley.known-members",
    myIds: "parley.my-client-ids",
    rooms: "parley.recent-rooms",
    userId: "parley.user-id",
  };

  // Tutorial-style random identities ("hiddensun", "#3FA2C1").
  const ADJECTIVES = ["autumn", "hidden", "bitter", "misty", "silent", "empty", "dry", "dark",
    "summer", "icy", "delicate", "quiet", "white", "cool", "spring", "winter", "patient",
    "twilight", "dawn", "crimson", "wispy", "weathered", "blue", "billowing", "broken", "cold",
    "damp", "falling", "frosty", "green", "long", "late", "lingering", "bold", "little",
    "morning", "muddy", "old", "red", "rough", "still", "small", "sparkling", "shy",
    "wandering", "withered", "wild", "black", "young", "holy", "solitary", "fragrant",
    "aged", "snowy", "proud", "floral", "restless", "divine", "polished", "ancient",
    "purple", "lively", "nameless"];
  const NOUNS = ["waterfall", "river", "breeze", "moon", "rain", "wind", "sea", "morning",
    "snow", "lake", "sunset", "pine", "shadow", "leaf", "dawn", "glitter", "forest", "hill",
    "cloud", "meadow", "sun", "glade", "bird", "brook", "butterfly", "bush", "dew", "dust",
    "field", "fire", "flower", "firefly", "feather", "grass", "haze", "mountain", "night",
    "pond", "darkness", "snowflake", "silence", "sound", "sky", "shape", "surf", "thunder",
    "violet", "water", "wildflower", "wave", "resonance", "wood", "dream", "cherry", "tree",
    "fog", "frost", "voice", "paper", "frog", "smoke", "star"];

  // ---------------------------------------------------------------- small helpers
  const $ = (id) => document.getElementById(id);
  const el = (tag, className, text) => {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const pick = (list) => list[Math.floor(Math.random() * list.length)];
  const randomName = () => pick(ADJECTIVES) + pick(NOUNS);
  const randomColor = () => "#" + Math.floor(Math.random() * 0x1000000).toString(16).padStart(6, "0");
  const isColor = (value) => typeof value === "string" && /^#[0-9a-fA-F]{6}$/.test(value);
  const load = (key, fallback) => {
    try { const v = JSON.parse(localStorage.getItem(key)); return v === null ? fallback : v; } catch (e) { return fallback; }
  };
  const objectOr = (value) => (value && typeof value === "object" && !Array.isArray(value) ? value : {});
  const save = (key, value) => { try { localStorage.setItem(key, JSON.stringify(value)); } catch (e) { /* private mode */ } };

  /** A stable color for a name or id without one (same hash as the server's NameColor). */
  function colorFor(text) {
    let hash = 2166136261;
    const bytes = new TextEncoder().encode(String(text));
    for (const b of bytes) hash = Math.imul(hash ^ b, 16777619) >>> 0;
    return "hsl(" + (hash % 360) + " 65% 45%)";
  }
  function luminance(hex) {
    if (!isColor(hex)) return 0.3;
    const c = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255)
      .map((v) => (v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4)));
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  }
  function paintAvatar(node, name, color) {
    node.textContent = (Array.from(String(name || "?").trim())[0] || "?");
    node.style.backgroundColor = isColor(color) ? color : colorFor(name);
    node.classList.toggle("dark-text", isColor(color) && luminance(color) > 0.45);
  }

  // ---------------------------------------------------------------- state
  const state = {
    keptMessageNotice: false,   // the "not connected, your message is kept" notice is up
    identity: load(STORAGE.identity, null),
    channel: DEFAULT_CHANNEL,
    room: DEFAULT_ROOM,
    ws: null,
    opened: false,            // the current socket reached "open"
    clientId: null,
    handshaken: false,
    subscribed: false,
    nextCallback: 1,
    callbacks: new Map(),     // callback number -> function(reply)
    attempt: 0,               // reconnect attempts since the last good handshake
    reconnectTimer: null,
    reconnectAt: 0,
    countdownTimer: null,
    members: new Map(),       // client id -> clientData (current room)
    observable: false,
    known: new Map(Object.entries(objectOr(load(STORAGE.known, {})))), // client id -> {name, color}
    myIds: new Set(Array.isArray(load(STORAGE.myIds, [])) ? load(STORAGE.myIds, []) : []),
    seenIds: new Set(),       // message ids shown in this room
    messages: new Map(),      // message id -> its current state (body, edited, reactions, deleted)
    replyTo: null,            // the message the composer answers: {id}
    editing: null,            // the own message the composer edits: {id}
    resumeRoom: null,         // the room key to resume (with `since`) on the next subscribe
    seenOffsets: new Set(),
    lastOffset: {},           // room key -> highest offset seen (for resume with `since`)
    oldestOffset: null,       // lowest offset shown (for paging back)
    historySupported: true,   // cleared when the server does not know {type:"history"}
    hasMore: true,
    loadingHistory: false,
    typingPeople: new Map(),  // client id -> timeout
    typingSent: false,
    typingSentAt: 0,
    typingIdleTimer: null,
    unread: 0,
    // Users (docs/protocols.md, "Users"): a stable id of this browser's own choosing. In an
    // open channel it proves nothing; it only lets this browser find its read marks again.
    userId: null,
    vapidKey: null,           // the server's VAPID public key (Web Push on), from the handshake
    memberUsers: new Map(),   // client id -> user id (current room)
    receipts: new Map(),      // user id -> {name, offset} (current room)
    conversations: new Map(), // room -> conversation (the inbox)
    readSent: 0,              // the offset last marked read (current room)
    readTimer: null,
    fatal: null,              // an error that stops reconnecting (e.g. auth required)
    uploads: [],              // files being uploaded or ready to send: {key, name, size, xhr, attachment, node}
    uploadCounter: 0,
  };
  if (state.identity && (typeof state.identity !== "object" || typeof state.identity.name !== "string")) state.identity = null;
  const roomKey = () => state.channel + "/" + state.room;
  state.userId = (function () {
    const kept = load(STORAGE.userId, null);
    if (typeof kept === "string" && /^[A-Za-z0-9._@-]{1,64}$/.test(kept)) return kept;
    const bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    const id = "u-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    save(STORAGE.userId, id);
    return id;
  })();

  // ---------------------------------------------------------------- DOM
  const ui = {
    log: $("log"), messages: $("messages"), historyTop: $("history-top"), jump: $("jump"),
    typing: $("typing"), composer: $("composer"), composerForm: $("composer-form"), send: $("send"),
    status: $("status"), statusText: $("status-text"), roomName: $("room-name"),
    members: $("members"), onlineCount: $("online-count"), membersNote: $("members-note"),
    pushPanel: $("push-panel"), pushButton: $("push-button"), pushNote: $("push-note"),
    membersToggle: $("members-toggle"), scrim: $("scrim"), sidebarClose: $("sidebar-close"), membersToggleCount: $("members-toggle-count"), sidebar: $("sidebar"),
    roomForm: $("room-form"), roomInput: $("room-input"), recentRooms: $("recent-rooms"),
    conversations: $("conversations"), conversationsNote: $("conversations-note"),
    identityButton: $("identity-button"), identityAvatar: $("identity-avatar"), identityName: $("identity-name"),
    dialog: $("identity-dialog"), identityForm: $("identity-form"), nameInput: $("name-input"),
    colorInput: $("color-input"), shuffle: $("shuffle"), previewAvatar: $("preview-avatar"),
    identityError: $("identity-error"), identityCancel: $("identity-cancel"), identityTitle: $("identity-title"),
    identitySave: $("identity-save"),
    error: $("error"), errorText: $("error-text"), errorClose: $("error-close"), errorRetry: $("error-retry"),
    app: $("app"), attach: $("attach"), fileInput: $("file-input"), tray: $("tray"), drop: $("drop"),
    viewer: $("viewer"), viewerImage: $("viewer-image"), viewerName: $("viewer-name"),
    viewerDownload: $("viewer-download"), viewerClose: $("viewer-close"),
    context: $("composer-context"), contextText: $("composer-context-text"), contextCancel: $("composer-context-cancel"),
  };

  // ---------------------------------------------------------------- errors and status
  function showError(text, options) {
    state.keptMessageNotice = false;
    ui.errorText.textContent = text;
    ui.errorRetry.hidden = !(options && options.retry);
    ui.error.hidden = false;
  }
  function clearError() { ui.error.hidden = true; ui.errorText.textContent = ""; state.keptMessageNotice = false; }
  function setStatus(kind, text) {
    ui.status.classList.remove("online", "offline", "connecting");
    ui.status.classList.add(kind);
    ui.statusText.textContent = text;
  }
  /** Server error texts in plain words. */
  function plainError(error, what) {
    const text = String(error || "");
    if (/rate limit/i.test(text)) return "You're sending messages too fast. Wait a moment, then try again.";
    if (/too (long|large|big)|exceed/i.test(text)) return "That message is too long to send.";
    if (/auth/i.test(text)) return "This channel requires signing in, which the browser client can't do yet.";
    if (/too many rooms/i.test(text)) return "You have joined too many rooms at once. Reload the page to start fresh.";
    if (/invalid room name/i.test(text)) return "That room name isn't allowed: use 1–128 characters without “/”.";
    return (what ? what + ": " : "") + text;
  }

  // ---------------------------------------------------------------- identity
  function knownMember(id) {
    if (state.members.has(id)) return state.members.get(id) || {};
    return state.known.get(id) || null;
  }
  function remember(id, clientData) {
    if (!id || !clientData || typeof clientData !== "object") return;
    const entry = { name: typeof clientData.name === "string" ? clientData.name : undefined,
      color: isColor(clientData.color) ? clientData.color : undefined };
    state.known.delete(id);
    state.known.set(id, entry);
    while (state.known.size > 500) state.known.delete(state.known.keys().next().value);
    save(STORAGE.known, Object.fromEntries(state.known));
  }
  function rememberMyId(id) {
    state.myIds.delete(id);
    state.myIds.add(id);
    const ids = Array.from(state.myIds).slice(-100);
    state.myIds = new Set(ids);
    save(STORAGE.myIds, ids);
    remember(id, state.identity);
  }
  function renderIdentity() {
    const who = state.identity || { name: "?", color: "#8892a6" };
    ui.identityName.textContent = state.identity ? who.name : "Pick a name";
    paintAvatar(ui.identityAvatar, who.name, who.color);
  }
  function openIdentityDialog(first) {
    const current = state.identity || { name: randomName(), color: randomColor() };
    ui.nameInput.value = current.name;
    ui.colorInput.value = isColor(current.color) ? current.color.toLowerCase() : "#3a86ff";
    ui.identityTitle.textContent = first ? "Welcome to Parley" : "Your name and color";
    ui.identitySave.textContent = first ? "Start chatting" : "Save";
    ui.identityCancel.hidden = !!first;
    ui.identityError.textContent = "";
    updatePreview();
    if (typeof ui.dialog.showModal === "function") ui.dialog.showModal(); else ui.dialog.setAttribute("open", "");
    ui.nameInput.focus();
    ui.nameInput.select();
  }
  function updatePreview() { paintAvatar(ui.previewAvatar, ui.nameInput.value || "?", ui.colorInput.value); }
  function closeDialog() { if (ui.dialog.open) ui.dialog.close(); }

  ui.nameInput.addEventListener("input", updatePreview);
  ui.colorInput.addEventListener("input", updatePreview);
  ui.shuffle.addEventListener("click", () => {
    ui.nameInput.value = randomName();
    ui.colorInput.value = randomColor();
    updatePreview();
  });
  ui.identityCancel.addEventListener("click", closeDialog);
  ui.dialog.addEventListener("cancel", (event) => { if (!state.identity) event.preventDefault(); });
  ui.identityForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const name = ui.nameInput.value.trim();
    if (!name) { ui.identityError.textContent = "Please enter a name."; return; }
    if (name.length > 40) { ui.identityError.textContent = "Names can be at most 40 characters."; return; }
    const first = !state.identity;
    const changed = !state.identity || state.identity.name !== name || state.identity.color !== ui.colorInput.value;
    state.identity = { name: name, color: ui.colorInput.value };
    save(STORAGE.identity, state.identity);
    renderIdentity();
    closeDialog();
    ui.composer.focus();
    if (first) connect();
    else if (changed) reconnectNow(); // client_data is fixed per connection: handshake again
  });
  ui.identityButton.addEventListener("click", () => openIdentityDialog(false));

  // ---------------------------------------------------------------- room from the URL hash
  // "#room" (channel "demo") or "#channel/room".
  function parseHash() {
    let hash = location.hash.replace(/^#\/?/, "");
    try { hash = decodeURIComponent(hash); } catch (e) { /* keep it raw */ }
    if (!hash) return { channel: DEFAULT_CHANNEL, room: DEFAULT_ROOM };
    const slash = hash.indexOf("/");
    if (slash > 0 && slash < hash.length - 1) return { channel: hash.slice(0, slash), room: hash.slice(slash + 1) };
    return { channel: DEFAULT_CHANNEL, room: hash.replace(/\//g, "") || DEFAULT_ROOM };
  }
  function hashFor(channel, room) {
    return "#" + (channel === DEFAULT_CHANNEL ? "" : encodeURIComponent(channel) + "/") + encodeURIComponent(room);
  }
  function recentRooms() {
    const rooms = load(STORAGE.rooms, []);
    return Array.isArray(rooms) ? rooms.filter((r) => r && typeof r.channel === "string" && typeof r.room === "string") : [];
  }
  function renderRecentRooms() {
    const rooms = recentRooms();
    ui.recentRooms.replaceChildren();
    for (const entry of rooms) {
      const li = el("li");
      const a = el("a", null, (entry.channel === DEFAULT_CHANNEL ? "" : entry.channel + " / ") + "#" + entry.room);
      a.href = hashFor(entry.channel, entry.room);
      if (entry.channel === state.channel && entry.room === state.room) a.setAttribute("aria-current", "page");
      li.appendChild(a);
      ui.recentRooms.appendChild(li);
    }
  }
  function addRecentRoom(channel, room) {
    const rooms = recentRooms().filter((r) => !(r.channel === channel && r.room === room));
    rooms.unshift({ channel: channel, room: room });
    save(STORAGE.rooms, rooms.slice(0, 8));
  }
  ui.roomForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const name = ui.roomInput.value.trim();
    if (!name) return;
    if (name.includes("/") || new TextEncoder().encode(name).length > 128) {
      showError("That room name isn't allowed: use 1–128 characters without “/”.");
      return;
    }
    ui.roomInput.value = "";
    setDrawer(false, false);
    location.hash = hashFor(state.channel, name);
  });
  window.addEventListener("hashchange", () => {
    const target = parseHash();
    if (target.channel === state.channel && target.room === state.room) return;
    switchRoom(target.channel, target.room);
  });

  function switchRoom(channel, room) {
    const channelChanged = channel !== state.channel;
    if (state.ws && state.handshaken && state.subscribed && !channelChanged) {
      send({ type: "unsubscribe", room: state.room }, () => {});
    }
    stopTyping();
    state.channel = channel;
    state.room = room;
    resetRoomView();
    if (channelChanged) { reconnectNow(); return; }
    if (state.ws && state.handshaken) subscribe(false);
  }

  function resetRoomView() {
    clearUploads(); // uploads are made for a room
    ui.messages.replaceChildren();
    state.seenIds.clear();
    state.seenOffsets.clear();
    state.messages.clear();
    setComposerContext(null);
    state.oldestOffset = null;
    state.hasMore = true;
    state.loadingHistory = false;
    state.subscribed = false;
    state.resumeRoom = null;
    state.members.clear();
    state.observable = state.room.startsWith("observable-") || state.room.startsWith("dm+");
    for (const timer of state.typingPeople.values()) clearTimeout(timer);
    state.typingPeople.clear();
    renderTyping();
    renderMembers();
    ui.historyTop.textContent = "";
    state.memberUsers.clear();
    state.receipts.clear();
    state.readSent = 0;
    renderSeenBy();
    ui.roomName.textContent = (state.channel === DEFAULT_CHANNEL ? "" : state.channel + " / ") + roomTitle(state.room);
    ui.composer.placeholder = "Message " + roomTitle(state.room);
    renderConversations();
    state.unread = 0;
    updateTitle();
    addRecentRoom(state.channel, state.room);
    renderRecentRooms();
  }

  // ---------------------------------------------------------------- connection
  function socketURL() {
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v3/websocket";
  }

  function connect() {
    clearTimeout(state.reconnectTimer);
    clearTimeout(state.countdownTimer);
    state.reconnectTimer = null;
    if (!state.identity || state.fatal) return;
    let ws;
    try {
      ws = new WebSocket(socketURL());
    } catch (e) {
      showError("Can't open a connection to the Parley server (" + e.message + ").");
      return;
    }
    state.ws = ws;
    state.opened = false;
    state.handshaken = false;
    state.subscribed = false;
    state.callbacks.clear();
    setStatus("connecting", state.attempt ? "Reconnecting…" : "Connecting…");
    ws.onopen = () => {
      if (ws !== state.ws) return;
      state.opened = true;
      send({ type: "handshake", channel: state.channel, version: 2, user_id: state.userId,
        client_data: { name: state.identity.name, color: state.identity.color } }, onHandshake);
    };
    ws.onmessage = (event) => {
      if (ws !== state.ws) return;
      let data;
      try { data = JSON.parse(event.data); } catch (e) { return; }
      if (data && typeof data === "object") receive(data);
    };
    ws.onclose = (event) => {
      if (ws !== state.ws) return;
      onDisconnect(event);
    };
    ws.onerror = () => { /* onclose follows with the details */ };
  }

  function onDisconnect(event) {
    const wasOpen = state.opened;
    if (state.subscribed) state.resumeRoom = roomKey();
    state.ws = null;
    state.handshaken = false;
    state.subscribed = false;
    state.typingSent = false;
    for (const timer of state.typingPeople.values()) clearTimeout(timer);
    state.typingPeople.clear();
    renderTyping();
    if (event && event.code === 1009) showError("That message is too long to send. The connection was reset; reconnecting…");
    else if (event && event.code === 1008) {
      // A flood past the rate limit ends with 1008 "rate limit exceeded": say it plainly.
      const reason = event.reason || "policy violation";
      showError(/rate limit/i.test(reason) ? plainError(reason) + " (The server paused this tab for a moment.)"
        : "The server closed the connection: " + reason + ".");
    }
    if (state.fatal) { setStatus("offline", "Disconnected"); return; }
    state.attempt += 1;
    const delay = Math.min(15000, 500 * Math.pow(2, state.attempt - 1)) * (0.75 + Math.random() * 0.5);
    state.reconnectAt = Date.now() + delay;
    state.reconnectTimer = setTimeout(connect, delay);
    const seconds = Math.max(1, Math.round(delay / 1000));
    countdown();
    // Who is online is unknown while we are not: the fresh list comes with the next subscribe.
    state.members.clear();
    renderMembers();
    if (state.keptMessageNotice) {
      // The "not connected, your message is kept" notice stays (see sendComposer).
    } else if (!wasOpen) {
      showError("Can't reach the Parley server at " + location.host + ". Retrying in " + seconds + " s…", { retry: true });
    } else if (!(event && (event.code === 1009 || event.code === 1008))) {
      showError("Lost the connection to the server. Reconnecting…", { retry: true });
    }
  }

  function countdown() {
    clearTimeout(state.countdownTimer);
    if (!state.reconnectTimer) return;
    const left = Math.max(1, Math.ceil((state.reconnectAt - Date.now()) / 1000));
    setStatus("offline", "Offline, retrying in " + left + " s");
    state.countdownTimer = setTimeout(countdown, 1000);
  }

  function reconnectNow() {
    clearTimeout(state.reconnectTimer);
    state.reconnectTimer = null;
    state.fatal = null;
    const old = state.ws;
    state.ws = null;
    if (old) { old.onclose = null; try { old.close(1000, "reconnecting"); } catch (e) { /* gone */ } }
    state.handshaken = false;
    connect();
  }
  ui.errorRetry.addEventListener("click", () => { clearError(); state.attempt = 0; reconnectNow(); });
  ui.errorClose.addEventListener("click", clearError);
  window.addEventListener("online", () => { if (!state.ws) { state.attempt = 0; reconnectNow(); } });

  function send(command, onReply) {
    const ws = state.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    if (onReply) {
      command.callback = state.nextCallback++;
      state.callbacks.set(command.callback, onReply);
    }
    ws.send(JSON.stringify(command));
    return true;
  }

  function onHandshake(reply) {
    if (reply.client_id) { state.clientId = String(reply.client_id); rememberMyId(state.clientId); }
    if (reply.error) {
      const text = plainError(reply.error, "The server refused the connection");
      if (/auth/i.test(reply.error)) state.fatal = text;
      showError(text);
      setStatus("offline", "Not connected");
      return;
    }
    if (reply.require_auth) {
      state.fatal = "This channel requires signing in (a token), which the browser client can't do yet.";
      showError(state.fatal);
      setStatus("offline", "Sign-in required");
      return;
    }
    state.handshaken = true;
    // A room this view was in before the drop resumes (also after "Retry now", which resets
    // the attempts): the replay brings the actions on messages already shown.
    const resumed = state.attempt > 0 || state.resumeRoom === roomKey();
    state.attempt = 0;
    if (!ui.error.hidden && /connect|reach/i.test(ui.errorText.textContent)) clearError();
    subscribe(resumed);
    watchInbox();
    state.vapidKey = typeof reply.vapid_public_key === "string" ? reply.vapid_public_key : null;
    refreshPush();
  }

  // ---------------------------------------------------------------- push notifications
  // Web Push (docs/push.md): offered when the server has VAPID keys and the browser has a
  // push service. The browser asks for permission only when you press the button, never on
  // page load. The service worker (sw.js) shows what arrives and opens the room on a click.
  const PUSH_SUPPORTED = "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
  function base64UrlBytes(text) {
    const raw = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - text.length % 4) % 4));
    return Uint8Array.from(raw, (c) => c.charCodeAt(0));
  }
  async function currentPushSubscription() {
    const registration = await navigator.serviceWorker.getRegistration("/");
    return registration ? registration.pushManager.getSubscription() : null;
  }
  function renderPush(on, note) {
    ui.pushPanel.hidden = false;
    ui.pushButton.setAttribute("aria-pressed", on ? "true" : "false");
    ui.pushButton.textContent = on ? "Turn off notifications" : "Notify me when I'm away";
    ui.pushNote.textContent = note || (on ? "Notifications are on for this browser. You get one for rooms you are away from."
      : "When this tab is closed, you get a notification for new messages in your rooms.");
  }
  function registerPushDevice(subscription, done) {
    send({ type: "register_device", platform: "webpush", subscription: subscription.toJSON() }, (reply) => {
      if (reply.error) renderPush(false, "The server did not take this browser's notifications: " + plainError(reply.error) + ".");
      else renderPush(true);
      if (done) done(!reply.error);
    });
  }
  async function refreshPush() {
    if (!PUSH_SUPPORTED || !state.vapidKey) { ui.pushPanel.hidden = true; return; }
    try {
      const subscription = await currentPushSubscription();
      // Registered again on each connection: the server forgets a device its push service gave up on.
      if (subscription && Notification.permission === "granted") registerPushDevice(subscription);
      else renderPush(false);
    } catch (e) {
      renderPush(false);
    }
  }
  async function togglePush() {
    ui.pushButton.disabled = true;
    try {
      const existing = await currentPushSubscription();
      if (existing) {
        send({ type: "unregister_device", platform: "webpush", token: existing.endpoint }, () => {});
        await existing.unsubscribe();
        renderPush(false);
        return;
      }
      const permission = await Notification.requestPermission();
      if (permission !== "granted") {
        renderPush(false, "Notifications are blocked for this site. Allow them in the browser's site settings, then press the button again.");
        return;
      }
      const registration = await navigator.serviceWorker.register("/sw.js", { scope: "/" });
      await navigator.serviceWorker.ready;
      const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true,
        applicationServerKey: base64UrlBytes(state.vapidKey) });
      registerPushDevice(subscription);
    } catch (e) {
      renderPush(false, "This browser could not subscribe to notifications (" + (e && e.message ? e.message : e) + ").");
    } finally {
      ui.pushButton.disabled = false;
    }
  }
  ui.pushButton.addEventListener("click", togglePush);
  if (PUSH_SUPPORTED) {
    // A click on a notification while this page is open: go to its room here.
    navigator.serviceWorker.addEventListener("message", (event) => {
      const data = event.data || {};
      if (data.type !== "parley-open-room" || typeof data.room !== "string" || !data.room) return;
      location.hash = hashFor(typeof data.channel === "string" && data.channel ? data.channel : state.channel, data.room);
    });
  }

  function subscribe(resume) {
    const room = state.room, key = roomKey();
    const command = { type: "subscribe", room: room, history_count: HISTORY_COUNT, receipts: true, unread: true };
    // Parley's resume extension: replay what was missed after this offset. Servers without
    // it send the latest history instead; messages already shown are skipped by id/offset.
    if (resume && state.lastOffset[key]) command.since = state.lastOffset[key];
    setStatus("connecting", "Joining #" + room + "…");
    send(command, (reply) => {
      if (room !== state.room) return;
      if (reply.error) {
        const text = plainError(reply.error, "Couldn't join #" + room);
        showError(text);
        setStatus("offline", "Not in #" + room);
        if (/auth/i.test(reply.error)) state.fatal = text;
        return;
      }
      state.subscribed = true;
      state.resumeRoom = null;
      setStatus("online", "Connected");
      ui.membersNote.hidden = state.observable;
      if (resume) addNotice("Reconnected");
      setTimeout(maybeLoadMore, 300);
      scheduleRead();
    });
  }

  // ---------------------------------------------------------------- incoming
  function receive(data) {
    if (typeof data.callback === "number" && data.type === undefined) {
      const handler = state.callbacks.get(data.callback);
      state.callbacks.delete(data.callback);
      if (handler) handler(data);
      return;
    }
    if (data.error && !data.type) { showError(plainError(data.error, "Server error")); return; }
    if (data.type === "conversation") { onConversation(data.conversation); return; }
    if (data.room !== undefined && data.room !== state.room) return;
    switch (data.type) {
      case "publish": onPublish(data, true); break;
      case "history_message": onPublish(data, false); break;
      case "observable_members": onMembers(data.data); break;
      case "observable_member_join": onJoin(data.data); break;
      case "observable_member_leave": onLeave(data.data); break;
      case "message_deleted": onDeleted(data.offset); break;
      case "edit": case "delete": case "react": case "unreact": onAction(data); break;
      case "receipts": onReceipts(data.readers); break;
      case "read": onRead(data); break;
      case "unread": onUnread(data); break;
      default: break;
    }
  }

  function isTypingBody(body) {
    return body !== null && typeof body === "object" && !Array.isArray(body) &&
      typeof body.typing === "boolean" && Object.keys(body).length === 1;
  }

  /** An operator deleted a message: it leaves the conversation. */
  function onDeleted(offset) {
    if (!Number.isInteger(offset)) return;
    for (const message of state.messages.values()) {
      if (message.offset === offset && !message.deleted) { message.deleted = true; refreshReplies(message.id); }
    }
    for (const node of Array.from(ui.messages.querySelectorAll('.message[data-offset="' + offset + '"]'))) {
      const next = node.nextElementSibling;
      node.remove();
      if (next) regroup(next);
    }
  }

  function onPublish(data, live) {
    const body = data.message;
    const sender = data.client_id;
    if (data.deleted === true) {
      // A deleted message's tombstone (history, resume): never shown, but its place counts,
      // so resuming goes on after it.
      const offset = Number.isInteger(data.offset) && data.offset > 0 ? data.offset : null;
      if (offset) {
        state.seenOffsets.add(offset);
        const key = roomKey();
        if (!state.lastOffset[key] || offset > state.lastOffset[key]) state.lastOffset[key] = offset;
        if (state.oldestOffset === null || offset < state.oldestOffset) state.oldestOffset = offset;
      }
      if (typeof data.id === "string" && !state.messages.has(data.id)) state.messages.set(data.id, { id: data.id, offset: offset, deleted: true });
      onDeleted(offset);
      return;
    }
    if (isTypingBody(body)) {
      if (live && sender && sender !== state.clientId) setTyping(sender, body.typing);
      return;
    }
    if (sender && state.typingPeople.has(sender)) setTyping(sender, false);
    const added = addMessage(data, { live: live });
    if (added && live && !state.myIds.has(sender) && document.hidden) {
      state.unread += 1;
      updateTitle();
    }
    if (added && live) scheduleRead();
    if (added) renderSeenBy();
  }

  function onMembers(list) {
    state.members.clear();
    for (const m of Array.isArray(list) ? list : []) {
      if (!m || typeof m.id !== "string") continue;
      state.members.set(m.id, m.clientData);
      if (typeof m.user === "string") state.memberUsers.set(m.id, m.user);
      remember(m.id, m.clientData);
    }
    state.observable = true;
    ui.membersNote.hidden = true;
    renderMembers();
  }
  function onJoin(member) {
    if (!member || typeof member.id !== "string") return;
    const fresh = !state.members.has(member.id);
    state.members.set(member.id, member.clientData);
    if (typeof member.user === "string") state.memberUsers.set(member.id, member.user);
    remember(member.id, member.clientData);
    renderMembers();
    if (fresh && member.id !== state.clientId) addNotice(displayName(member.id, member.clientData) + " joined");
  }
  function onLeave(member) {
    if (!member || typeof member.id !== "string") return;
    const known = state.members.has(member.id);
    state.members.delete(member.id);
    setTyping(member.id, false);
    renderMembers();
    if (member.id !== state.clientId && (known || member.clientData)) {
      addNotice(displayName(member.id, member.clientData || knownMember(member.id)) + " left");
    }
  }

  function displayName(id, clientData) {
    if (clientData && typeof clientData === "object" && typeof clientData.name === "string" && clientData.name.trim()) {
      return clientData.name.trim().slice(0, 60);
    }
    if (typeof clientData === "string" && clientData.trim()) return clientData.trim().slice(0, 60);
    if (!id) return "Parley";
    return "guest-" + String(id).slice(0, 4);
  }
  function senderInfo(id) {
    const data = id ? knownMember(id) : null;
    const own = !!id && state.myIds.has(id);
    if (own && (!data || !data.name)) return { name: state.identity.name, color: state.identity.color, own: true };
    return { name: displayName(id, data), color: data && isColor(data.color) ? data.color : null, own: own };
  }

  // ---------------------------------------------------------------- rendering messages
  function nearBottom() { return ui.log.scrollHeight - ui.log.scrollTop - ui.log.clientHeight < 80; }
  function scrollToBottom() { ui.log.scrollTop = ui.log.scrollHeight; ui.jump.hidden = true; }

  /** Adds a message in offset order; false when it was already shown (resume, history overlap). */
  function addMessage(data, options) {
    const id = typeof data.id === "string" ? data.id : null;
    const offset = Number.isInteger(data.offset) && data.offset > 0 ? data.offset : null;
    // Ids are unique and survive replays; offsets are the fallback for id-less messages (a
    // server that lost its in-memory history restarts offsets, so they are not trusted alone).
    if (id ? state.seenIds.has(id) : (offset && state.seenOffsets.has(offset))) return false;
    if (id) state.seenIds.add(id);
    if (offset) {
      state.seenOffsets.add(offset);
      const key = roomKey();
      if (!state.lastOffset[key] || offset > state.lastOffset[key]) state.lastOffset[key] = offset;
      if (state.oldestOffset === null || offset < state.oldestOffset) state.oldestOffset = offset;
    }
    if (id) state.messages.set(id, messageState(data, offset));
    const stick = nearBottom();
    const node = id ? renderMessage(state.messages.get(id), offset) : renderMessage(data, offset);
    // Live messages are the newest: appended. History (join, resume, paging) goes in offset
    // order: before the first message with a larger offset.
    let before = null;
    if (offset && !(options && options.live)) {
      for (const child of ui.messages.children) {
        const o = Number(child.dataset.offset || 0);
        if (o > offset) { before = child; break; }
      }
    }
    const keepTop = options && options.prepend;
    const previousHeight = ui.log.scrollHeight, previousTop = ui.log.scrollTop;
    ui.messages.insertBefore(node, before);
    if (id) refreshReplies(id);
    regroup(node);
    if (node.nextElementSibling) regroup(node.nextElementSibling);
    if (keepTop) {
      ui.log.scrollTop = previousTop + (ui.log.scrollHeight - previousHeight);
    } else if (stick || node.classList.contains("own")) {
      scrollToBottom();
    } else if (!before) {
      ui.jump.hidden = false;
    }
    return true;
  }

  function regroup(node) {
    if (!node.classList.contains("message")) return;
    const prev = node.previousElementSibling;
    const grouped = !!prev && prev.classList.contains("message") && prev.dataset.sender === node.dataset.sender &&
      Math.abs(Number(node.dataset.time) - Number(prev.dataset.time)) <= GROUP_WINDOW_S;
    node.classList.toggle("continued", grouped);
  }

  function renderMessage(data, offset) {
    const sender = typeof data.client_id === "string" ? data.client_id : "";
    const who = senderInfo(sender);
    const row = el("div", "message" + (who.own ? " own" : ""));
    row.dataset.sender = sender || "-";
    row.dataset.time = String(Number(data.timestamp) || 0);
    if (offset) row.dataset.offset = String(offset);
    if (typeof data.id === "string") row.dataset.id = data.id;
    if (typeof data.reply_to === "string") row.dataset.replyTo = data.reply_to;

    const avatar = el("span", "avatar");
    avatar.setAttribute("aria-hidden", "true");
    paintAvatar(avatar, who.name, who.color);
    const body = el("div", "body");
    const meta = el("div", "meta");
    meta.appendChild(el("span", "name", who.own ? who.name + " (you)" : who.name));
    const when = new Date((Number(data.timestamp) || Date.now() / 1000) * 1000);
    const today = when.toDateString() === new Date().toDateString();
    const time = el("time", "time", today
      ? when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
      : when.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" }));
    time.dateTime = when.toISOString();
    time.title = when.toLocaleString();
    meta.appendChild(time);
    const bubble = el("div", "bubble");
    fillBubble(bubble, data.message);
    // Read out as "name: text" by screen readers, even when the header is hidden by grouping.
    const spoken = el("span", "visually-hidden", who.name + " said: ");
    body.append(meta);
    if (typeof data.reply_to === "string") body.appendChild(renderQuote(data.reply_to));
    // The bubble with its actions beside it (shown on hover, focus or a tap).
    const line = el("div", "line");
    line.appendChild(bubble);
    body.append(spoken, line);
    if (Number(data.edited) > 0) {
      const edited = el("span", "edited", "edited");
      edited.title = "Edited " + new Date(Number(data.edited) * 1000).toLocaleString();
      bubble.appendChild(edited);
    }
    if (typeof data.id === "string") {
      line.appendChild(renderActions(data, who.own));
      if (Array.isArray(data.reactions) && data.reactions.length) body.appendChild(renderReactions(data));
    }
    row.append(avatar, body);
    return row;
  }

  // ---------------------------------------------------------------- message actions
  /** A message's state as this page keeps it: what the server said, with reactions that
   *  also remember reactor ids (history lists names only). */
  function messageState(data, offset) {
    const reactions = (Array.isArray(data.reactions) ? data.reactions : [])
      .filter((r) => r && typeof r.emoji === "string" && Number.isInteger(r.count) && r.count > 0)
      .map((r) => ({ emoji: r.emoji, count: r.count, names: Array.isArray(r.names) ? r.names.filter((n) => typeof n === "string") : [], ids: [] }));
    return {
      id: data.id, offset: offset, timestamp: data.timestamp, client_id: data.client_id, message: data.message,
      reply_to: typeof data.reply_to === "string" ? data.reply_to : undefined,
      edited: Number(data.edited) > 0 ? Number(data.edited) : undefined, reactions: reactions, deleted: false,
    };
  }

  function textOf(message) {
    if (!message || message.deleted) return "";
    if (typeof message.message === "string") return message.message;
    const files = attachmentsOf(message.message);
    if (files) return (typeof message.message.text === "string" && message.message.text.trim()) ? message.message.text : files.map((f) => f.name).join(", ");
    try { return JSON.stringify(message.message); } catch (e) { return ""; }
  }

  function renderQuote(targetId) {
    const quote = el("button", "quote");
    quote.type = "button";
    quote.dataset.target = targetId;
    const target = state.messages.get(targetId);
    if (!target) {
      quote.appendChild(el("span", "quote-text", "Reply to a message further up"));
      quote.disabled = true;
    } else if (target.deleted) {
      quote.appendChild(el("span", "quote-text deleted", "Deleted message"));
      quote.disabled = true;
    } else {
      const text = textOf(target).replace(/\s+/g, " ");
      quote.appendChild(el("span", "quote-name", senderInfo(target.client_id).name));
      quote.appendChild(el("span", "quote-text", text.length > QUOTE_CHARS ? text.slice(0, QUOTE_CHARS) + "…" : text));
      quote.title = "Show the message this replies to";
      quote.addEventListener("click", () => {
        const node = rowOf(targetId);
        if (!node) return;
        node.scrollIntoView({ block: "center", behavior: "smooth" });
        node.classList.add("flash");
        setTimeout(() => node.classList.remove("flash"), 1200);
      });
    }
    return quote;
  }

  function renderReactions(message) {
    const row = el("div", "reactions");
    for (const reaction of message.reactions) {
      const mine = isMyReaction(reaction);
      const chip = el("button", "chip" + (mine ? " mine" : ""));
      chip.type = "button";
      chip.dataset.emoji = reaction.emoji;
      chip.setAttribute("aria-pressed", mine ? "true" : "false");
      chip.append(el("span", "emoji", reaction.emoji), el("span", "chip-count", String(reaction.count)));
      const more = reaction.count - reaction.names.length;
      chip.title = reaction.names.join(", ") + (more > 0 ? " and " + more + " more" : "") + " reacted with " + reaction.emoji;
      chip.addEventListener("click", () => act(mine ? "unreact" : "react", message.id, { emoji: reaction.emoji }));
      row.appendChild(chip);
    }
    return row;
  }

  function isMyReaction(reaction) {
    for (const id of reaction.ids) if (state.myIds.has(id)) return true;
    return reaction.ids.length < reaction.count && !!state.identity && reaction.names.includes(state.identity.name);
  }

  function renderActions(message, own) {
    const bar = el("div", "actions");
    bar.setAttribute("role", "toolbar");
    bar.setAttribute("aria-label", "Message actions");
    const button = (name, label, symbol, onClick) => {
      const b = el("button", "action " + name, symbol);
      b.type = "button";
      b.setAttribute("aria-label", label);
      b.title = label;
      b.addEventListener("click", (event) => { event.stopPropagation(); onClick(b); });
      bar.appendChild(b);
      return b;
    };
    button("reply", "Reply", "↩", () => { setComposerContext({ kind: "reply", id: message.id }); ui.composer.focus(); });
    button("react", "Add a reaction", "☺", (b) => {
      const open = bar.querySelector(".picker");
      if (open) { open.remove(); return; }
      const picker = el("div", "picker");
      for (const emoji of QUICK_REACTIONS) {
        const e = el("button", "pick", emoji);
        e.type = "button";
        e.setAttribute("aria-label", "React with " + emoji);
        e.addEventListener("click", (event) => {
          event.stopPropagation();
          picker.remove();
          const current = state.messages.get(message.id);
          const reaction = current && current.reactions.find((r) => r.emoji === emoji);
          act(reaction && isMyReaction(reaction) ? "unreact" : "react", message.id, { emoji: emoji });
        });
        picker.appendChild(e);
      }
      bar.appendChild(picker);
      b.setAttribute("aria-expanded", "true");
    });
    if (own && typeof message.message === "string") {
      button("edit", "Edit", "✎", () => {
        setComposerContext({ kind: "edit", id: message.id });
        ui.composer.value = message.message;
        autosize();
        ui.composer.focus();
      });
    }
    if (own) {
      button("delete", "Delete", "🗑", () => {
        if (window.confirm("Delete this message for everyone?")) act("delete", message.id, {});
      });
    }
    return bar;
  }

  /** Sends an action; a refusal is shown in plain words (the server checks every rule). */
  function act(type, target, fields) {
    const command = Object.assign({ type: type, room: state.room, target: target }, fields);
    const what = { edit: "Couldn't edit the message", delete: "Couldn't delete the message",
      react: "Couldn't add the reaction", unreact: "Couldn't take the reaction back" }[type];
    const sent = send(command, (reply) => { if (reply.error) showError(plainError(reply.error, what)); });
    if (!sent) showError("Not connected right now. Try again once reconnected.");
    return sent;
  }

  function rowOf(id) {
    for (const node of ui.messages.querySelectorAll(".message")) if (node.dataset.id === id) return node;
    return null;
  }

  /** An action from the room's log (live or replayed): applied to its target, in order. */
  function onAction(data) {
    const offset = Number.isInteger(data.offset) && data.offset > 0 ? data.offset : null;
    if (offset) {
      if (state.seenOffsets.has(offset)) return;
      state.seenOffsets.add(offset);
      const key = roomKey();
      if (!state.lastOffset[key] || offset > state.lastOffset[key]) state.lastOffset[key] = offset;
    }
    const target = typeof data.target === "string" ? state.messages.get(data.target) : null;
    if (!target || target.deleted) return;
    const actor = typeof data.client_id === "string" ? data.client_id : "";
    switch (data.type) {
      case "edit":
        if (data.deleted === true) return; // replayed after a delete: its tombstone comes too
        target.message = data.message;
        target.edited = Number(data.timestamp) || Date.now() / 1000;
        break;
      case "delete":
        target.deleted = true;
        break;
      case "react": case "unreact": {
        if (typeof data.emoji !== "string") return;
        const name = actor ? senderInfo(actor).name : "Parley";
        const index = target.reactions.findIndex((r) => r.emoji === data.emoji);
        const reaction = index >= 0 ? target.reactions[index] : null;
        // Counted already: by id, or by name when the state came from history (names only).
        const holds = reaction && (reaction.ids.includes(actor) || (reaction.ids.length < reaction.count && reaction.names.includes(name)));
        if (data.type === "react") {
          if (!reaction) target.reactions.push({ emoji: data.emoji, count: 1, names: [name], ids: [actor] });
          else if (holds) { if (!reaction.ids.includes(actor)) reaction.ids.push(actor); }
          else {
            reaction.count += 1;
            reaction.ids.push(actor);
            if (reaction.names.length < NAMES_SHOWN) reaction.names.push(name);
          }
        } else {
          if (!holds) return;
          reaction.count -= 1;
          reaction.ids = reaction.ids.filter((id) => id !== actor);
          const at = reaction.names.indexOf(name);
          if (at >= 0) reaction.names.splice(at, 1);
          if (reaction.count <= 0) target.reactions.splice(index, 1);
        }
        break;
      }
      default: return;
    }
    redraw(target);
  }

  /** Shows a message's new state in place (a deleted one leaves), and its replies' quotes. */
  function redraw(message) {
    const node = rowOf(message.id);
    if (node) {
      if (message.deleted) {
        const next = node.nextElementSibling;
        node.remove();
        if (next) regroup(next);
      } else {
        const fresh = renderMessage(message, message.offset);
        node.replaceWith(fresh);
        regroup(fresh);
      }
    }
    if (message.deleted && state.replyTo && state.replyTo.id === message.id) setComposerContext(null);
    if (message.deleted && state.editing && state.editing.id === message.id) { setComposerContext(null); ui.composer.value = ""; autosize(); }
    refreshReplies(message.id);
  }

  function refreshReplies(id) {
    for (const node of ui.messages.querySelectorAll(".message")) {
      if (node.dataset.replyTo !== id) continue;
      const old = node.querySelector(".quote");
      if (old) old.replaceWith(renderQuote(id));
    }
  }

  /** The bar above the composer: "Replying to alice: …" or "Editing your message". */
  function setComposerContext(context) {
    state.replyTo = context && context.kind === "reply" ? { id: context.id } : null;
    state.editing = context && context.kind === "edit" ? { id: context.id } : null;
    ui.context.hidden = !context;
    if (!context) { ui.contextText.textContent = ""; return; }
    const target = state.messages.get(context.id);
    if (context.kind === "edit") {
      ui.contextText.textContent = "Editing your message";
    } else {
      const text = textOf(target).replace(/\s+/g, " ");
      ui.contextText.textContent = "Replying to " + (target ? senderInfo(target.client_id).name : "a message") + ": " +
        (text.length > QUOTE_CHARS ? text.slice(0, QUOTE_CHARS) + "…" : text);
    }
  }

  /** Plain strings as text with http/https links; files as images and chips; anything
   *  else as compact JSON. */
  function fillBubble(bubble, message) {
    if (typeof message === "string") {
      bubble.classList.add("text");
      appendLinkified(bubble, message);
      return;
    }
    const files = attachmentsOf(message);
    if (files) {
      bubble.classList.add("attachments");
      if (typeof message.text === "string" && message.text.trim()) {
        const caption = el("div", "caption");
        appendLinkified(caption, message.text);
        bubble.appendChild(caption);
      }
      for (const file of files) bubble.appendChild(file.image ? imageNode(file) : fileChip(file));
      return;
    }
    bubble.classList.add("text", "json");
    let json;
    try { json = JSON.stringify(message); } catch (e) { json = String(message); }
    bubble.textContent = json === undefined ? "null" : json;
  }

  const URL_PATTERN = /\bhttps?:\/\/[^\s<>"'`]+/gi;
  function appendLinkified(parent, text) {
    let last = 0;
    for (const match of text.matchAll(URL_PATTERN)) {
      let url = match[0];
      // Trailing punctuation usually ends the sentence, not the link.
      while (/[.,;:!?)\]}]$/.test(url)) {
        if (url.endsWith(")") && (url.match(/\(/g) || []).length >= (url.match(/\)/g) || []).length) break;
        url = url.slice(0, -1);
      }
      let parsed = null;
      try { parsed = new URL(url); } catch (e) { parsed = null; }
      if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) continue;
      if (match.index > last) parent.appendChild(document.createTextNode(text.slice(last, match.index)));
      const a = document.createElement("a");
      a.href = parsed.href;
      a.textContent = url;
      a.target = "_blank";
      a.rel = "noopener noreferrer nofollow";
      parent.appendChild(a);
      last = match.index + url.length;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  function addNotice(text) {
    const stick = nearBottom();
    const notice = el("div", "notice", text);
    ui.messages.appendChild(notice);
    if (stick) scrollToBottom();
  }

  // ---------------------------------------------------------------- members
  function renderMembers() {
    ui.members.replaceChildren();
    const entries = Array.from(state.members.entries()).sort((a, b) => {
      if (a[0] === state.clientId) return -1;
      if (b[0] === state.clientId) return 1;
      return displayName(a[0], a[1]).localeCompare(displayName(b[0], b[1]));
    });
    for (const [id, data] of entries) {
      const li = el("li", "member");
      li.dataset.id = id;
      const avatar = el("span", "avatar small");
      avatar.setAttribute("aria-hidden", "true");
      const name = displayName(id, data);
      paintAvatar(avatar, name, data && data.color);
      li.append(avatar, el("span", "member-name", name));
      if (id === state.clientId) li.appendChild(el("span", "you", "(you)"));
      const user = state.memberUsers.get(id);
      if (user && user !== state.userId && id !== state.clientId) {
        const dm = el("button", "dm-button link-button", "Message");
        dm.type = "button";
        dm.setAttribute("aria-label", "Send " + name + " a direct message");
        dm.addEventListener("click", () => startDirect(user));
        li.appendChild(dm);
      }
      ui.members.appendChild(li);
    }
    const count = state.members.size;
    ui.onlineCount.textContent = String(count);
    ui.membersToggleCount.textContent = state.observable ? String(count) : "–";
    ui.membersNote.hidden = state.observable;
  }
  /** The members/rooms drawer at phone width (always visible on wider screens). */
  function setDrawer(open, returnFocus) {
    ui.sidebar.classList.toggle("open", open);
    ui.scrim.hidden = !open;
    ui.membersToggle.setAttribute("aria-expanded", String(open));
    if (open) ui.sidebarClose.focus();
    else if (returnFocus) ui.membersToggle.focus();
  }
  ui.membersToggle.addEventListener("click", () => setDrawer(!ui.sidebar.classList.contains("open"), false));
  ui.sidebarClose.addEventListener("click", () => setDrawer(false, true));
  ui.scrim.addEventListener("click", () => setDrawer(false, false));
  ui.recentRooms.addEventListener("click", (event) => { if (event.target.closest("a")) setDrawer(false, false); });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && ui.sidebar.classList.contains("open")) setDrawer(false, true);
  });

  // ---------------------------------------------------------------- typing
  function setTyping(id, typing) {
    const timer = state.typingPeople.get(id);
    if (timer) clearTimeout(timer);
    if (typing) {
      state.typingPeople.set(id, setTimeout(() => { state.typingPeople.delete(id); renderTyping(); }, TYPING_SHOW_MS));
    } else {
      state.typingPeople.delete(id);
    }
    renderTyping();
  }
  function renderTyping() {
    const names = Array.from(state.typingPeople.keys()).map((id) => senderInfo(id).name);
    let text = "";
    if (names.length === 1) text = names[0] + " is typing…";
    else if (names.length > 1 && names.length <= 3) text = names.join(", ") + " are typing…";
    else if (names.length > 3) text = names.slice(0, 2).join(", ") + " and " + (names.length - 2) + " others are typing…";
    ui.typing.textContent = text;
  }
  function noteTyping() {
    if (!state.subscribed) return;
    // Re-announced every TYPING_REPEAT_MS while typing goes on, so people who join meanwhile
    // see it too and nobody's indicator expires mid-sentence.
    if (!state.typingSent || Date.now() - state.typingSentAt > TYPING_REPEAT_MS) {
      state.typingSent = true;
      state.typingSentAt = Date.now();
      send({ type: "publish", room: state.room, message: { typing: true } }, () => {});
    }
    clearTimeout(state.typingIdleTimer);
    state.typingIdleTimer = setTimeout(stopTyping, TYPING_IDLE_MS);
  }
  function stopTyping() {
    clearTimeout(state.typingIdleTimer);
    if (!state.typingSent) return;
    state.typingSent = false;
    if (state.subscribed) send({ type: "publish", room: state.room, message: { typing: false } }, () => {});
  }

  // ---------------------------------------------------------------- composing
  function autosize() {
    ui.composer.style.height = "auto";
    ui.composer.style.height = Math.min(ui.composer.scrollHeight + 2, 160) + "px";
  }
  ui.composer.addEventListener("input", () => {
    autosize();
    if (ui.composer.value.trim()) noteTyping(); else stopTyping();
  });
  // Touch screens have no hover: a tap on a message shows its actions (another tap hides them).
  ui.messages.addEventListener("click", (event) => {
    if (event.target.closest("a, button, img")) return;
    const row = event.target.closest(".message");
    for (const open of ui.messages.querySelectorAll(".message.show-actions")) if (open !== row) open.classList.remove("show-actions");
    if (row) row.classList.toggle("show-actions");
  });
  ui.contextCancel.addEventListener("click", () => {
    if (state.editing) { ui.composer.value = ""; autosize(); }
    setComposerContext(null);
    ui.composer.focus();
  });
  ui.composer.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && (state.replyTo || state.editing)) {
      event.preventDefault();
      ui.contextCancel.click();
      return;
    }
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      sendComposer();
    }
  });
  ui.composerForm.addEventListener("submit", (event) => { event.preventDefault(); sendComposer(); });

  function sendComposer() {
    const text = ui.composer.value.replace(/\s+$/, "");
    const ready = state.uploads.filter((u) => u.attachment);
    const pending = state.uploads.filter((u) => !u.attachment);
    if (pending.length) {
      showError("Wait for “" + pending[0].name + "” to finish uploading, or cancel it.");
      return;
    }
    if (!text.trim() && !ready.length) return;
    if (text.length > MAX_MESSAGE_CHARS) {
      showError("That message is too long (" + text.length.toLocaleString() + " characters; the limit is " +
        MAX_MESSAGE_CHARS.toLocaleString() + "). Shorten it or split it up.");
      return;
    }
    if (!state.subscribed) {
      showError("Not connected right now. Your message is kept in the box; send it again once reconnected.");
      // Kept on screen until the connection is back: a failed reconnect attempt must not
      // replace it with its own "can't reach" line while the user reads it.
      state.keptMessageNotice = true;
      return;
    }
    stopTyping();
    if (state.editing) {
      if (ready.length) { showError("Files can't be added to an edit; send them as a new message."); return; }
      if (!text.trim()) return;
      const target = state.editing.id;
      if (!act("edit", target, { message: text })) return;
      setComposerContext(null);
      ui.composer.value = "";
      autosize();
      ui.composer.focus();
      return;
    }
    // With files: {"text": caption, "attachments": [{id}]}; the server fills in the rest.
    let message = text;
    if (ready.length) {
      message = { attachments: ready.map((u) => ({ id: u.attachment.id })) };
      if (text.trim()) message = { text: text, attachments: message.attachments };
    }
    const sentUploads = ready.slice();
    const command = { type: "publish", room: state.room, message: message };
    // A reply is a publish naming the message it answers.
    if (state.replyTo) command.reply_to = state.replyTo.id;
    const sent = send(command, (reply) => {
      if (reply.error) {
        showError(plainError(reply.error, "Your message was not sent"));
        if (!ui.composer.value) { ui.composer.value = text; autosize(); }
        for (const upload of sentUploads) if (!state.uploads.includes(upload)) addToTray(upload);
      }
    });
    if (!sent) { showError("Not connected right now. Your message is kept in the box."); return; }
    for (const upload of sentUploads) removeUpload(upload);
    setComposerContext(null);
    ui.composer.value = "";
    autosize();
    ui.composer.focus();
  }

  // ---------------------------------------------------------------- files
  /** Decimal units, as the server's line door shows them: 512 B, 3.4 KB, 1.2 MB. */
  function humanSize(bytes) {
    if (!(bytes >= 1000)) return Math.max(0, Number(bytes) || 0) + " B";
    const units = ["KB", "MB", "GB", "TB"];
    let value = bytes / 1000, unit = 0;
    while (unit < units.length - 1 && value >= 999.5) { value /= 1000; unit += 1; }
    return (value < 9.95 ? value.toFixed(1) : String(Math.round(value))) + " " + units[unit];
  }
  /** The path of one of this server's file URLs, or null. */
  function localFilePath(url) {
    if (typeof url !== "string") return null;
    let parsed;
    try { parsed = new URL(url, location.href); } catch (e) { return null; }
    return FILE_PATH.test(parsed.pathname) ? parsed.pathname : null;
  }
  /** The valid attachments of a body `{text?, attachments: [...]}`, or null. */
  function attachmentsOf(message) {
    if (!message || typeof message !== "object" || Array.isArray(message) || !Array.isArray(message.attachments)) return null;
    const files = [];
    for (const a of message.attachments.slice(0, MAX_ATTACHMENTS)) {
      if (!a || typeof a !== "object" || typeof a.name !== "string" || typeof a.mime !== "string") continue;
      const path = localFilePath(a.url);
      if (!path) continue;
      const thumb = a.thumbnail && typeof a.thumbnail === "object" ? localFilePath(a.thumbnail.url) : null;
      const image = !!thumb && Number.isInteger(a.width) && Number.isInteger(a.height) &&
        a.mime.startsWith("image/") && a.mime !== "image/svg+xml";
      files.push({ path: path, name: a.name, mime: a.mime, size: Number(a.size) || 0, image: image, thumb: thumb,
        thumbWidth: image ? Number(a.thumbnail.width) || 0 : 0, thumbHeight: image ? Number(a.thumbnail.height) || 0 : 0 });
    }
    return files.length ? files : null;
  }
  function imageNode(file) {
    const button = el("button", "attachment-image");
    button.type = "button";
    button.setAttribute("aria-label", "Open image " + file.name);
    const img = document.createElement("img");
    img.src = file.thumb;
    img.alt = file.name;
    img.loading = "lazy";
    if (file.thumbWidth && file.thumbHeight) { img.width = file.thumbWidth; img.height = file.thumbHeight; }
    button.appendChild(img);
    button.addEventListener("click", () => openViewer(file));
    return button;
  }
  function fileChip(file) {
    const a = el("a", "file-chip");
    a.href = file.path;
    a.download = file.name;
    a.title = "Download " + file.name;
    const icon = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    icon.setAttribute("viewBox", "0 0 24 24");
    icon.setAttribute("width", "20");
    icon.setAttribute("height", "20");
    icon.setAttribute("aria-hidden", "true");
    const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
    path.setAttribute("fill", "currentColor");
    path.setAttribute("d", "M6 2h8l6 6v12a2 2 0 0 1-2 2H6a2 2 0 0 1-2-2V4a2 2 0 0 1 2-2zm7 1.5V9h5.5L13 3.5zM8 13h8v1.5H8V13zm0 3.5h8V18H8v-1.5z");
    icon.appendChild(path);
    a.append(icon, el("span", "file-name", file.name), el("span", "file-size", humanSize(file.size)));
    return a;
  }
  function openViewer(file) {
    ui.viewerImage.src = file.path;
    ui.viewerImage.alt = file.name;
    ui.viewerName.textContent = file.name;
    ui.viewerDownload.href = file.path;
    ui.viewerDownload.download = file.name;
    if (typeof ui.viewer.showModal === "function") ui.viewer.showModal(); else ui.viewer.setAttribute("open", "");
    ui.viewerClose.focus();
  }
  function closeViewer() { if (ui.viewer.open) ui.viewer.close(); }
  ui.viewer.addEventListener("close", () => { ui.viewerImage.removeAttribute("src"); });
  ui.viewerClose.addEventListener("click", closeViewer);
  // A click outside the picture (on the backdrop) closes too; Esc closes a modal dialog.
  ui.viewer.addEventListener("click", (event) => { if (event.target === ui.viewer) closeViewer(); });

  /** A server refusal in plain words. */
  function uploadError(status, text, name) {
    const why = String(text || "").trim();
    if (status === 413) return "“" + name + "” is too big to send here (" + why + ").";
    if (status === 415) return "“" + name + "” can't be sent here: " + why + ".";
    if (status === 429) return "Can't send “" + name + "” right now: " + why + ".";
    if (status === 0) return "The upload of “" + name + "” failed: the connection was lost.";
    return "Couldn't upload “" + name + "” (" + status + "): " + why;
  }
  function attachFiles(list) {
    for (const file of Array.from(list || [])) {
      if (state.uploads.length >= MAX_ATTACHMENTS) {
        showError("At most " + MAX_ATTACHMENTS + " files per message.");
        return;
      }
      startUpload(file);
    }
  }
  function startUpload(file) {
    if (!state.subscribed) { showError("Not connected right now: attach the file again once reconnected."); return; }
    const upload = { key: ++state.uploadCounter, name: file.name || "file", size: file.size, xhr: null, attachment: null,
      node: null, progress: 0 };
    addToTray(upload);
    const xhr = new XMLHttpRequest();
    upload.xhr = xhr;
    xhr.open("POST", "/" + encodeURIComponent(state.channel) + "/files?room=" + encodeURIComponent(state.room) +
      "&name=" + encodeURIComponent(upload.name));
    xhr.setRequestHeader("Content-Type", file.type || "application/octet-stream");
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) { upload.progress = event.loaded / event.total; renderUpload(upload); }
    };
    xhr.onload = () => {
      upload.xhr = null;
      let answer = null;
      try { answer = JSON.parse(xhr.responseText); } catch (e) { answer = null; }
      if (xhr.status === 201 && answer && typeof answer.id === "string") {
        upload.attachment = answer;
        upload.progress = 1;
        renderUpload(upload);
        ui.composer.focus();
      } else {
        removeUpload(upload);
        showError(uploadError(xhr.status, xhr.responseText, upload.name));
      }
    };
    xhr.onerror = () => { upload.xhr = null; removeUpload(upload); showError(uploadError(0, "", upload.name)); };
    xhr.onabort = () => { upload.xhr = null; removeUpload(upload); };
    xhr.send(file);
  }
  function addToTray(upload) {
    state.uploads.push(upload);
    const li = el("li", "tray-item");
    li.dataset.key = String(upload.key);
    const cancel = el("button", "icon-button", "✕");
    cancel.type = "button";
    cancel.className = "icon-button tray-cancel";
    cancel.addEventListener("click", () => { if (upload.xhr) upload.xhr.abort(); else removeUpload(upload); });
    const progress = document.createElement("progress");
    progress.max = 1;
    li.append(el("span", "tray-name", upload.name), el("span", "tray-state"), progress, cancel);
    upload.node = li;
    ui.tray.appendChild(li);
    ui.tray.hidden = false;
    renderUpload(upload);
  }
  function renderUpload(upload) {
    const li = upload.node;
    if (!li) return;
    const done = !!upload.attachment;
    li.classList.toggle("ready", done);
    li.querySelector("progress").value = upload.progress;
    li.querySelector("progress").hidden = done;
    li.querySelector(".tray-state").textContent = done
      ? humanSize(upload.attachment.size) + " · ready to send"
      : humanSize(upload.size) + " · " + Math.floor(upload.progress * 100) + "%";
    const cancel = li.querySelector(".tray-cancel");
    cancel.setAttribute("aria-label", (done ? "Remove " : "Cancel the upload of ") + upload.name);
    cancel.title = done ? "Remove" : "Cancel";
  }
  function removeUpload(upload) {
    state.uploads = state.uploads.filter((u) => u !== upload);
    if (upload.node) upload.node.remove();
    upload.node = null;
    ui.tray.hidden = state.uploads.length === 0;
  }
  function clearUploads() {
    for (const upload of state.uploads.slice()) { if (upload.xhr) upload.xhr.abort(); removeUpload(upload); }
  }
  ui.attach.addEventListener("click", () => ui.fileInput.click());
  ui.fileInput.addEventListener("change", () => { attachFiles(ui.fileInput.files); ui.fileInput.value = ""; });
  ui.composer.addEventListener("paste", (event) => {
    const files = event.clipboardData ? Array.from(event.clipboardData.files || []) : [];
    if (!files.length) return;
    event.preventDefault();
    attachFiles(files);
  });
  const carriesFiles = (event) => !!event.dataTransfer && Array.from(event.dataTransfer.types || []).includes("Files");
  let dragDepth = 0;
  ui.app.addEventListener("dragenter", (event) => {
    if (!carriesFiles(event)) return;
    dragDepth += 1;
    ui.drop.hidden = false;
  });
  ui.app.addEventListener("dragleave", (event) => {
    if (!carriesFiles(event)) return;
    dragDepth = Math.max(0, dragDepth - 1);
    if (!dragDepth) ui.drop.hidden = true;
  });
  ui.app.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
  });
  ui.app.addEventListener("drop", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dragDepth = 0;
    ui.drop.hidden = true;
    attachFiles(event.dataTransfer.files);
  });

  // ---------------------------------------------------------------- scrolling back through history
  function maybeLoadMore() {
    if (!state.subscribed || !state.historySupported || !state.hasMore || state.loadingHistory) return;
    if (state.oldestOffset !== null && state.oldestOffset <= 1) { state.hasMore = false; markStart(); return; }
    if (ui.log.scrollTop > 120 && ui.log.scrollHeight > ui.log.clientHeight) return;
    if (state.oldestOffset === null) return; // nothing shown yet: nothing older to ask for
    state.loadingHistory = true;
    ui.historyTop.textContent = "Loading older messages…";
    const room = state.room;
    const sent = send({ type: "history", room: room, before: state.oldestOffset, limit: PAGE_SIZE }, (reply) => {
      state.loadingHistory = false;
      if (room !== state.room) return;
      ui.historyTop.textContent = "";
      if (typeof reply.error === "string" && reply.error.startsWith("history rate limit")) {
        setTimeout(maybeLoadMore, 1000); // paging too fast: the server asks us to slow down
        return;
      }
      if (reply.error || !Array.isArray(reply.messages)) {
        state.historySupported = false; // an older server: no paging, no fuss
        return;
      }
      const messages = reply.messages.slice().sort((a, b) => (b.offset || 0) - (a.offset || 0));
      for (const m of messages) {
        if (!m || isTypingBody(m.message)) continue;
        if (m.deleted === true) {
          // A tombstone: nothing to show, but paging goes on past it (and replies say so).
          if (typeof m.id === "string" && !state.messages.has(m.id)) state.messages.set(m.id, { id: m.id, offset: m.offset, deleted: true });
          if (Number.isInteger(m.offset) && (state.oldestOffset === null || m.offset < state.oldestOffset)) state.oldestOffset = m.offset;
          continue;
        }
        addMessage(m, { prepend: true });
      }
      state.hasMore = reply.has_more === true && messages.length > 0;
      if (!state.hasMore) markStart();
      else setTimeout(maybeLoadMore, 50);
    });
    if (!sent) state.loadingHistory = false;
  }
  function markStart() { ui.historyTop.textContent = "This is the beginning of #" + state.room + "."; }
  ui.log.addEventListener("scroll", () => {
    if (nearBottom()) ui.jump.hidden = true;
    if (ui.log.scrollTop < 120) maybeLoadMore();
  }, { passive: true });
  ui.jump.addEventListener("click", () => { scrollToBottom(); ui.composer.focus(); });

  // ---------------------------------------------------------------- unread count in the title
  function updateTitle() {
    const base = "#" + state.room + " · Parley";
    document.title = state.unread > 0 ? "(" + state.unread + ") " + base : base;
  }
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) { state.unread = 0; updateTitle(); scheduleRead(); }
  });

  // ---------------------------------------------------------------- users: read marks, receipts, the inbox
  /** A direct room's title: the other users ("@u-1f…"), else "#room". */
  function roomTitle(room) {
    const users = directUsers(room);
    if (!users) return "#" + room;
    const others = users.filter((u) => u !== state.userId);
    return "@" + (others.length ? others.map(userName).join(", ") : room);
  }
  function directUsers(room) {
    if (!room.startsWith("dm+")) return null;
    const users = room.slice(3).split("+");
    return users.length >= 2 ? users : null;
  }
  /** A user's name as this page knows it (a member's, a receipt's), else the id. */
  function userName(user) {
    for (const [id, u] of state.memberUsers) if (u === user) return displayName(id, knownMember(id));
    const receipt = state.receipts.get(user);
    if (receipt && receipt.name) return receipt.name;
    for (const c of state.conversations.values()) if (c.last && c.last.user === user && c.last.name) return c.last.name;
    return user;
  }

  /** Marks the room read up to the newest message shown, when the page is seen at the
   *  bottom of the conversation; at most one mark every half second. */
  function scheduleRead() {
    if (state.readTimer) return;
    state.readTimer = setTimeout(() => {
      state.readTimer = null;
      const newest = state.lastOffset[roomKey()] || 0;
      if (document.hidden || !state.subscribed || !nearBottom() || newest <= state.readSent) return;
      state.readSent = newest;
      send({ type: "read", room: state.room, offset: newest }, () => {});
    }, 500);
  }

  function onReceipts(list) {
    state.receipts.clear();
    for (const r of Array.isArray(list) ? list : []) {
      if (r && typeof r.user === "string" && Number.isInteger(r.offset)) state.receipts.set(r.user, { name: String(r.name || r.user), offset: r.offset });
    }
    renderSeenBy();
  }
  function onRead(data) {
    if (typeof data.user !== "string" || !Number.isInteger(data.offset)) return;
    const old = state.receipts.get(data.user);
    if (!old || old.offset < data.offset) state.receipts.set(data.user, { name: String(data.name || data.user), offset: data.offset });
    renderSeenBy();
  }
  function onUnread(data) {
    const c = state.conversations.get(state.room);
    if (c) { c.unread = Number(data.unread) || 0; c.mentions = Number(data.mentions) || 0; renderConversations(); }
  }

  /** "Seen by Bob, Carol" under this user's newest message, when anyone else read it. */
  function renderSeenBy() {
    for (const old of Array.from(ui.messages.querySelectorAll(".seen-by"))) old.remove();
    const own = Array.from(ui.messages.querySelectorAll(".message.own[data-offset]")).pop();
    if (!own) return;
    const offset = Number(own.dataset.offset);
    const names = Array.from(state.receipts.entries())
      .filter(([user, r]) => user !== state.userId && r.offset >= offset).map(([, r]) => r.name).sort();
    if (!names.length) return;
    const line = el("div", "seen-by", "Seen by " + names.join(", "));
    own.after(line);
  }

  function watchInbox() {
    send({ type: "inbox", limit: 50, watch: true }, (reply) => {
      if (!Array.isArray(reply.conversations)) return;
      state.conversations.clear();
      for (const c of reply.conversations) onConversation(c, true);
      renderConversations();
    });
  }
  function onConversation(c, quiet) {
    if (!c || typeof c.room !== "string") return;
    state.conversations.set(c.room, c);
    if (!quiet) renderConversations();
  }
  function renderConversations() {
    if (!ui.conversations) return;
    ui.conversations.replaceChildren();
    const list = Array.from(state.conversations.values()).sort((a, b) => (b.activity || 0) - (a.activity || 0) || a.room.localeCompare(b.room));
    ui.conversationsNote.hidden = list.length > 0;
    for (const c of list) {
      const li = el("li", "conversation");
      li.dataset.room = c.room;
      const a = el("a");
      a.href = hashFor(state.channel, c.room);
      if (c.room === state.room) a.setAttribute("aria-current", "page");
      const title = el("span", "conversation-title", roomTitle(c.room));
      a.appendChild(title);
      const unread = c.room === state.room && !document.hidden ? 0 : Number(c.unread) || 0;
      if (unread > 0) {
        const badge = el("span", "badge" + (Number(c.mentions) > 0 ? " mention" : ""), unread > 99 || c.unread_capped ? "99+" : String(unread));
        badge.setAttribute("aria-label", unread + " unread" + (Number(c.mentions) > 0 ? ", " + c.mentions + " mentioning you" : ""));
        a.appendChild(badge);
      }
      if (c.last && c.last.message !== undefined && !c.last.deleted) {
        const text = typeof c.last.message === "string" ? c.last.message
          : (c.last.message && typeof c.last.message.text === "string" ? c.last.message.text || "📎 file" : "");
        const who = c.last.user === state.userId ? "You" : String(c.last.name || "");
        a.appendChild(el("span", "conversation-last", (who ? who + ": " : "") + text.slice(0, 80)));
      }
      li.appendChild(a);
      ui.conversations.appendChild(li);
    }
  }
  ui.conversations && ui.conversations.addEventListener("click", (event) => { if (event.target.closest("a")) setDrawer(false, false); });

  /** Opens (or finds) the direct room with `user` and goes there. */
  function startDirect(user) {
    send({ type: "dm", users: [user] }, (reply) => {
      if (reply.error || typeof reply.room !== "string") { showError(plainError(reply.error, "Couldn't start a direct message")); return; }
      setDrawer(false, false);
      location.hash = hashFor(state.channel, reply.room);
    });
  }

  // ---------------------------------------------------------------- start
  const start = parseHash();
  state.channel = start.channel;
  state.room = start.room;
  resetRoomView();
  renderIdentity();
  if (!state.identity || typeof state.identity.name !== "string" || !state.identity.name) {
    state.identity = null;
    setStatus("connecting", "Pick a name to join");
    openIdentityDialog(true);
  } else {
    if (!isColor(state.identity.color)) state.identity.color = randomColor();
    connect();
  }
  // For tests and debugging in the console; never used by the page itself.
  window.parley = { state: state };
})();
