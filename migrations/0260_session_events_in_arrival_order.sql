-- Version 260: the journal's rows kept in the order they are written (a rowid table) and found
-- by session and seq through an index, instead of a table keyed by (session_id, seq).
--
-- Keyed by session, every session that streamed in a commit had its own leaf of the table
-- rewritten, and the table's interior pages held whole rows as dividers: a large event (a
-- command list, a tool call's content) that became a divider was read again from disk, all
-- of it, by every later append that passed it on the way down. Now appends go to the table's
-- last page whatever the session, the index holds only (session_id, seq), and a row's size no
-- longer matters to an append. Reading back over a session's events now costs a lookup per
-- event, so the two other searches for the newest event of a kind (how the last turn ended,
-- whether a permission request was answered) get partial indexes of their own, as the turn's
-- start and usage have (migration 160); a streamed chunk is in none of them.

CREATE TABLE session_events_by_arrival (
    id         INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at TEXT NOT NULL
);

INSERT INTO session_events_by_arrival (session_id, seq, kind, payload, created_at)
SELECT session_id, seq, kind, payload, created_at FROM session_events ORDER BY session_id, seq;

DROP TABLE session_events;
ALTER TABLE session_events_by_arrival RENAME TO session_events;

CREATE UNIQUE INDEX session_events_key ON session_events (session_id, seq);
CREATE INDEX session_events_turn_started ON session_events (session_id, seq) WHERE kind = 'turn_started';
CREATE INDEX session_events_agent_update ON session_events (session_id, seq) WHERE kind = 'agent_update';
CREATE INDEX session_events_turn_completed ON session_events (session_id, seq) WHERE kind = 'turn_completed';
CREATE INDEX session_events_permission_resolved ON session_events (session_id, seq) WHERE kind = 'permission_resolved';
