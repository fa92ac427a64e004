-- Baton schema, version 1: tasks, their sessions, the runtime record of each session's agent,
-- the per-session event journal and the folded message view.

CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL,
    description TEXT NOT NULL,
    state       TEXT NOT NULL,
    agent       TEXT NOT NULL,
    workdir     TEXT NOT NULL,
    repository  TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE task_sessions (
    id         TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL REFERENCES tasks(id),
    agent      TEXT NOT NULL,
    state      TEXT NOT NULL,
    last_error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX task_sessions_task ON task_sessions(task_id);

-- One row per session: what is needed to find, resume or clean up its agent after a restart.
CREATE TABLE executors_running (
    session_id         TEXT PRIMARY KEY REFERENCES task_sessions(id),
    resume_token       TEXT,
    last_message_uuid  TEXT,
    agent_execution_id TEXT,
    runtime            TEXT NOT NULL DEFAULT 'standalone',
    pid                INTEGER,
    worktree_id        TEXT,
    worktree_path      TEXT,
    worktree_branch    TEXT,
    status             TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);

CREATE TABLE session_events (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    message_id   TEXT,
    tool_call_id TEXT,
    text         TEXT NOT NULL DEFAULT '',
    status       TEXT,
    data         TEXT,
    closed       INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX messages_session_seq ON messages(session_id, seq);
CREATE UNIQUE INDEX messages_tool_call ON messages(session_id, tool_call_id) WHERE tool_call_id IS NOT NULL;
