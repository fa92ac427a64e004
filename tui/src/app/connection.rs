//! The connection's life: connected, lost, each failed attempt and why, and starting the local
//! server again, which only a server this `baton` started gets (see `launcher.rs`).

use std::time::Instant;

use baton_protocol::ClientError;

use crate::command::{Command, Request};
use crate::connect_error::{classify, ConnectProblem};

use super::{App, ConnectionState, TranscriptSlot};

impl App {
    /// The server was started by this `baton`: when it goes away, start it again (see
    /// [`Command::StartServer`]). A server someone else started is only reconnected to.
    pub fn set_owns_server(&mut self, owns: bool) {
        self.owns_server = owns;
    }

    /// A token was given on the command line or in the environment (for the wording of a 401).
    pub fn set_token_given(&mut self, given: bool) {
        self.token_given = given;
    }

    /// A connection was established (the runner holds the client); `epoch` tags its requests.
    pub fn on_connected(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.connection = ConnectionState::Connected;
        self.backoff.reset();
        self.server_start_tried = false;
        self.list_in_flight = false;
        // Their answers would come from the old connection, whose failures are ignored.
        self.older_loading.clear();
        // Loads cut short by the old connection are started over.
        self.transcripts.retain(|_, slot| !matches!(slot, TranscriptSlot::Loading));
        self.request_list();
        self.send(Request::ListAgents);
        // A new connection usually means a restarted server, whose agents are gone: the
        // auto-resume gets one more attempt (once per selection and connection).
        self.auto_resume.on_new_connection();
        if let Some(session_id) = self.opened.clone() {
            self.send(Request::SessionStatus { session_id: session_id.clone() });
            self.ensure_subscribed(&session_id);
        }
        self.dirty = true;
    }

    /// The connection dropped: say so and schedule the next attempt.
    pub fn on_disconnected(&mut self, reason: &str, now: Instant) {
        tracing::warn!("connection lost: {reason}");
        self.sending = 0;
        // The status bar shows the URL next to this. A server that is not ours is not started
        // again (it could have another data dir), so this is all that is done about it.
        let problem = if self.owns_server { "the server baton started is gone" } else { "the server is gone" };
        self.schedule_reconnect(now, Some(problem.to_string()));
    }

    pub fn on_connect_failed(&mut self, error: &ClientError, now: Instant) {
        tracing::info!("connect failed: {error}");
        let problem = classify(error, &self.server_url, self.token_given);
        match problem {
            ConnectProblem::Refused(reason) => {
                tracing::warn!("{reason}");
                self.connection = ConnectionState::Offline { reason };
                self.dirty = true;
            }
            ConnectProblem::NotBaton(reason) => self.schedule_reconnect(now, Some(reason)),
            ConnectProblem::Unreachable(reason) => {
                // At startup the launcher has already started a server or decided not to;
                // only a server of ours lost later (epoch > 0) is started again, once per
                // outage.
                if self.owns_server && self.epoch > 0 && !self.server_start_tried {
                    self.server_start_tried = true;
                    self.commands.push(Command::StartServer);
                }
                // "Gone" says more than "no server answers" while it lasts.
                let problem = match &self.connection {
                    ConnectionState::Reconnecting { problem: Some(gone), .. } if gone.ends_with(" is gone") => {
                        gone.clone()
                    }
                    _ => reason,
                };
                self.schedule_reconnect(now, Some(problem));
            }
        }
    }

    /// How starting a local server went; the reconnect attempts go on either way.
    pub fn on_server_started(&mut self, result: Result<(), String>) {
        match result {
            Ok(()) => self.flash("started the local server again", false),
            Err(error) => self.flash(format!("could not start the server again: {error}"), true),
        }
    }

    fn schedule_reconnect(&mut self, now: Instant, problem: Option<String>) {
        let after = self.backoff.next_delay();
        self.connection = ConnectionState::Reconnecting { retry_at: now + after, problem };
        self.commands.push(Command::Connect { after });
        self.dirty = true;
    }
}
