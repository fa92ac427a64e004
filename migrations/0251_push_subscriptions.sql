-- Version 251: Web Push subscriptions (RFC 8030), each of a paired device (device_id) or of
-- the server's own token (device_id NULL). p256dh and auth are the subscription's keys
-- (base64url), which the payloads are encrypted for (RFC 8291).

CREATE TABLE push_subscriptions (
    id         TEXT PRIMARY KEY,
    device_id  TEXT,
    endpoint   TEXT NOT NULL UNIQUE,
    p256dh     TEXT NOT NULL,
    auth       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
