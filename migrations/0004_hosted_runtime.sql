-- Version 4: the `hosted` runtime. An agent run by the agent host (`batond agentctl`) is found
-- again after a server restart through the host's address and pid and the agent's id in the
-- host; `host_seq` is the last line of the agent's output whose update is journaled (written in
-- the same transaction as the update), so that a reattached server skips what it already has.

ALTER TABLE executors_running ADD COLUMN agentctl_url TEXT;
ALTER TABLE executors_running ADD COLUMN agentctl_port INTEGER;
ALTER TABLE executors_running ADD COLUMN agentctl_pid INTEGER;
ALTER TABLE executors_running ADD COLUMN host_agent_id TEXT;
ALTER TABLE executors_running ADD COLUMN host_seq INTEGER NOT NULL DEFAULT 0;
