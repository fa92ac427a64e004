-- Version 250: paired devices (a phone, a tablet). Each has a token of its own, kept only as
-- its SHA-256 (hex): the database never holds a token that opens the server. `limited` devices
-- may only watch and answer. A revoked device keeps its row (revoked_at set) for the record.

CREATE TABLE devices (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    limited      INTEGER NOT NULL DEFAULT 1,
    paired_at    TEXT NOT NULL,
    last_seen_at TEXT,
    last_address TEXT,
    revoked_at   TEXT
);
