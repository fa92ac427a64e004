-- Version 160: the events a turn's end looks up among the session's journal, indexed apart.
-- Recording a turn's usage finds the turn's `turn_started` and its last `usage_update` (an
-- `agent_update` event); without these partial indexes each was a walk back over every event of
-- the turn (a streamed answer of 100,000 chunks: 100,000 rows read at its end, on the writer
-- that every session's writes wait for). A streamed chunk is not in either index, so appending
-- one costs the same as before.

CREATE INDEX session_events_turn_started ON session_events (session_id, seq) WHERE kind = 'turn_started';
CREATE INDEX session_events_agent_update ON session_events (session_id, seq) WHERE kind = 'agent_update';
