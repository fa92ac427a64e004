-- Version 150: standing answers. When the user picks an agent's `allow_always` or
-- `reject_always` option, batond keeps a rule on that session for the tool (its kind and title)
-- and answers the session's later matching requests itself, across batond restarts and agent
-- resumes (an agent's own memory of "always" ends with its process). One rule per tool and
-- session: a later choice for the same tool replaces it.

CREATE TABLE permission_rules (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES task_sessions(id),
    tool_kind   TEXT NOT NULL,
    tool_title  TEXT NOT NULL,
    decision    TEXT NOT NULL,
    option_kind TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    applied     INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, tool_kind, tool_title)
);
