-- Version 220: what a session's agent offers to switch (its modes and configuration options,
-- as it last said: kept up to date from the journal's `mode` and `options` events) and what the
-- user chose (set again on the agent after every start, so a choice outlives the agent process).
-- Both are JSON documents of the protocol's `SessionOptions` and `ChosenOptions`.

CREATE TABLE session_options (
    session_id TEXT PRIMARY KEY REFERENCES task_sessions(id),
    offered    TEXT NOT NULL DEFAULT '{}',
    chosen     TEXT NOT NULL DEFAULT '{}'
);
