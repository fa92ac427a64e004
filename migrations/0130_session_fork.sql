-- Version 130: where a session was forked from. A fork is a new session of the same task that
-- starts from the source's conversation: `forked_from` names the source session and
-- `forked_at_seq` the source's last journal event the fork copied. NULL for sessions that are
-- not forks. The source may be deleted later (with its task): the fork keeps the ids.

ALTER TABLE task_sessions ADD COLUMN forked_from TEXT;
ALTER TABLE task_sessions ADD COLUMN forked_at_seq INTEGER;
