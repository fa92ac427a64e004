-- Version 2: each session keeps the sequence number of its newest event (so appending does not
-- scan the journal) and whether a turn is open (so a restart can close it as interrupted).
-- The process start time lets startup tell a leftover agent from an unrelated process that
-- reused its pid.

ALTER TABLE task_sessions ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE task_sessions ADD COLUMN turn_open INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executors_running ADD COLUMN pid_start_time INTEGER;
ALTER TABLE tasks ADD COLUMN worktree_branch TEXT;

UPDATE task_sessions
SET last_seq = (SELECT COALESCE(MAX(seq), 0) FROM session_events e WHERE e.session_id = task_sessions.id);

-- A session whose last turn_started has no turn_completed after it was mid-turn when version 1
-- stopped, whatever the agent had streamed since (chunks, tool calls): the startup
-- reconciliation then closes that turn as interrupted.
UPDATE task_sessions
SET turn_open = 1
WHERE COALESCE((SELECT MAX(seq) FROM session_events e
                WHERE e.session_id = task_sessions.id AND e.kind = 'turn_started'), 0)
    > COALESCE((SELECT MAX(seq) FROM session_events e
                WHERE e.session_id = task_sessions.id AND e.kind = 'turn_completed'), 0);
