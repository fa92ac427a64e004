//! The client's whole state, apart from any view. Input comes in as actions, notifications,
//! request outcomes and ticks; output goes out as [`Command`]s the runner performs. Nothing here
//! does I/O, which is what lets the snapshot tests drive it with scripted server data.

mod actions;
mod history;
mod overlay;
mod server;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use baton_protocol::{AgentInfo, ClientError, ErrorCode};
use crossterm::event::KeyEvent;

pub use overlay::{Confirmation, FormField, NewTaskForm, Overlay};

use crate::action::{Action, EditOp};
use crate::auto_resume::AutoResume;
use crate::backoff::Backoff;
use crate::command::{Command, Request};
use crate::keymap::{map_key, KeyMode};
use crate::sessions::SessionList;
use crate::text_field::TextField;
use crate::transcript::Transcript;

/// How long list-changing notifications are collected before one `task.session.list`.
const LIST_DEBOUNCE: Duration = Duration::from_millis(300);
/// The list is also refreshed this often, for changes no notification announces (ages...).
const LIST_SLOW_REFRESH: Duration = Duration::from_secs(5);
const FLASH_FOR: Duration = Duration::from_secs(6);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionState {
    /// The first attempt, or an attempt whose wait is over, is under way.
    Connecting,
    Connected,
    /// The connection dropped; the next attempt starts at `retry_at`.
    Reconnecting {
        retry_at: Instant,
    },
    /// Retrying cannot help (the server refused our token): restart with other options.
    Offline {
        reason: String,
    },
}

/// A transcript being loaded or held.
#[derive(Debug, Clone, PartialEq)]
pub enum TranscriptSlot {
    Loading,
    Ready(Transcript),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    List,
    Input,
}

/// A one-line message for the user in the status bar, gone after a few seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    pub text: String,
    pub is_error: bool,
    until: Instant,
}

/// Sizes the last frame had, for scrolling by pages and stopping at the top.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameMetrics {
    pub transcript_height: usize,
    pub transcript_max_scroll: usize,
}

pub struct App {
    pub(crate) server_url: String,
    /// Prefilled as the new task's workdir when the server runs on this machine.
    local_workdir: Option<String>,
    pub(crate) connection: ConnectionState,
    backoff: Backoff,
    /// The server is local and `--no-spawn` was not given: when it goes away, start another.
    may_start_server: bool,
    /// A start was asked for in this outage; one is enough (the port may be taken, or
    /// batond may fail the same way again).
    server_start_tried: bool,
    /// Bumped on every connection; see [`crate::command::Outcome::epoch`].
    epoch: u64,
    pub(crate) sessions: SessionList,
    pub(crate) transcripts: HashMap<String, TranscriptSlot>,
    /// Sessions whose older page is being loaded (see `history.rs`).
    older_loading: HashSet<String>,
    /// The session shown in the transcript pane (and subscribed to).
    pub(crate) opened: Option<String>,
    auto_resume: AutoResume,
    pub(crate) agents: Vec<AgentInfo>,
    pub(crate) focus: Focus,
    pub(crate) input: TextField,
    pub(crate) overlay: Option<Overlay>,
    pub(crate) flash: Option<Flash>,
    /// Lines scrolled up from the bottom of the transcript; 0 follows new output.
    pub(crate) scroll: usize,
    metrics: FrameMetrics,
    /// Prompts sent and not yet answered (the server may be resuming the agent first).
    pub(crate) sending: usize,
    list_due: Option<Instant>,
    list_in_flight: bool,
    last_list_request: Option<Instant>,
    last_clock_redraw: Option<Instant>,
    commands: Vec<Command>,
    dirty: bool,
    quit: bool,
}

impl App {
    pub fn new(server_url: impl Into<String>, local_workdir: Option<String>) -> Self {
        App {
            server_url: server_url.into(),
            local_workdir,
            connection: ConnectionState::Connecting,
            backoff: Backoff::reconnect(),
            may_start_server: false,
            server_start_tried: false,
            epoch: 0,
            sessions: SessionList::default(),
            transcripts: HashMap::new(),
            older_loading: HashSet::new(),
            opened: None,
            auto_resume: AutoResume::default(),
            agents: Vec::new(),
            focus: Focus::List,
            input: TextField::default(),
            overlay: None,
            flash: None,
            scroll: 0,
            metrics: FrameMetrics::default(),
            sending: 0,
            list_due: None,
            list_in_flight: false,
            last_list_request: None,
            last_clock_redraw: None,
            commands: Vec::new(),
            dirty: true,
            quit: false,
        }
    }

    /// Commands produced since the last call, in order.
    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.commands)
    }

    /// True once since the last change: the screen needs drawing.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::replace(&mut self.dirty, false)
    }

    /// Something outside the app changed what a frame looks like (the terminal was resized).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    pub fn should_quit(&self) -> bool {
        self.quit
    }

    pub fn key_mode(&self) -> KeyMode {
        match (&self.overlay, self.focus) {
            (Some(Overlay::Help), _) => KeyMode::Help,
            (Some(Overlay::Confirm(_)), _) => KeyMode::Confirm,
            (Some(Overlay::NewTask(_)), _) => KeyMode::Form,
            (None, Focus::Input) => KeyMode::Input,
            (None, Focus::List) => KeyMode::List,
        }
    }

    pub fn handle_key(&mut self, key: KeyEvent) {
        if let Some(action) = map_key(self.key_mode(), key) {
            self.handle_action(action);
        }
    }

    /// Bracketed paste goes into whichever text field has focus, newlines included.
    pub fn handle_paste(&mut self, text: String) {
        if matches!(self.key_mode(), KeyMode::Input | KeyMode::Form) {
            self.handle_action(Action::Edit(EditOp::InsertText(text)));
        }
    }

    pub fn set_frame_metrics(&mut self, metrics: FrameMetrics) {
        self.metrics = metrics;
        self.scroll = self.scroll.min(metrics.transcript_max_scroll);
    }

    /// Lets the app start a local server when the connection to it is lost (see
    /// [`Command::StartServer`]).
    pub fn set_may_start_server(&mut self, allowed: bool) {
        self.may_start_server = allowed;
    }

    pub fn is_connected(&self) -> bool {
        self.connection == ConnectionState::Connected
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
        if let Some(session_id) = self.opened.clone() {
            // After a server restart the opened session may need resuming now.
            self.send(Request::SessionStatus { session_id: session_id.clone() });
            self.ensure_subscribed(&session_id);
        }
        self.dirty = true;
    }

    /// The connection dropped: say so and schedule the next attempt.
    pub fn on_disconnected(&mut self, reason: &str, now: Instant) {
        tracing::warn!("connection lost: {reason}");
        self.sending = 0;
        self.schedule_reconnect(now);
    }

    pub fn on_connect_failed(&mut self, error: &ClientError, now: Instant) {
        tracing::info!("connect failed: {error}");
        let refused =
            matches!(error.server_error().map(|e| e.code), Some(ErrorCode::Unauthorized | ErrorCode::Forbidden));
        if refused {
            self.connection = ConnectionState::Offline { reason: error.to_string() };
            self.dirty = true;
            return;
        }
        // At startup the launcher has already started a server or decided not to; only a
        // connection lost later (epoch > 0) calls for another, once per outage.
        if self.may_start_server && self.epoch > 0 && !self.server_start_tried {
            self.server_start_tried = true;
            self.commands.push(Command::StartServer);
        }
        self.schedule_reconnect(now);
    }

    /// How starting a local server went; the reconnect attempts go on either way.
    pub fn on_server_started(&mut self, result: Result<(), String>) {
        match result {
            Ok(()) => self.flash("started a new local server", false),
            Err(error) => self.flash(format!("could not restart the server: {error}"), true),
        }
    }

    fn schedule_reconnect(&mut self, now: Instant) {
        let after = self.backoff.next_delay();
        self.connection = ConnectionState::Reconnecting { retry_at: now + after };
        self.commands.push(Command::Connect { after });
        self.dirty = true;
    }

    /// Periodic work: expire the flash, refresh the list, keep ages and countdowns current.
    pub fn on_tick(&mut self, now: Instant) {
        if self.flash.as_ref().is_some_and(|f| now >= f.until) {
            self.flash = None;
            self.dirty = true;
        }
        if self.is_connected() && !self.list_in_flight {
            let debounced = self.list_due.is_some_and(|due| now >= due);
            let slow = self.last_list_request.is_none_or(|at| now.duration_since(at) >= LIST_SLOW_REFRESH);
            if debounced || slow {
                self.request_list();
            }
        }
        let redraw_clock = self.last_clock_redraw.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1));
        if redraw_clock {
            self.last_clock_redraw = Some(now);
            self.dirty = true;
        }
    }

    fn request_list(&mut self) {
        self.list_due = None;
        self.list_in_flight = true;
        self.last_list_request = Some(Instant::now());
        self.send(Request::ListSessions);
    }

    /// Asks for a list refresh soon, collecting a burst of notifications into one request.
    fn schedule_list_refresh(&mut self) {
        if self.list_due.is_none() {
            self.list_due = Some(Instant::now() + LIST_DEBOUNCE);
        }
    }

    fn send(&mut self, request: Request) {
        self.commands.push(Command::Send(request));
    }

    pub(crate) fn flash(&mut self, text: impl Into<String>, is_error: bool) {
        let text = text.into();
        if is_error {
            tracing::warn!("{text}");
        }
        self.flash = Some(Flash { text, is_error, until: Instant::now() + FLASH_FOR });
        self.dirty = true;
    }

    /// The transcript held for a session, once its backlog is loaded.
    pub fn transcript(&self, session_id: &str) -> Option<&Transcript> {
        match self.transcripts.get(session_id)? {
            TranscriptSlot::Ready(transcript) => Some(transcript),
            TranscriptSlot::Loading => None,
        }
    }

    /// The transcript of the opened session, when loaded.
    pub fn opened_transcript(&self) -> Option<&Transcript> {
        self.transcript(self.opened.as_deref()?)
    }

    /// The session under the list cursor (what Enter opens).
    pub fn cursor_session(&self) -> Option<&str> {
        self.sessions.cursor().map(|s| s.status.session_id.as_str())
    }

    pub fn opened_session(&self) -> Option<&str> {
        self.opened.as_deref()
    }

    pub fn connection(&self) -> &ConnectionState {
        &self.connection
    }

    pub fn flash_text(&self) -> Option<&str> {
        self.flash.as_ref().map(|f| f.text.as_str())
    }

    /// Subscribes to a session, loading its backlog first when none is held.
    fn ensure_subscribed(&mut self, session_id: &str) {
        if !self.is_connected() {
            return;
        }
        match self.transcripts.get(session_id) {
            None => {
                self.transcripts.insert(session_id.to_string(), TranscriptSlot::Loading);
                self.send(Request::LoadMessages { session_id: session_id.to_string() });
            }
            Some(TranscriptSlot::Loading) => {}
            Some(TranscriptSlot::Ready(transcript)) => {
                let since_seq = Some(transcript.last_seq());
                self.send(Request::Subscribe { session_id: session_id.to_string(), since_seq });
            }
        }
    }
}
