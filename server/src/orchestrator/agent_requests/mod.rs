//! What an agent asks of batond while it works: permission to run a tool (asked of the user, or
//! answered by a standing rule the user made) and files of its working directory, read and
//! written inside a sandbox.

pub(in crate::orchestrator) mod agent_fs;
pub(in crate::orchestrator) mod approvals;
pub(in crate::orchestrator) mod permissions;
pub(in crate::orchestrator) mod sandbox;
pub(in crate::orchestrator) mod standing_answers;
pub(in crate::orchestrator) mod terminals;
