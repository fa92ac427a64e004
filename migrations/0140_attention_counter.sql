-- Version 140: the server-wide count of sessions that need the user (attention set, task not
-- archived), kept by triggers in the same transaction as every change that moves it, so that
-- reading it is one row instead of a count over every such session (each `task.session.list`
-- answer and each `attention.changed` carry it).

CREATE TABLE attention_counter (
    id    INTEGER PRIMARY KEY CHECK (id = 0),
    value INTEGER NOT NULL
);
INSERT INTO attention_counter (id, value)
SELECT 0, COUNT(*) FROM task_sessions s JOIN tasks t ON t.id = s.task_id
WHERE s.attention IS NOT NULL AND t.archived = 0;

-- Whether a session of task `id` counts: its task exists and is not archived (0 or 1).
-- Written out in each trigger (SQLite has no stored functions).

CREATE TRIGGER attention_counter_session_inserted AFTER INSERT ON task_sessions
WHEN NEW.attention IS NOT NULL
BEGIN
    UPDATE attention_counter
    SET value = value + COALESCE((SELECT archived = 0 FROM tasks WHERE id = NEW.task_id), 0);
END;

CREATE TRIGGER attention_counter_session_deleted AFTER DELETE ON task_sessions
WHEN OLD.attention IS NOT NULL
BEGIN
    UPDATE attention_counter
    SET value = value - COALESCE((SELECT archived = 0 FROM tasks WHERE id = OLD.task_id), 0);
END;

CREATE TRIGGER attention_counter_session_updated AFTER UPDATE OF attention, task_id ON task_sessions
WHEN (OLD.attention IS NULL) IS NOT (NEW.attention IS NULL) OR OLD.task_id IS NOT NEW.task_id
BEGIN
    UPDATE attention_counter
    SET value = value
        - (OLD.attention IS NOT NULL AND COALESCE((SELECT archived = 0 FROM tasks WHERE id = OLD.task_id), 0))
        + (NEW.attention IS NOT NULL AND COALESCE((SELECT archived = 0 FROM tasks WHERE id = NEW.task_id), 0));
END;

CREATE TRIGGER attention_counter_task_archived AFTER UPDATE OF archived ON tasks
WHEN (OLD.archived = 0) IS NOT (NEW.archived = 0)
BEGIN
    UPDATE attention_counter
    SET value = value + ((NEW.archived = 0) - (OLD.archived = 0))
        * (SELECT COUNT(*) FROM task_sessions WHERE task_id = NEW.id AND attention IS NOT NULL);
END;

-- A task deleted before its sessions takes their count with it; sessions deleted afterwards
-- find no task and count 0.
CREATE TRIGGER attention_counter_task_deleted AFTER DELETE ON tasks
WHEN OLD.archived = 0
BEGIN
    UPDATE attention_counter
    SET value = value - (SELECT COUNT(*) FROM task_sessions WHERE task_id = OLD.id AND attention IS NOT NULL);
END;
