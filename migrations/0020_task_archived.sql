-- Version 20: a task can be archived: left out of the default lists, its data kept.

ALTER TABLE tasks ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
