-- Version 227: what a task's changes are compared with and merged into (the repository's HEAD
-- commit and branch when the task was created), and the pull request opened for it.

ALTER TABLE tasks ADD COLUMN base_commit TEXT;
ALTER TABLE tasks ADD COLUMN base_branch TEXT;
ALTER TABLE tasks ADD COLUMN pull_request_url TEXT;
