// The globals the vendored protocol test suites expect (fetch, WebSocket, chai), from what
// Debian packages: Node's own fetch, Debian's node-ws (found through NODE_PATH, which only
// CommonJS resolution reads), and ./chai-shim.mjs instead of chai + chai-string (Debian has
// no chai). run.sh sets NODE_PATH.
import { createRequire } from "node:module";
import chai from "./chai-shim.mjs";

const require = createRequire(import.meta.url);
const { WebSocket } = require("ws");

globalThis.WebSocket = WebSocket;
globalThis.chai = chai;
if (typeof globalThis.fetch !== "function") {
  throw new Error("this Node has no global fetch (Node 18 or later is needed)");
}
