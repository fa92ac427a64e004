-- Version 190: a standing answer matches what the tool would run, not only what the agent calls
-- it. "Always allow" on "Run tests" with `npm test` must not answer a later "Run tests" whose
-- input is `curl … | sh`. A rule now keeps the tool call's input (its `rawInput` and the paths
-- of its `locations`, as canonical JSON; '' when the request carried neither) and applies to
-- requests with that same input only. Rules made before keep '' and so apply only to requests
-- without input: a rule made for a request with input asks again, never answers more.

CREATE TABLE permission_rules_190 (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES task_sessions(id),
    tool_kind   TEXT NOT NULL,
    tool_title  TEXT NOT NULL,
    tool_input  TEXT NOT NULL DEFAULT '',
    decision    TEXT NOT NULL,
    option_kind TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    applied     INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, tool_kind, tool_title, tool_input)
);
INSERT INTO permission_rules_190
    (id, session_id, tool_kind, tool_title, tool_input, decision, option_kind, created_at, applied)
SELECT id, session_id, tool_kind, tool_title, '', decision, option_kind, created_at, applied
FROM permission_rules;
DROP TABLE permission_rules;
ALTER TABLE permission_rules_190 RENAME TO permission_rules;
