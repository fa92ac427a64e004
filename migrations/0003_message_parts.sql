-- Version 3: streamed chunks are stored as parts of their message instead of being appended to
-- its text, so that a long streamed message costs O(1) per chunk instead of rewriting the whole
-- row each time. Parts are folded into the message text when its turn ends.

CREATE TABLE message_parts (
    message_row INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    text        TEXT NOT NULL,
    PRIMARY KEY (message_row, seq)
) WITHOUT ROWID;
