//! Agents: the ACP client, the registry of known agents, the process runtime, history
//! recording for context injection, and the mock agent.

pub mod acp;
pub mod auth;
pub mod docker;
pub mod guard;
pub mod history;
pub mod host;
pub mod mcp;
pub mod mock;
pub mod options;
pub mod outliving;
pub mod reaper;
pub mod registry;
pub mod replay;
pub mod runtime;
pub mod ssh;
pub mod translate;
pub mod transport;
