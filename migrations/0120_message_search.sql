-- Version 120: full-text search over the folded message view (`message.search`). An FTS5 index
-- of `messages.text` that reads its text from `messages` (external content, nothing stored
-- twice), kept in step by triggers inside the same write as the row it indexes: an entry is
-- found once its text is written (a streamed message once its turn ends and its parts are
-- joined), and is gone with its row when its task is deleted.

CREATE VIRTUAL TABLE messages_fts USING fts5(
    text,
    content = 'messages',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_fts_inserted AFTER INSERT ON messages
BEGIN
    INSERT INTO messages_fts (rowid, text) VALUES (NEW.id, NEW.text);
END;

CREATE TRIGGER messages_fts_deleted AFTER DELETE ON messages
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', OLD.id, OLD.text);
END;

CREATE TRIGGER messages_fts_updated AFTER UPDATE OF text ON messages WHEN OLD.text IS NOT NEW.text
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', OLD.id, OLD.text);
    INSERT INTO messages_fts (rowid, text) VALUES (NEW.id, NEW.text);
END;

-- The entries already there.
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
