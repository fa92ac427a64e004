-- Version 225: each session's queue of messages written while a turn ran, sent one turn at a
-- time once the running turn ends (or held, with the reason, after a turn that did not end
-- well). A JSON document of the protocol's `MessageQueue`; every change is journaled as a
-- `queue` event in the same write. A message leaves the queue in the write that journals it as
-- the `user_message` of its turn, so it is sent once.

CREATE TABLE message_queues (
    session_id TEXT PRIMARY KEY REFERENCES task_sessions(id),
    queue      TEXT NOT NULL DEFAULT '{}'
);
