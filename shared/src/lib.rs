//! Baton wire protocol v1.
//!
//! Every frame on `ws://HOST:PORT/ws` is one JSON [`Envelope`]. Requests name an action and
//! carry a payload; each action is a params struct implementing [`Request`], which names its
//! result type. Notifications are the [`Notification`] enum. The same types are used by the
//! server, the TUI and scripted tests, so the JSON shape has exactly one definition.
//!
//! The [`Client`] is a typed async client over a real WebSocket.
//!
//! # Example
//!
//! Resuming a session after a server restart and asking its agent something (the same
//! example as docs/PROTOCOL.md §8):
//!
//! ```no_run
//! use std::time::Duration;
//! use baton_protocol::*;
//!
//! /// Resumes a session after a server restart and asks its agent something.
//! async fn resume_and_ask(url: &str, token: &str, session_id: &str) -> Result<String, ClientError> {
//!     let options = ClientOptions { token: Some(token.into()), ..ClientOptions::default() };
//!     let (client, mut notes) = Client::connect_with(url, options).await?;
//!     // Set up the subscription first: nothing the resume or the turn produces is missed.
//!     client.request(SubscribeParams::from_now(session_id)).await?;
//!
//!     let status = client.resume_and_wait(&mut notes, session_id, Duration::from_secs(90)).await?;
//!     if status.needs_resume {
//!         eprintln!("restore failed: {:?}", status.last_error);
//!     }
//!     let turn = client
//!         .prompt_and_wait(&mut notes, session_id, "What did I ask you to remember?", Duration::from_secs(300))
//!         .await?;
//!     println!("turn ended: {} after {} events", turn.stop_reason, turn.events.len());
//!     Ok(turn.text)
//! }
//! ```

#![deny(missing_docs)]

pub mod actions;
pub mod agent_values;
pub mod approvals;
pub mod changes;
pub mod client;
pub mod devices;
pub mod envelope;
pub mod error;
pub mod events;
pub mod fold;
pub mod mcp;
pub mod nesting;
pub mod notifications;
pub mod options;
pub mod queue;
pub mod schema;
pub mod terminal_text;
pub mod tls;
pub mod types;
pub mod typescript;
pub mod usage;

pub use actions::*;
pub use agent_values::{PlanEntryPriority, PlanEntryStatus, StopReason, ToolCallStatus};
pub use approvals::*;
pub use changes::*;
pub use client::{
    read_token, token_file, Client, ClientError, ClientEvent, ClientOptions, Notifications, TurnOutcome,
    UPGRADING_DATABASE,
};
pub use devices::*;
pub use envelope::{format_timestamp, now_timestamp, Envelope, FrameError, MessageType, RequestFrame};
pub use error::{ErrorCode, ErrorPayload};
pub use events::*;
pub use fold::{fold_event, FoldTarget, LastOpen, MessageFold, PermissionStatus, MAX_FOLDED_TERMINAL_BYTES};
pub use mcp::{validate_mcp_servers, McpServerConfig, McpServerInfo, MAX_MCP_SERVERS};
pub use nesting::{bound_nesting, nesting_of, nests_deeper_than, MAX_NESTING, NESTING_MARKER};
pub use notifications::*;
pub use options::*;
pub use queue::*;
pub use schema::{protocol_schema, protocol_schema_text};
pub use terminal_text::strip_terminal_controls;
pub use types::*;
pub use typescript::protocol_typescript;
pub use usage::*;

/// The protocol version announced in `server.hello`. Bumped only for incompatible changes.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest frame the server accepts; a bigger frame closes the connection.
pub const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;
