//! `batond`: the Baton server. Persistence (SQLite), agents over ACP, resume, and the WebSocket
//! gateway. The binary is a thin CLI over [`server::run`].

pub mod accept;
pub mod agent;
pub mod agent_runtime;
pub mod attention;
pub mod control;
pub mod export;
pub mod fuzzing;
pub mod gateway;
pub mod hub;
mod layers;
pub mod limits;
pub mod lockfile;
pub mod memory;
pub mod notify;
pub mod orchestrator;
pub mod pairing;
pub mod push;
pub mod secret;
pub mod server;
pub mod session_status;
pub mod settings;
pub mod store;
pub mod tls;
pub mod umask;
pub mod webhook;
