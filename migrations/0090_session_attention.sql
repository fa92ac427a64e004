-- Version 90: why a session needs the user (`attention`: permission, input, resume, failed;
-- NULL when nothing) and since when (`attention_since`, RFC 3339 UTC). The server sets both
-- on every change of the facts; at startup it settles every session's.

ALTER TABLE task_sessions ADD COLUMN attention TEXT;
ALTER TABLE task_sessions ADD COLUMN attention_since TEXT;

-- The server-wide count of sessions that need the user.
CREATE INDEX task_sessions_needing_user ON task_sessions(task_id) WHERE attention IS NOT NULL;

-- A change of the reason is a change of what a list row shows.
CREATE TRIGGER task_sessions_attention_updated AFTER UPDATE OF attention ON task_sessions
BEGIN
    UPDATE change_counter SET value = value + 1;
    UPDATE task_sessions SET change_seq = (SELECT value FROM change_counter) WHERE id = NEW.id;
END;

-- Until the server settles them at its next start, failed sessions need the user since they
-- failed.
UPDATE task_sessions SET attention = 'failed', attention_since = updated_at WHERE state = 'FAILED';
