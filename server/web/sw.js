// Baton's service worker: shows the pushes batond sends when a session starts needing you
// (docs/PROTOCOL.md, push.*), and answers a permission request from its notification's Allow
// and Reject actions through POST /push/answer, with the capability the push carries (bound
// to that one request, good once). Clicking the notification opens the session.

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch (_) {
    data = { body: event.data ? event.data.text() : "" };
  }
  const options = {
    body: data.body || "A session needs you",
    tag: `${data.session_id}:${data.attention}`,
    data,
    actions: Array.isArray(data.actions) ? data.actions : [],
    requireInteraction: data.attention === "permission",
  };
  event.waitUntil(self.registration.showNotification(data.title || "Baton", options));
});

self.addEventListener("notificationclick", (event) => {
  const data = event.notification.data || {};
  event.notification.close();
  if ((event.action === "allow" || event.action === "reject") && data.capability) {
    event.waitUntil(answer(data, event.action));
    return;
  }
  event.waitUntil(open(data));
});

async function answer(data, action) {
  let said;
  try {
    const response = await fetch("/push/answer", {
      method: "POST",
      headers: { "Baton-Capability": data.capability, "Baton-Answer": action },
      cache: "no-store",
    });
    said = response.ok ? null : (await response.text()).trim();
  } catch (e) {
    said = "Baton could not be reached: " + e.message;
  }
  if (said) await self.registration.showNotification("Baton", { body: said, tag: `${data.session_id}:answer` });
}

// A page already open is focused and told which session to show; else one is opened on it.
async function open(data) {
  const pages = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const page of pages) {
    if ("focus" in page) {
      page.postMessage({ select: data.session_id });
      return page.focus();
    }
  }
  return self.clients.openWindow(data.url || "/");
}
