//! The client's whole state, apart from any view. Input comes in as actions, notifications,
//! request outcomes and ticks; output goes out as [`Command`]s the runner performs. Nothing here
//! does I/O, which is what lets the snapshot tests drive it with scripted server data.

mod actions;
mod approvals;
mod archived;
mod attention;
mod changes;
mod connection;
mod devices;
mod error_details;
mod export;
mod fork;
mod mouse;
mod older_messages;
mod options;
mod overlay;
mod prompt_history;
mod queue;
mod resume_watch;
mod search;
mod server;
mod shell;
mod transcript_focus;
mod usage;
mod view_state;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use baton_protocol::AgentInfo;
use crossterm::event::KeyEvent;

pub use approvals::{ApprovalQueue, RulesView};
pub use archived::{agent_runs, ArchivedView};
pub use changes::{hunk_rows, ChangesView};
pub use devices::{pairing_page, qr_rows, DevicesView, Pairing};
pub use export::ExportForm;
pub use fork::{fork_note, hand_over_row, HandOverView};
pub use mouse::{hit_test, Hit, Panes};
pub use options::{OptionRow, OptionTarget, OptionsView};
pub use overlay::{Confirmation, FormField, NewTaskForm, Overlay, RenameForm};
use prompt_history::PromptHistory;
pub use queue::QueueView;
use resume_watch::ResumeWatch;
pub use search::{SearchView, SEARCH_DEBOUNCE};
pub use usage::usage_text;
pub use view_state::ViewState;

use crate::action::{Action, EditOp};
use crate::auto_resume::AutoResume;
use crate::backoff::Backoff;
use crate::command::{Command, Request};
use crate::keymap::{escape_then, map_key_with, KeyMode};
use crate::layout::TranscriptLayout;
use crate::sessions::{is_working, SessionList};
use crate::text_field::TextField;
use crate::transcript::Transcript;

/// Below this many columns the list and the transcript take turns (Enter shows the session,
/// Esc the list) instead of sharing the width.
pub const NARROW_WIDTH: u16 = 70;

/// How long list-changing notifications are collected before one `task.session.list`.
const LIST_DEBOUNCE: Duration = Duration::from_millis(300);
/// The list is also refreshed this often, for changes no notification announces (ages...).
const LIST_SLOW_REFRESH: Duration = Duration::from_secs(5);
const FLASH_FOR: Duration = Duration::from_secs(5);
/// A session on screen this long has been looked at: its finished turn no longer counts as
/// waiting for the user.
pub const SEEN_AFTER: Duration = Duration::from_millis(1500);
/// Errors stay longer (Esc dismisses them sooner): they may take a while to read.
const ERROR_FLASH_FOR: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionState {
    /// The first attempt, or an attempt whose wait is over, is under way.
    Connecting,
    Connected,
    /// The connection dropped or an attempt failed; the next attempt starts at `retry_at`.
    Reconnecting {
        retry_at: Instant,
        /// What is wrong, in words ("the server at … is gone", "not a Baton server at …").
        problem: Option<String>,
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

/// Whether the user's terminal takes OSC 52, and through what (read from the environment by
/// `main`; tests set it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClipboardSupport {
    pub may_copy: bool,
    pub multiplexer: crate::clipboard::Multiplexer,
}

impl Default for ClipboardSupport {
    fn default() -> Self {
        ClipboardSupport { may_copy: true, multiplexer: crate::clipboard::Multiplexer::None }
    }
}

impl ClipboardSupport {
    pub fn from_env() -> Self {
        let term = std::env::var("TERM").ok();
        ClipboardSupport {
            may_copy: crate::clipboard::terminal_may_copy(term.as_deref()),
            multiplexer: crate::clipboard::Multiplexer::from_env(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    List,
    Input,
    /// Typing the session list's filter.
    Filter,
    /// Reading the transcript: scrolling, selecting entries, expanding tool calls.
    Transcript,
}

/// A message for the user in the status bar (wrapped, however long), gone after a few seconds
/// or on Esc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    pub text: String,
    pub is_error: bool,
    until: Instant,
    /// Says that this session's agent is starting: goes away when it is no longer starting.
    while_starting: Option<String>,
    /// Says something about this session's running turn ("cancelling the turn…"): goes away
    /// when the turn has ended.
    while_turn: Option<String>,
}

/// Sizes the last frame had, for scrolling by pages and stopping at the top, and what its
/// transcript pane held, for keeping a scrolled-up view still while lines are added below.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameMetrics {
    pub transcript_height: usize,
    pub transcript_max_scroll: usize,
    /// Rows of the whole screen (the help scrolls by its pages).
    pub screen_height: usize,
    /// Columns of the whole screen (a narrow one shows one pane at a time).
    pub screen_width: usize,
    /// The offset the frame was drawn at: the app's, plus the rows added below since the last
    /// frame while scrolled up.
    pub transcript_scroll: usize,
    /// `None` when no transcript was drawn.
    pub anchor: Option<ScrollAnchor>,
    /// The seqs of the first and the last entry with a row on screen.
    pub transcript_shown: Option<(u64, u64)>,
    /// The entry marked selected in the focused transcript: the app's choice, or the nearest
    /// entry on screen when that one was scrolled out of view.
    pub transcript_selected: Option<u64>,
    /// The row of the pane where the selected entry's first row on screen is.
    pub transcript_selected_row: Option<usize>,
    /// How far the help or the error popup drawn could be scrolled (`None`: neither drawn).
    pub overlay_max_scroll: Option<usize>,
    /// Where the panes were drawn, for the mouse.
    pub panes: Panes,
}

/// The transcript a frame drew, as far as scrolling cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrollAnchor {
    pub session_id: String,
    pub width: usize,
    /// The oldest entry's seq: an older page put in front changes it. Rows added above the
    /// view need no correction (the offset counts from the bottom).
    pub oldest_seq: u64,
    /// Wrapped rows in all.
    pub rows: usize,
}

impl ScrollAnchor {
    /// The same transcript, drawn as wide, with nothing put in front: rows it gained since
    /// were added below (streamed output, new entries).
    pub fn same_view(&self, other: &ScrollAnchor) -> bool {
        self.session_id == other.session_id && self.width == other.width && self.oldest_seq == other.oldest_seq
    }
}

pub struct App {
    pub(crate) server_url: String,
    /// Prefilled as the new task's workdir when the server runs on this machine.
    local_workdir: Option<String>,
    pub(crate) connection: ConnectionState,
    backoff: Backoff,
    /// Spawning is allowed (loopback, no `--no-spawn`): a lost server may be started again.
    may_start_server: bool,
    token_given: bool,
    /// Each view's keys, as `tui.toml` binds them.
    pub(crate) bindings: crate::config::Bindings,
    /// The colours every frame is drawn in (`tui.toml`, `NO_COLOR`).
    pub(crate) theme: crate::config::Theme,
    /// The agent the new-task form starts with (`tui.toml`).
    default_agent: Option<String>,
    /// The token this client connects with, for the web page's address (`O`).
    page_token: Option<String>,
    /// A start was asked for in this outage; one is enough (the port may be taken, or
    /// batond may fail the same way again).
    server_start_tried: bool,
    /// What is known about the current outage ("the server is gone", "… was stopped"), shown
    /// instead of each attempt's "no server answers".
    outage: Option<String>,
    /// Bumped on every connection; see [`crate::command::Outcome::epoch`].
    epoch: u64,
    pub(crate) sessions: SessionList,
    pub(crate) transcripts: HashMap<String, TranscriptSlot>,
    /// Sessions whose older page is being loaded (see `older_messages.rs`).
    older_loading: HashSet<String>,
    /// The session shown in the transcript pane (and subscribed to).
    pub(crate) opened: Option<String>,
    /// When the session shown was opened: after [`SEEN_AFTER`] on screen, its finished turn is
    /// seen.
    opened_at: Option<Instant>,
    auto_resume: AutoResume,
    resumes: ResumeWatch,
    pub(crate) agents: Vec<AgentInfo>,
    pub(crate) focus: Focus,
    /// The prompt being written, for the opened session.
    pub(crate) input: TextField,
    /// Prompts being written for sessions not opened now, kept until the user comes back.
    drafts: HashMap<String, TextField>,
    /// Each session's queued messages, as last heard (`queue.list`, `queue` events).
    pub(crate) queues: HashMap<String, baton_protocol::MessageQueue>,
    /// The queued message being edited in the prompt box: (session, id).
    pub(crate) editing_queued: Option<(String, String)>,
    /// Prompts sent, oldest first, and where Up/Down are in them.
    history: PromptHistory,
    /// The session list's filter, as typed after `/`.
    pub(crate) filter: TextField,
    /// Thoughts are shown whole; folded, each is one line.
    pub(crate) show_thoughts: bool,
    pub(crate) overlay: Option<Overlay>,
    /// Rows the help is scrolled down by (on a terminal too short for all of it).
    pub(crate) help_scroll: usize,
    /// The last error shown, in full (`E` opens it), and how far its popup is scrolled.
    pub(crate) last_error: Option<String>,
    pub(crate) error_scroll: usize,
    /// The mouse is captured (`--mouse`, `m`): off by default, for the terminal's selection.
    mouse: bool,
    /// On a narrow screen (one pane at a time): the opened session is shown instead of the list.
    pub(crate) narrow_shows_session: bool,
    /// What the terminal can do with a copy (OSC 52), for what the copy keys say.
    pub(crate) clipboard: ClipboardSupport,
    pub(crate) flash: Option<Flash>,
    /// Lines scrolled up from the bottom of the transcript; 0 follows new output.
    pub(crate) scroll: usize,
    /// What the focused transcript has selected, and where the focus goes back to.
    pub(crate) reading: transcript_focus::Reading,
    metrics: FrameMetrics,
    /// The opened transcript's layout, kept between frames by the view (see `ui/transcript.rs`).
    pub(crate) transcript_layout: RefCell<TranscriptLayout>,
    /// Prompts sent and not yet answered (the server may be resuming the agent first).
    pub(crate) sending: usize,
    list_due: Option<Instant>,
    list_in_flight: bool,
    /// A further page of the session list is on its way.
    more_sessions_in_flight: bool,
    last_list_request: Option<Instant>,
    last_clock_redraw: Option<Instant>,
    commands: Vec<Command>,
    dirty: bool,
    quit: bool,
    /// What needs the user: the server's count and how alerts reach them (`attention.rs`).
    pub(crate) needs_you: attention::NeedsYou,
    /// The search view as it was closed, for `f` to reopen it with its hits.
    last_search: Option<SearchView>,
    /// A search hit being opened in context (see `search.rs`).
    jump: Option<search::Jump>,
    /// Usage as agents reported it (see `usage.rs`).
    usage: usage::Usage,
    /// The changes view while a question asked from it is open (see `changes.rs`).
    changes_behind: Option<Box<ChangesView>>,
    /// The session open at the last quit, to open again once listed (see `view_state.rs`).
    reopen: Option<String>,
}

impl App {
    pub fn new(server_url: impl Into<String>, local_workdir: Option<String>) -> Self {
        App {
            server_url: server_url.into(),
            local_workdir,
            connection: ConnectionState::Connecting,
            backoff: Backoff::reconnect(),
            may_start_server: false,
            token_given: false,
            page_token: None,
            bindings: crate::config::Bindings::default(),
            theme: crate::config::Theme::default(),
            default_agent: None,
            server_start_tried: false,
            outage: None,
            epoch: 0,
            sessions: SessionList::default(),
            transcripts: HashMap::new(),
            older_loading: HashSet::new(),
            opened: None,
            opened_at: None,
            auto_resume: AutoResume::default(),
            resumes: ResumeWatch::default(),
            agents: Vec::new(),
            focus: Focus::List,
            input: TextField::default(),
            drafts: HashMap::new(),
            queues: HashMap::new(),
            editing_queued: None,
            history: PromptHistory::default(),
            filter: TextField::default(),
            show_thoughts: true,
            overlay: None,
            help_scroll: 0,
            last_error: None,
            error_scroll: 0,
            mouse: false,
            narrow_shows_session: false,
            clipboard: ClipboardSupport::default(),
            flash: None,
            scroll: 0,
            reading: transcript_focus::Reading::default(),
            metrics: FrameMetrics::default(),
            transcript_layout: RefCell::default(),
            sending: 0,
            list_due: None,
            list_in_flight: false,
            more_sessions_in_flight: false,
            last_list_request: None,
            last_clock_redraw: None,
            commands: Vec::new(),
            dirty: true,
            quit: false,
            needs_you: attention::NeedsYou::default(),
            last_search: None,
            jump: None,
            usage: usage::Usage::default(),
            changes_behind: None,
            reopen: None,
        }
    }

    /// Applies `tui.toml`: the keys, the colours, the new task's agent and directory, the
    /// alerts (which `--alerts` may set again after).
    pub fn set_config(&mut self, config: crate::config::Config) {
        self.bindings = config.bindings;
        self.theme = config.theme;
        self.default_agent = config.defaults.agent;
        if let Some(workdir) = config.defaults.workdir {
            self.local_workdir = Some(workdir);
        }
        if let Some(alerts) = config.defaults.alerts {
            self.set_alerts(alerts);
        }
        self.dirty = true;
    }

    /// The token the web page needs (the one this client connects with), for `O`.
    pub fn set_page_token(&mut self, token: Option<String>) {
        self.page_token = token;
    }

    /// `O`: the web page of the server this client is connected to, with its token, shown in
    /// the status bar and copied (a TUI that started the server is the only place it is said).
    pub(crate) fn show_page_address(&mut self) {
        let Some(page) = page_address(&self.server_url, self.page_token.as_deref()) else {
            self.flash(format!("{} has no web page address", self.server_url), true);
            return;
        };
        let copied = if self.clipboard.may_copy { " (copied to your terminal's clipboard)" } else { "" };
        self.flash(format!("the web page: {page}{copied}"), false);
        if self.clipboard.may_copy {
            self.commands.push(Command::Copy(page));
        }
    }

    pub fn set_clipboard(&mut self, support: ClipboardSupport) {
        self.clipboard = support;
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
            (Some(Overlay::ErrorDetails), _) => KeyMode::ErrorDetails,
            (Some(Overlay::Confirm(_)), _) => KeyMode::Confirm,
            (Some(Overlay::NewTask(_)) | Some(Overlay::Rename(_)), _) => KeyMode::Form,
            (Some(Overlay::Approvals(_)), _) => KeyMode::Approvals,
            (Some(Overlay::Rules(_)), _) => KeyMode::Rules,
            (Some(Overlay::Options(_)), _) => KeyMode::Options,
            (Some(Overlay::Queue(_)), _) => KeyMode::Queue,
            (Some(Overlay::Devices(_)), _) => KeyMode::Devices,
            (Some(Overlay::Search(_)), _) => KeyMode::Search,
            (Some(Overlay::Export(_)), _) => KeyMode::Export,
            (Some(Overlay::Archived(_)), _) => KeyMode::Archived,
            (Some(Overlay::HandOver(_)), _) => KeyMode::HandOver,
            (Some(Overlay::Changes(view)), _) if view.message.is_some() => KeyMode::CommitMessage,
            (Some(Overlay::Changes(_)), _) => KeyMode::Changes,
            (None, Focus::Input) => KeyMode::Input,
            (None, Focus::Filter) => KeyMode::Filter,
            (None, Focus::Transcript) => KeyMode::Transcript,
            (None, Focus::List) if self.cursor_session().is_some_and(|s| self.permission_pending(s)) => {
                KeyMode::Permission
            }
            (None, Focus::List) => KeyMode::List,
        }
    }

    pub fn handle_key(&mut self, key: KeyEvent) {
        // crossterm reads Esc followed quickly by a key as Alt-key: in the prompt that is the
        // user leaving it and pressing the key (Alt-y answers a permission from the prompt).
        if let Some(plain) = escape_then(self.key_mode(), key) {
            self.handle_action(Action::LeaveInput);
            self.handle_key(plain);
            return;
        }
        if let Some(action) = map_key_with(self.key_mode(), key, &self.bindings) {
            self.handle_action(action);
        }
    }

    /// Bracketed paste goes into whichever text field has focus, newlines included.
    pub fn handle_paste(&mut self, text: String) {
        if matches!(
            self.key_mode(),
            KeyMode::Input | KeyMode::Form | KeyMode::Filter | KeyMode::Search | KeyMode::Export
        ) {
            self.handle_action(Action::Edit(EditOp::InsertText(text)));
        }
    }

    /// Called after each frame with the sizes the drawing found.
    pub fn set_frame_metrics(&mut self, metrics: FrameMetrics) {
        self.scroll = metrics.transcript_scroll;
        self.reading.frame_drawn(&metrics);
        // Scrolled past the end, the next key up would seem to do nothing.
        if let Some(max) = metrics.overlay_max_scroll {
            if let Some(scroll) = self.overlay_scroll() {
                *scroll = (*scroll).min(max);
            }
        }
        self.metrics = metrics;
    }

    /// The last frame was too narrow for the list and the transcript side by side.
    pub fn is_narrow(&self) -> bool {
        self.metrics.screen_width > 0 && self.metrics.screen_width < NARROW_WIDTH as usize
    }

    /// What the last frame reported (see [`App::set_frame_metrics`]).
    pub fn frame_metrics(&self) -> &FrameMetrics {
        &self.metrics
    }

    pub fn is_connected(&self) -> bool {
        self.connection == ConnectionState::Connected
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
        self.search_tick(now);
        self.look_at_opened(now);
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

    /// Asks for the next page of the session list when the cursor nears the last row loaded.
    pub(crate) fn load_more_sessions(&mut self) {
        if self.more_sessions_in_flight || !self.is_connected() {
            return;
        }
        if let Some(cursor) = self.sessions.wants_more() {
            self.more_sessions_in_flight = true;
            self.send(Request::MoreSessions { cursor });
        }
    }

    /// Asks for a list refresh soon, collecting a burst of notifications into one request.
    fn schedule_list_refresh(&mut self) {
        if self.list_due.is_none() {
            self.list_due = Some(Instant::now() + LIST_DEBOUNCE);
        }
    }

    fn send(&mut self, request: Request) {
        if let Request::Resume { session_id, .. } = &request {
            let session_id = session_id.clone();
            self.resume_sent(&session_id);
        }
        self.commands.push(Command::Send(request));
    }

    pub(crate) fn flash(&mut self, text: impl Into<String>, is_error: bool) {
        let text = text.into();
        if is_error {
            tracing::warn!("{text}");
            self.last_error = Some(text.clone());
        }
        let until = Instant::now() + if is_error { ERROR_FLASH_FOR } else { FLASH_FOR };
        self.flash = Some(Flash { text, is_error, until, while_starting: None, while_turn: None });
        self.dirty = true;
    }

    /// A message about a session's running turn: it goes when the turn ends.
    pub(crate) fn flash_while_turn(&mut self, text: impl Into<String>, session_id: &str) {
        self.flash(text, false);
        if let Some(flash) = &mut self.flash {
            flash.while_turn = Some(session_id.to_string());
        }
    }

    /// The message is about `session_id`'s turn, which has ended: it no longer holds.
    pub(crate) fn turn_ended(&mut self, session_id: &str) {
        if self.flash.as_ref().and_then(|f| f.while_turn.as_deref()) == Some(session_id) {
            self.flash = None;
            self.dirty = true;
        }
    }

    /// A message about a session's agent starting: it goes when the agent is no longer
    /// starting (ready, or failed), not after a fixed time.
    pub(crate) fn flash_while_starting(&mut self, text: impl Into<String>, session_id: &str) {
        self.flash(text, false);
        if let Some(flash) = &mut self.flash {
            flash.while_starting = Some(session_id.to_string());
        }
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

    /// A permission request of the session waits for an answer, as far as this client knows.
    /// Only the opened session is subscribed, so its transcript is live; another session's
    /// held transcript is trusted while a turn still runs there (a request does not outlive
    /// its turn, and the turn's end arrives as `session.state_changed`).
    pub fn permission_pending(&self, session_id: &str) -> bool {
        let pending = self.transcript(session_id).is_some_and(|t| t.pending_permission().is_some());
        let live = self.opened.as_deref() == Some(session_id)
            || self.sessions.get(session_id).is_some_and(|row| is_working(&row.status));
        pending && live
    }

    /// Sessions of the list loaded so far.
    pub fn sessions_loaded(&self) -> usize {
        self.sessions.len()
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

    pub fn overlay(&self) -> Option<&Overlay> {
        self.overlay.as_ref()
    }

    /// The prompt being written for the opened session (or before any is open).
    pub fn input_text(&self) -> &str {
        self.input.text()
    }

    /// The session list's filter as typed (empty: none).
    pub fn filter_text(&self) -> &str {
        self.filter.text()
    }

    /// Thoughts are shown whole (`t` folds them).
    pub fn shows_thoughts(&self) -> bool {
        self.show_thoughts
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

/// `ws://host:port/ws` → `http://host:port/?token=…` (`wss` → `https`): where the server's web
/// page is, logged in.
pub fn page_address(server_url: &str, token: Option<&str>) -> Option<String> {
    let mut url = url::Url::parse(server_url).ok()?;
    let scheme = match url.scheme() {
        "ws" | "http" => "http",
        "wss" | "https" => "https",
        _ => return None,
    };
    url.set_scheme(scheme).ok()?;
    url.set_path("/");
    url.set_query(None);
    if let Some(token) = token {
        url.query_pairs_mut().append_pair("token", token);
    }
    Some(url.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_address_is_the_servers_with_its_token() {
        let page = super::page_address("ws://127.0.0.1:7777/ws", Some("a b")).expect("an address");
        assert_eq!(page, "http://127.0.0.1:7777/?token=a+b");
        assert_eq!(super::page_address("wss://baton.example/ws", None).as_deref(), Some("https://baton.example/"));
        assert_eq!(super::page_address("not a url", None), None);
    }
}
