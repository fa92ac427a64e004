-- Version 131: what agents report about usage, one row per finished turn. Token counts come
-- from the prompt's answer (ACP `PromptResponse.usage`), cost and context from the last
-- `usage_update` the agent sent during the turn. Every column an agent did not report stays
-- NULL: unknown is never estimated.

CREATE TABLE turn_usage (
    session_id          TEXT NOT NULL,
    turn_seq            INTEGER NOT NULL,
    turn_id             TEXT,
    input_tokens        INTEGER,
    output_tokens       INTEGER,
    cached_read_tokens  INTEGER,
    cached_write_tokens INTEGER,
    thought_tokens      INTEGER,
    total_tokens        INTEGER,
    cost_amount         REAL,
    cost_currency       TEXT,
    context_used        INTEGER,
    context_size        INTEGER,
    recorded_at         TEXT NOT NULL,
    PRIMARY KEY (session_id, turn_seq)
);
