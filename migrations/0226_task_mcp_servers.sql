-- Version 226: the MCP servers a task added at creation (a JSON array of the protocol's
-- `McpServerConfig`), passed to its agents on every start and resume. Their secrets (env and
-- header values) stay here: the protocol shows names only.

ALTER TABLE tasks ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]';
