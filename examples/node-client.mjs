// A Baton client in Node, with the ES module batond serves (server/web/baton-client.js).
//
//   node examples/node-client.mjs                       # list every session, page by page
//   node examples/node-client.mjs SESSION_ID "a prompt"  # send a prompt and stream the reply
//
// The server is BATON_URL (default ws://127.0.0.1:7777/ws) and its token BATON_TOKEN, when it
// has one. Node 22+ has a WebSocket; on Node 20 and 21 run it with --experimental-websocket.
// The session is resumed first when the server says it needs resuming (PROTOCOL.md §8).

import { BatonClient } from "../server/web/baton-client.js";

const url = process.env.BATON_URL || "ws://127.0.0.1:7777/ws";
const [sessionId, prompt] = process.argv.slice(2);
const client = new BatonClient(url, { token: process.env.BATON_TOKEN });
client.on("close", ({ opened }) => {
  if (!opened) console.error(`cannot connect to ${url} (not running, or a token is needed); retrying`);
});

const hello = await client.opened();
console.error(`connected to batond ${hello.server_version} (protocol ${hello.protocol_version})`);

if (!sessionId) {
  // One page at a time (the server's default of 100 rows), each from the previous page's
  // next_cursor, until a page has none.
  let cursor;
  do {
    const page = await client.request("task.session.list", { cursor });
    for (const s of page.sessions) {
      console.log(`${s.session_id}  ${s.state}${s.needs_resume ? " (needs resume)" : ""}  ${s.task_title}`);
    }
    cursor = page.next_cursor;
  } while (cursor);
  client.close();
} else {
  // Listen before subscribing: the cursor is set before the request goes out, and replayed
  // events may arrive before its answer.
  const done = new Promise((resolve) => {
    client.on("event", ({ session_id, event }) => {
      if (session_id !== sessionId) return;
      if (event.kind === "message_chunk") process.stdout.write(event.text);
      if (event.kind === "turn_completed") resolve(event.stop_reason);
    });
  });
  await client.subscribe(sessionId); // from now on: only this turn's events
  const status = await client.request("task.session.status", { session_id: sessionId });
  if (status.needs_resume && status.is_resumable) {
    await client.request("task.session.resume", { session_id: sessionId });
    await new Promise((resolve) => {
      const off = client.on("state_changed", (change) => {
        if (change.session_id === sessionId && change.previous_state === "STARTING") {
          off();
          resolve();
        }
      });
    });
  }
  await client.request("message.add", { session_id: sessionId, content: prompt || "hello" });
  const stopReason = await done;
  process.stdout.write("\n");
  console.error(`turn ended: ${stopReason}`);
  client.close();
}
