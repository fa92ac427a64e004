//! Scripted protocol tests against a real `batond`.
//!
//! [`TestEnv`] is a temporary data dir and working directory that outlive server restarts;
//! [`TestEnv::start`] runs the real `batond` on an ephemeral loopback port and
//! [`Server::client`] connects the typed client over a real WebSocket. The helpers in
//! [`session`] are the steps every script needs: create a task and wait for a state, run a turn
//! and collect its events, read a session's journal. [`Server::kill9`] and
//! [`Server::restart`] are a crash and the way back on the same data dir.
//!
//! ```no_run
//! use baton_testkit::*;
//!
//! # async fn example() {
//! let env = TestEnv::new();
//! let server = env.start().await;
//! let (client, mut notes) = server.client().await;
//! let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
//! let reply = prompt(&client, &mut notes, &session_id, "what did I ask?").await;
//! # }
//! ```
//!
//! Which `batond` runs: see [`batond_path`].

mod batond;
mod env;
pub mod process;
mod server;
pub mod session;

use std::time::Duration;

pub use batond::batond_path;
pub use env::TestEnv;
pub use process::{memory_kib, process_alive, wait_process_gone};
pub use server::{another_fingerprint, batond_refuses, Server, ServerBuilder};
pub use session::*;

/// Default bound for anything a test waits for (generous: tests run on loaded machines).
pub const WAIT: Duration = Duration::from_secs(30);
