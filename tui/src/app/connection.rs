//! The connection's life: connected, lost, each failed attempt and why, and starting the local
//! server again when it crashed (the launcher decides from its data dir, see `launcher/`).

use std::time::Instant;

use baton_protocol::ClientError;

use crate::command::{Command, Request, ServerRestart};
use crate::connect_error::{classify, ConnectProblem};

use super::{App, ConnectionState, TranscriptSlot};

impl App {
    /// This `baton` may start a local server (loopback, no `--no-spawn`): when the server goes
    /// away, ask the launcher to start it again ([`Command::StartServer`]), which it does only
    /// if the server crashed while serving our data dir.
    pub fn set_may_start_server(&mut self, may: bool) {
        self.may_start_server = may;
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
        self.outage = None;
        self.list_in_flight = false;
        self.more_sessions_in_flight = false;
        // Their answers would come from the old connection, whose failures are ignored.
        self.older_loading.clear();
        // Loads cut short by the old connection are started over.
        self.transcripts.retain(|_, slot| !matches!(slot, TranscriptSlot::Loading));
        self.request_list();
        self.send(Request::ListAgents);
        self.request_usage(self.opened.clone());
        // An open approval queue or rules list may have missed changes while disconnected.
        self.approvals_reconnected();
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
        // The status bar shows the URL next to this; what became of the server is found out
        // when the first attempt fails (see `on_server_started`).
        let problem = "the server is gone".to_string();
        self.outage = Some(problem.clone());
        self.schedule_reconnect(now, Some(problem));
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
                // a server lost later (epoch > 0) may be started again, once per outage.
                if self.may_start_server && self.epoch > 0 && !self.server_start_tried {
                    self.server_start_tried = true;
                    self.commands.push(Command::StartServer);
                }
                // "Gone" or "stopped" says more than "no server answers" while it lasts.
                let problem = self.outage.clone().unwrap_or(reason);
                self.schedule_reconnect(now, Some(problem));
            }
        }
    }

    /// What the launcher found and did about the lost server; the reconnect attempts go on
    /// either way (a server started by hand is found by them).
    /// The answer of `batond stop` (a TUI command, after a question).
    pub fn on_server_stopped(&mut self, result: Result<String, String>) {
        match result {
            Ok(said) => self.flash(format!("{said} (baton starts it again when you restart baton)"), false),
            Err(why) => self.flash(format!("could not stop the server: {why}"), true),
        }
    }

    pub fn on_server_started(&mut self, result: Result<ServerRestart, String>) {
        match result {
            Ok(ServerRestart::Started) => self.flash("started the local server again", false),
            Ok(ServerRestart::StartedByAnother) => self.flash("the local server was started again", false),
            Ok(ServerRestart::Stopped) => {
                let stopped = "the server was stopped (start it with batond or restart baton)".to_string();
                self.outage = Some(stopped.clone());
                if let ConnectionState::Reconnecting { problem, .. } = &mut self.connection {
                    *problem = Some(stopped);
                }
                self.dirty = true;
            }
            Ok(ServerRestart::NotOurs(url)) => {
                tracing::info!("not restarting the server: our data dir serves {url}");
            }
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
