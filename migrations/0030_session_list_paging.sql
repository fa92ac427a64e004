-- Version 30: `task.session.list` pages. Indexes for its orders, and a server-wide change
-- sequence: every change of what a list row shows (the session's state, error or agent, its
-- task's title, state or archived flag, its agent record) stamps the session with the next
-- value, so that a client can ask for the rows changed since the value it last saw. Appending
-- to the journal (`last_seq`, `turn_open`) does not count: the journal tells that itself.

CREATE TABLE change_counter (
    id    INTEGER PRIMARY KEY CHECK (id = 0),
    value INTEGER NOT NULL
);
INSERT INTO change_counter (id, value) VALUES (0, 0);

ALTER TABLE task_sessions ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;

CREATE INDEX task_sessions_created ON task_sessions(created_at, id);
CREATE INDEX task_sessions_attention
    ON task_sessions((state NOT IN ('WAITING_FOR_INPUT', 'FAILED')), created_at DESC, id DESC);
CREATE INDEX task_sessions_changed ON task_sessions(change_seq, id);

CREATE TRIGGER task_sessions_inserted AFTER INSERT ON task_sessions
BEGIN
    UPDATE change_counter SET value = value + 1;
    UPDATE task_sessions SET change_seq = (SELECT value FROM change_counter) WHERE id = NEW.id;
END;

CREATE TRIGGER task_sessions_updated AFTER UPDATE OF task_id, agent, state, last_error, updated_at ON task_sessions
BEGIN
    UPDATE change_counter SET value = value + 1;
    UPDATE task_sessions SET change_seq = (SELECT value FROM change_counter) WHERE id = NEW.id;
END;

CREATE TRIGGER tasks_updated AFTER UPDATE OF title, state, archived ON tasks
BEGIN
    UPDATE change_counter SET value = value + 1;
    UPDATE task_sessions SET change_seq = (SELECT value FROM change_counter) WHERE task_id = NEW.id;
END;

CREATE TRIGGER executors_inserted AFTER INSERT ON executors_running
BEGIN
    UPDATE change_counter SET value = value + 1;
    UPDATE task_sessions SET change_seq = (SELECT value FROM change_counter) WHERE id = NEW.session_id;
END;

CREATE TRIGGER executors_updated AFTER UPDATE OF resume_token, runtime, pid, worktree_path, status ON executors_running
BEGIN
    UPDATE change_counter SET value = value + 1;
    UPDATE task_sessions SET change_seq = (SELECT value FROM change_counter) WHERE id = NEW.session_id;
END;

CREATE TRIGGER executors_deleted AFTER DELETE ON executors_running
BEGIN
    UPDATE change_counter SET value = value + 1;
    UPDATE task_sessions SET change_seq = (SELECT value FROM change_counter) WHERE id = OLD.session_id;
END;

-- Existing sessions, oldest first, get the first values.
UPDATE task_sessions SET change_seq = ranked.n
FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM task_sessions) AS ranked
WHERE ranked.id = task_sessions.id;
UPDATE change_counter SET value = (SELECT COUNT(*) FROM task_sessions);
