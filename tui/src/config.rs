//! `tui.toml`: the user's keys, colours and defaults. Keys are bound by action name, view by
//! view: `[keys]` for the list (whose keys also act in the session pane), `[changes_keys]`,
//! `[approvals_keys]`... for the others; a key bound to two actions of one view is refused with
//! the line that binds it. Colours come from a dark or light theme, with named colours replaced
//! one by one; `NO_COLOR` (any value) turns every colour off. `baton --print-config` writes the
//! defaults out as a file to start from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crossterm::event::KeyCode;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use serde::Deserialize;
use toml::Spanned;

use crate::action::Action;
use crate::alerts::AlertMode;
use crate::keymap;

/// The actions `[keys]` can bind, by the name the file uses, in the order `--print-config`
/// writes them. Their default keys are the list's (see `keymap.rs`).
pub const ACTIONS: &[(&str, Action, &str)] = &[
    ("quit", Action::Quit, "quit (the server and its agents keep running)"),
    ("help", Action::ToggleHelp, "the help"),
    ("escape", Action::Escape, "cancel the running turn (asks); else hide the message, the filter"),
    ("move_up", Action::MoveUp, "move up in the list"),
    ("move_down", Action::MoveDown, "move down in the list"),
    ("open", Action::OpenSelected, "open the highlighted session"),
    ("write", Action::FocusInput, "write a prompt"),
    ("read_transcript", Action::FocusTranscript, "focus the transcript"),
    ("filter", Action::StartFilter, "filter the list"),
    ("search", Action::Search, "search every session's messages"),
    ("toggle_thoughts", Action::ToggleThoughts, "fold or show thoughts"),
    ("next_needing_you", Action::NextNeedingYou, "open the next session that needs you"),
    ("needs_you_only", Action::ToggleNeedsYouOnly, "list only the sessions that need you"),
    ("new_task", Action::NewTask, "new task"),
    ("start_session", Action::StartSession, "new session of the highlighted task"),
    ("cancel_turn", Action::CancelTurn, "cancel the running turn (asks)"),
    ("resume", Action::Resume, "resume the session"),
    ("resume_fresh", Action::ResumeFresh, "start a fresh agent session with the conversation"),
    ("stop", Action::Stop, "stop the session's agent for good (asks)"),
    ("fork", Action::Fork, "fork the session (asks)"),
    ("hand_over", Action::HandOver, "hand the session's conversation to another agent"),
    ("rename", Action::RenameTask, "rename the task"),
    ("archive", Action::ArchiveTask, "archive the task (asks)"),
    ("archived", Action::OpenArchived, "the archived tasks"),
    ("delete", Action::DeleteTask, "delete the task (asks)"),
    ("allow", Action::AllowPermission, "allow a permission request"),
    ("reject", Action::RejectPermission, "reject a permission request"),
    ("approvals", Action::OpenApprovals, "the approval queue"),
    ("rules", Action::OpenRules, "the session's standing answers"),
    ("options", Action::OpenOptions, "the agent's modes and options"),
    ("changes", Action::OpenChanges, "the task's changes: review, commit, merge, pull request"),
    ("shell", Action::OpenShell, "a shell where the agent works"),
    ("copy_answer", Action::CopyAnswer, "copy the last answer"),
    ("copy_code_block", Action::CopyCodeBlock, "copy the last code block"),
    ("export", Action::Export, "export the transcript"),
    ("show_error", Action::ShowError, "the last error in full"),
    ("page_address", Action::ShowPageAddress, "the web page's address"),
    ("toggle_mouse", Action::ToggleMouse, "mouse on/off"),
    ("stop_server", Action::StopServer, "stop the local server and its agents (asks)"),
    ("page_up", Action::ScrollUp, "scroll the transcript up a page"),
    ("page_down", Action::ScrollDown, "scroll the transcript down a page"),
    ("top", Action::ScrollTop, "the transcript's top"),
    ("bottom", Action::ScrollBottom, "the transcript's bottom, following new output"),
];

/// Where a key acts: the list (its keys also act in the session pane and the focused
/// transcript, unless the view has the key itself), or one of the views over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    List,
    Transcript,
    Changes,
    Approvals,
    Archived,
    Rules,
    Options,
    HandOver,
    Queue,
    Devices,
}

/// A view's bindable actions and default keys: a table of the file (`[changes_keys]`).
pub struct ViewKeys {
    pub view: View,
    /// The file's table for it.
    pub section: &'static str,
    pub about: &'static str,
    pub actions: &'static [(&'static str, Action, &'static str)],
    pub defaults: fn(KeyCode) -> Option<Action>,
}

const CLOSE: (&str, Action, &str) = ("close", Action::CloseOverlay, "close the view");
const UP: (&str, Action, &str) = ("move_up", Action::MoveUp, "move up");
const DOWN: (&str, Action, &str) = ("move_down", Action::MoveDown, "move down");

/// Every view whose keys the file can bind, in the order `--print-config` writes them. The
/// help, the last error's popup, confirmations and the text fields keep their keys.
pub const VIEWS: &[ViewKeys] = &[
    ViewKeys {
        view: View::List,
        section: "keys",
        about: "the list's keys, which also act in the session pane",
        actions: ACTIONS,
        defaults: keymap::default_list_key,
    },
    ViewKeys {
        view: View::Transcript,
        section: "transcript_keys",
        about: "the focused transcript (v); the list's keys act there too",
        actions: &[
            ("leave", Action::LeaveTranscript, "back to the list"),
            ("line_up", Action::ScrollLineUp, "scroll up a line"),
            ("line_down", Action::ScrollLineDown, "scroll down a line"),
            ("page_up", Action::ScrollUp, "scroll up a page"),
            ("page_down", Action::ScrollDown, "scroll down a page"),
            ("prev_entry", Action::PrevEntry, "the entry before"),
            ("next_entry", Action::NextEntry, "the entry after"),
            ("prev_tool_call", Action::PrevToolCall, "the tool call before"),
            ("next_tool_call", Action::NextToolCall, "the tool call after"),
            ("expand", Action::ToggleExpand, "expand or fold the selected entry"),
        ],
        defaults: keymap::default_transcript_key,
    },
    ViewKeys {
        view: View::Changes,
        section: "changes_keys",
        about: "a task's changes (d)",
        actions: &[
            CLOSE,
            ("move_up", Action::MoveUp, "the file above"),
            ("move_down", Action::MoveDown, "the file below"),
            ("line_up", Action::ScrollLineUp, "scroll the diff up a line"),
            ("line_down", Action::ScrollLineDown, "scroll the diff down a line"),
            ("page_up", Action::ScrollUp, "scroll the diff up a page"),
            ("page_down", Action::ScrollDown, "scroll the diff down a page"),
            ("next_hunk", Action::NextHunk, "the next hunk"),
            ("prev_hunk", Action::PrevHunk, "the hunk before"),
            ("keep", Action::ToggleKeep, "keep the file out of the commit, or back in"),
            ("refresh", Action::RefreshChanges, "list the changes again"),
            ("commit", Action::Commit, "commit"),
            ("merge", Action::Merge { remove_worktree: false }, "merge into the base branch"),
            ("merge_and_remove", Action::Merge { remove_worktree: true }, "merge and remove the worktree"),
            ("pull_request", Action::PullRequest, "open a pull request"),
            ("shell", Action::OpenShell, "a shell where the agent works"),
        ],
        defaults: keymap::default_changes_key,
    },
    ViewKeys {
        view: View::Approvals,
        section: "approvals_keys",
        about: "the approval queue (A); 1-9 pick an option",
        actions: &[
            CLOSE,
            UP,
            DOWN,
            ("allow", Action::AllowPermission, "allow the request"),
            ("reject", Action::RejectPermission, "reject the request"),
            ("open", Action::OpenSelected, "open the request's session"),
        ],
        defaults: keymap::default_approvals_key,
    },
    ViewKeys {
        view: View::Archived,
        section: "archived_keys",
        about: "the archived tasks (z)",
        actions: &[CLOSE, UP, DOWN, ("unarchive", Action::Unarchive, "bring the task back")],
        defaults: keymap::default_archived_key,
    },
    ViewKeys {
        view: View::Rules,
        section: "rules_keys",
        about: "a session's standing answers (P)",
        actions: &[CLOSE, UP, DOWN, ("revoke", Action::RevokeRule, "revoke the answer")],
        defaults: keymap::default_rules_key,
    },
    ViewKeys {
        view: View::Options,
        section: "options_keys",
        about: "the agent's modes and options (M)",
        actions: &[CLOSE, UP, DOWN, ("pick", Action::PickOption, "switch to the value")],
        defaults: keymap::default_options_key,
    },
    ViewKeys {
        view: View::HandOver,
        section: "hand_over_keys",
        about: "the agents to hand a conversation to (H)",
        actions: &[CLOSE, UP, DOWN, ("pick", Action::PickOption, "hand it to this agent")],
        defaults: keymap::default_hand_over_key,
    },
    ViewKeys {
        view: View::Queue,
        section: "queue_keys",
        about: "the queued messages (u)",
        actions: &[
            CLOSE,
            UP,
            DOWN,
            ("remove", Action::RemoveQueued, "remove the message"),
            ("edit", Action::EditQueued, "edit the message"),
            ("release", Action::ReleaseQueue, "send the next message of a held queue"),
        ],
        defaults: keymap::default_queue_key,
    },
    ViewKeys {
        view: View::Devices,
        section: "devices_keys",
        about: "the paired devices (p)",
        actions: &[
            CLOSE,
            UP,
            DOWN,
            ("pair", Action::PairDevice, "pair a device (QR code)"),
            ("revoke", Action::RevokeDevice, "revoke the device"),
        ],
        defaults: keymap::default_devices_key,
    },
];

impl View {
    fn keys(self) -> &'static ViewKeys {
        VIEWS.iter().find(|v| v.view == self).unwrap_or(&VIEWS[0])
    }

    /// The file's table for the view: `[keys]`, `[changes_keys]`...
    pub fn table(self) -> String {
        format!("[{}]", self.keys().section)
    }
}

/// Keys that can be named in the file, besides single characters.
const NAMED_KEYS: &[(&str, KeyCode)] = &[
    ("enter", KeyCode::Enter),
    ("esc", KeyCode::Esc),
    ("tab", KeyCode::Tab),
    ("backtab", KeyCode::BackTab),
    ("space", KeyCode::Char(' ')),
    ("up", KeyCode::Up),
    ("down", KeyCode::Down),
    ("left", KeyCode::Left),
    ("right", KeyCode::Right),
    ("home", KeyCode::Home),
    ("end", KeyCode::End),
    ("pgup", KeyCode::PageUp),
    ("pgdn", KeyCode::PageDown),
    ("delete", KeyCode::Delete),
    ("backspace", KeyCode::Backspace),
];

/// What each view's plain keys do: the defaults with the file's bindings applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Bindings {
    views: HashMap<View, HashMap<KeyCode, Action>>,
}

impl Default for Bindings {
    fn default() -> Self {
        let views = VIEWS
            .iter()
            .map(|keys| (keys.view, every_key().filter_map(|code| Some((code, (keys.defaults)(code)?))).collect()))
            .collect();
        Bindings { views }
    }
}

impl Bindings {
    /// What a plain key does in `view`.
    pub fn action(&self, view: View, code: KeyCode) -> Option<Action> {
        self.views.get(&view)?.get(&code).cloned()
    }

    /// What a plain key does in the list.
    pub fn list_action(&self, code: KeyCode) -> Option<Action> {
        self.action(View::List, code)
    }

    /// The keys bound to `action` in `view`, sorted as the file writes them.
    pub fn keys_of(&self, view: View, action: &Action) -> Vec<String> {
        let Some(keys) = self.views.get(&view) else { return Vec::new() };
        let mut keys: Vec<String> = keys.iter().filter(|(_, a)| *a == action).map(|(k, _)| key_name(*k)).collect();
        keys.sort();
        keys
    }

    /// How a hint names the key of action `name` in `views` (the first that has the action):
    /// `preferred` (a key as the file names it) while it is still bound to the action, else the
    /// first of its keys; None when nothing is bound to it.
    pub fn hint_key(&self, views: &[View], name: &str, preferred: &str) -> Option<String> {
        let (view, action) = views
            .iter()
            .find_map(|view| view.keys().actions.iter().find(|(n, _, _)| *n == name).map(|(_, a, _)| (*view, a)))?;
        let bound = self.views.get(&view)?;
        let keys: Vec<KeyCode> = {
            let mut keys: Vec<KeyCode> = bound.iter().filter(|(_, a)| *a == action).map(|(k, _)| *k).collect();
            keys.sort_by_key(|k| key_name(*k));
            keys
        };
        let chosen = parse_key(preferred).ok().filter(|k| keys.contains(k)).or_else(|| keys.first().copied())?;
        Some(key_label(chosen))
    }

    /// The actions whose keys are not the defaults: `(table, action, keys)`, for the help.
    pub fn changed(&self) -> Vec<(String, &'static str, Vec<String>)> {
        let defaults = Bindings::default();
        let mut changed = Vec::new();
        for keys in VIEWS {
            for (name, action, _) in keys.actions {
                let now = self.keys_of(keys.view, action);
                if now != defaults.keys_of(keys.view, action) {
                    // As the screen names keys ("Esc", "↑"), not as the file does.
                    let labels = now.iter().filter_map(|key| parse_key(key).ok()).map(key_label).collect();
                    changed.push((keys.view.table(), *name, labels));
                }
            }
        }
        changed
    }
}

/// Every key the list could bind: printable characters and the named keys.
fn every_key() -> impl Iterator<Item = KeyCode> {
    (' '..='~').map(KeyCode::Char).chain(NAMED_KEYS.iter().map(|(_, code)| *code))
}

fn key_name(code: KeyCode) -> String {
    match NAMED_KEYS.iter().find(|(_, c)| *c == code) {
        Some((name, _)) => (*name).to_string(),
        None => match code {
            KeyCode::Char(c) => c.to_string(),
            other => format!("{other:?}"),
        },
    }
}

/// A key as the screen names it: "Esc", "Enter", "Space", "↑", "PgUp", or the character.
pub fn key_label(code: KeyCode) -> String {
    match code {
        KeyCode::Esc => "Esc".into(),
        KeyCode::Enter => "Enter".into(),
        KeyCode::Tab => "Tab".into(),
        KeyCode::BackTab => "Shift-Tab".into(),
        KeyCode::Char(' ') => "Space".into(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::Home => "Home".into(),
        KeyCode::End => "End".into(),
        KeyCode::PageUp => "PgUp".into(),
        KeyCode::PageDown => "PgDn".into(),
        KeyCode::Delete => "Del".into(),
        KeyCode::Backspace => "Backspace".into(),
        other => format!("{other:?}"),
    }
}

fn parse_key(text: &str) -> Result<KeyCode, String> {
    if let Some((_, code)) = NAMED_KEYS.iter().find(|(name, _)| name.eq_ignore_ascii_case(text)) {
        return Ok(*code);
    }
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_digit() => {
            Err(format!("{text:?}: the digits answer a permission request by its options and cannot be bound"))
        }
        (Some(c), None) if (' '..='~').contains(&c) => Ok(KeyCode::Char(c)),
        _ => Err(format!(
            "{text:?} is not a key: give one character (\"n\", \"N\", \"?\") or one of {}",
            NAMED_KEYS.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The theme's colours, after the file's replacements; `None`: no colour at all (`NO_COLOR`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Theme {
    /// Each colour the screen is drawn with → the colour shown.
    map: HashMap<Color, Color>,
    no_color: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThemeName {
    #[default]
    Dark,
    Light,
}

/// The colours the views use, by the name `[colors]` gives them.
const COLOR_NAMES: &[(&str, Color)] = &[
    ("black", Color::Black),
    ("red", Color::Red),
    ("green", Color::Green),
    ("yellow", Color::Yellow),
    ("blue", Color::Blue),
    ("magenta", Color::Magenta),
    ("cyan", Color::Cyan),
    ("gray", Color::Gray),
    ("dark_gray", Color::DarkGray),
    ("white", Color::White),
    ("cursor_row", CURSOR_ROW),
];

/// The highlighted row's background (a 256-colour grey: tmux and SSH may have no true colour).
pub const CURSOR_ROW: Color = Color::Indexed(236);

impl Theme {
    pub fn new(name: ThemeName, no_color: bool) -> Theme {
        let map = match name {
            ThemeName::Dark => HashMap::new(),
            // On a light background: darker shades of the same colours, a light cursor row.
            ThemeName::Light => [
                (Color::Yellow, Color::Indexed(130)),
                (Color::Green, Color::Indexed(28)),
                (Color::Cyan, Color::Indexed(31)),
                (Color::Magenta, Color::Indexed(127)),
                (Color::Gray, Color::Indexed(242)),
                (Color::White, Color::Black),
                (CURSOR_ROW, Color::Indexed(254)),
            ]
            .into_iter()
            .collect(),
        };
        Theme { map, no_color }
    }

    /// The theme from the environment alone: dark, and no colour when `NO_COLOR` is set.
    pub fn from_env() -> Theme {
        Theme::new(ThemeName::Dark, no_color_env())
    }

    /// Recolours a drawn frame: every view draws with the base colours, the theme decides what
    /// they look like.
    pub fn apply(&self, buffer: &mut Buffer) {
        if !self.no_color && self.map.is_empty() {
            return;
        }
        for cell in buffer.content.iter_mut() {
            if self.no_color {
                cell.fg = Color::Reset;
                cell.bg = Color::Reset;
            } else {
                if let Some(fg) = self.map.get(&cell.fg) {
                    cell.fg = *fg;
                }
                if let Some(bg) = self.map.get(&cell.bg) {
                    cell.bg = *bg;
                }
            }
        }
    }
}

/// <https://no-color.org>: set to anything but the empty string, no colour.
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// `[defaults]`: what the new-task form and the alerts start with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Defaults {
    pub agent: Option<String>,
    pub workdir: Option<String>,
    pub alerts: Option<AlertMode>,
}

/// The whole file, applied.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    pub bindings: Bindings,
    pub theme: Theme,
    pub defaults: Defaults,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    keys: Table,
    #[serde(default)]
    transcript_keys: Table,
    #[serde(default)]
    changes_keys: Table,
    #[serde(default)]
    approvals_keys: Table,
    #[serde(default)]
    archived_keys: Table,
    #[serde(default)]
    rules_keys: Table,
    #[serde(default)]
    options_keys: Table,
    #[serde(default)]
    hand_over_keys: Table,
    #[serde(default)]
    queue_keys: Table,
    #[serde(default)]
    devices_keys: Table,
    /// `theme`, and colours replaced by name.
    #[serde(default)]
    colors: HashMap<String, Spanned<String>>,
    #[serde(default)]
    defaults: FileDefaults,
}

/// A view's table of actions and their keys.
type Table = HashMap<String, Spanned<KeyList>>;

#[derive(Deserialize)]
#[serde(untagged)]
enum KeyList {
    One(String),
    Many(Vec<String>),
}

impl KeyList {
    fn keys(&self) -> Vec<String> {
        match self {
            KeyList::One(key) => vec![key.clone()],
            KeyList::Many(keys) => keys.clone(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileDefaults {
    agent: Option<String>,
    workdir: Option<String>,
    alerts: Option<Spanned<String>>,
}

/// What is wrong with the file, with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: PathBuf,
    /// 1-based; `None` when the problem is not on one line (the file cannot be read).
    pub line: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}, line {line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Where the file is looked for: `$XDG_CONFIG_HOME/baton/tui.toml` (the platform's config dir).
pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|dir| dir.join("baton").join("tui.toml"))
}

/// Reads the file at `path`; a default path that does not exist gives the defaults, a path the
/// user named must exist.
pub fn load(path: &Path, named: bool) -> Result<Config, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => {
            return Ok(Config { theme: Theme::from_env(), ..Config::default() })
        }
        Err(e) => {
            return Err(ConfigError { path: path.to_path_buf(), line: None, message: format!("cannot read it: {e}") })
        }
    };
    parse(&text, no_color_env()).map_err(|(line, message)| ConfigError { path: path.to_path_buf(), line, message })
}

/// A binding of the file: the view, the action's name, the action, its keys, and the line.
type Given<'a> = (View, &'a str, &'a Action, Vec<KeyCode>, usize);

/// The action `name` of `view` with the keys it is given, or why not.
fn bound<'a>(
    view: &'a ViewKeys,
    name: &str,
    keys: &[String],
    line: usize,
) -> Result<Given<'a>, (Option<usize>, String)> {
    let Some((name, action, _)) = view.actions.iter().find(|(n, _, _)| *n == name) else {
        let known = view.actions.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", ");
        let views = if view.view == View::List {
            format!(
                " (and the views' tables: {})",
                VIEWS.iter().skip(1).map(|v| v.view.table()).collect::<Vec<_>>().join(", ")
            )
        } else {
            String::new()
        };
        return Err((
            Some(line),
            format!("{} has no action called {name:?}; its actions are: {known}{views}", view.view.table()),
        ));
    };
    let codes = keys.iter().map(|key| parse_key(key)).collect::<Result<Vec<_>, _>>().map_err(|e| (Some(line), e))?;
    Ok((view.view, name, action, codes, line))
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Parses and applies a file's text; an error says on which line.
pub fn parse(text: &str, no_color: bool) -> Result<Config, (Option<usize>, String)> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|span| line_of(text, span.start));
        (line, e.message().trim().to_string())
    })?;

    // Keys: the defaults, then each action named takes exactly the keys it is given, view by view.
    let mut bindings = Bindings::default();
    let mut given: Vec<Given> = Vec::new();
    let tables = [
        (View::List, &file.keys),
        (View::Transcript, &file.transcript_keys),
        (View::Changes, &file.changes_keys),
        (View::Approvals, &file.approvals_keys),
        (View::Archived, &file.archived_keys),
        (View::Rules, &file.rules_keys),
        (View::Options, &file.options_keys),
        (View::HandOver, &file.hand_over_keys),
        (View::Queue, &file.queue_keys),
        (View::Devices, &file.devices_keys),
    ];
    for (view, table) in tables {
        for (name, keys) in table {
            given.push(bound(view.keys(), name, &keys.get_ref().keys(), line_of(text, keys.span().start))?);
        }
    }
    given.sort_by_key(|(_, _, _, _, line)| *line);
    for (view, _, action, _, _) in &given {
        if let Some(keys) = bindings.views.get_mut(view) {
            keys.retain(|_, a| a != *action);
        }
    }
    let mut bound_at: HashMap<(View, KeyCode), (&str, usize)> = HashMap::new();
    for (view, name, action, codes, line) in &given {
        let names = view.keys().actions;
        let Some(keys) = bindings.views.get_mut(view) else { continue };
        for code in codes {
            if let Some((other, other_line)) = bound_at.get(&(*view, *code)) {
                return Err((
                    Some(*line),
                    format!("{} is bound to both {other} (line {other_line}) and {name}", key_name(*code)),
                ));
            }
            if let Some(taken) = keys.get(code) {
                let other = names.iter().find(|(_, a, _)| a == taken).map_or("another action", |(n, _, _)| *n);
                return Err((
                    Some(*line),
                    format!(
                        "{} is already {other}'s key{}; bind {other} to another key too, or choose another key for {name}",
                        key_name(*code),
                        if *view == View::List { String::new() } else { format!(" in {}", view.table()) },
                    ),
                ));
            }
            bound_at.insert((*view, *code), (name, *line));
            keys.insert(*code, (*action).clone());
        }
    }

    let theme_name = match file.colors.get("theme") {
        None => ThemeName::Dark,
        Some(value) => match value.get_ref().as_str() {
            "dark" => ThemeName::Dark,
            "light" => ThemeName::Light,
            other => {
                let line = line_of(text, value.span().start);
                return Err((Some(line), format!("theme = {other:?}: give \"dark\" or \"light\"")));
            }
        },
    };
    let mut theme = Theme::new(theme_name, no_color);
    for (name, value) in file.colors.iter().filter(|(name, _)| *name != "theme") {
        let line = line_of(text, value.span().start);
        let Some((_, base)) = COLOR_NAMES.iter().find(|(n, _)| n == name) else {
            let known = COLOR_NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
            return Err((Some(line), format!("no colour is called {name:?}; the colours are: theme, {known}")));
        };
        let color = value.get_ref().parse::<Color>().map_err(|_| {
            (
                Some(line),
                format!("{:?} is not a colour (a name such as \"yellow\", \"#b58900\" or 0-255)", value.get_ref()),
            )
        })?;
        theme.map.insert(*base, color);
    }

    let alerts = match &file.defaults.alerts {
        None => None,
        Some(value) => Some(match value.get_ref().as_str() {
            "off" => AlertMode::Off,
            "bell" => AlertMode::Bell,
            "notify" => AlertMode::Notify,
            other => {
                return Err((
                    Some(line_of(text, value.span().start)),
                    format!("alerts = {other:?}: give \"notify\", \"bell\" or \"off\""),
                ))
            }
        }),
    };
    let defaults = Defaults { agent: file.defaults.agent, workdir: file.defaults.workdir, alerts };
    Ok(Config { bindings, theme, defaults })
}

/// The defaults as a file (`baton --print-config`): every action with its keys, the colours,
/// the defaults, each explained.
pub fn default_file() -> String {
    let bindings = Bindings::default();
    let mut out = String::from(
        "# Baton's terminal client: ~/.config/baton/tui.toml (or --config PATH, BATON_CONFIG).\n\
         # These are the defaults; delete what you do not change.\n\n\
         # The list's keys, by action: one key or a list of keys. A key is one character or\n\
         # enter, esc, tab, backtab, space, up, down, left, right, home, end, pgup, pgdn, delete,\n\
         # backspace. An action given here has only the keys given; a key bound twice in one view\n\
         # is an error. The other views' keys follow in their own tables ([changes_keys]...).\n",
    );
    for view in VIEWS {
        out.push_str(&format!("\n# {}\n{}\n", view.about, view.view.table()));
        for (name, action, about) in view.actions {
            let keys = bindings.keys_of(view.view, action);
            let value = match keys.as_slice() {
                [one] => format!("{one:?}"),
                many => format!("[{}]", many.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ")),
            };
            out.push_str(&format!("{name} = {value}  # {about}\n"));
        }
    }
    out.push_str(
        "\n# theme: \"dark\" or \"light\". Any of the colours below may be replaced (a name such as\n\
         # \"yellow\", \"#b58900\", or 0-255): black, red, green, yellow, blue, magenta, cyan, gray,\n\
         # dark_gray, white, cursor_row. NO_COLOR in the environment turns every colour off.\n\
         [colors]\n\
         theme = \"dark\"\n\
         # yellow = \"#b58900\"\n\n\
         # What the new-task form starts with, and how a session that needs you is announced\n\
         # (\"notify\", \"bell\" or \"off\"; --alerts and BATON_ALERTS win over it).\n\
         [defaults]\n\
         # agent = \"claude-code\"\n\
         # workdir = \"/home/me/src/project\"\n\
         # alerts = \"notify\"\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_defaults_parse_back_to_the_defaults() {
        let config = parse(&default_file(), false).expect("the defaults parse");
        assert_eq!(config.bindings, Bindings::default());
        assert_eq!(config.theme, Theme::new(ThemeName::Dark, false));
    }

    #[test]
    fn an_action_takes_the_keys_it_is_given() {
        let config = parse("[keys]\nnew_task = \"+\"\nreject = [\"n\", \"N\"]\n", false).expect("parses");
        assert_eq!(config.bindings.list_action(KeyCode::Char('+')), Some(Action::NewTask));
        assert_eq!(config.bindings.list_action(KeyCode::Char('n')), Some(Action::RejectPermission));
        assert_eq!(config.bindings.list_action(KeyCode::Char('N')), Some(Action::RejectPermission));
    }

    #[test]
    fn a_conflict_names_both_actions_and_the_line() {
        let (line, message) = parse("[keys]\n\narchive = \"x\"\n", false).expect_err("x is export's");
        assert_eq!(line, Some(3));
        assert!(message.contains("x is already export's key"), "{message}");
        let (line, message) = parse("[keys]\nstop = \"+\"\nfork = \"+\"\n", false).expect_err("+ twice");
        assert_eq!(line, Some(3));
        assert!(message.contains("bound to both stop (line 2) and fork"), "{message}");
    }

    #[test]
    fn a_views_action_takes_its_keys_there_only_and_its_conflicts_name_the_table() {
        let text = "[keys]\nnew_task = \"+\"\n[changes_keys]\ncommit = \"C\"\nnext_hunk = [\"n\", \"space\"]\nkeep = \"k\"\nmove_up = \"up\"\n";
        let bindings = parse(text, false).expect("parses").bindings;
        assert_eq!(bindings.action(View::Changes, KeyCode::Char('C')), Some(Action::Commit));
        assert_eq!(bindings.action(View::Changes, KeyCode::Char('c')), None, "commit has only its new key");
        assert_eq!(bindings.action(View::Changes, KeyCode::Char(' ')), Some(Action::NextHunk));
        assert_eq!(bindings.action(View::Changes, KeyCode::Char('k')), Some(Action::ToggleKeep));
        assert_eq!(bindings.list_action(KeyCode::Char('C')), None, "the list is not changed by the view's table");
        assert_eq!(bindings.list_action(KeyCode::Char('k')), Some(Action::MoveUp));
        let changed: Vec<String> = bindings
            .changed()
            .into_iter()
            .map(|(table, name, keys)| format!("{table} {name} {}", keys.join(" ")))
            .collect();
        assert_eq!(
            changed,
            [
                "[keys] new_task +",
                "[changes_keys] move_up ↑",
                "[changes_keys] next_hunk n Space",
                "[changes_keys] keep k",
                "[changes_keys] commit C",
            ]
        );

        let (line, message) = parse("[queue_keys]\n\nremove = \"e\"\n", false).expect_err("e is edit's");
        assert_eq!(line, Some(3));
        assert!(message.contains("e is already edit's key in [queue_keys]"), "{message}");
    }

    #[test]
    fn bad_files_say_which_line() {
        let (line, message) = parse("[keys]\nnew_task = \"n\"\nnope = \"q\"\n", false).expect_err("unknown action");
        assert_eq!(line, Some(3));
        assert!(message.contains("[keys] has no action called \"nope\""), "{message}");
        let (line, message) = parse("[keys]\n[changes_keys]\nquit = \"q\"\n", false).expect_err("not a view's action");
        assert_eq!(line, Some(3));
        assert!(message.contains("[changes_keys] has no action called \"quit\""), "{message}");
        let (line, message) = parse("\n[chnages_keys]\ncommit = \"C\"\n", false).expect_err("no such table");
        assert_eq!(line, Some(2), "{message}");
        let (line, _) = parse("[keys]\nnew_task = \"ctrl-n\"\n", false).expect_err("not a key");
        assert_eq!(line, Some(2));
        let (line, _) = parse("[colors]\ntheme = \"dark\"\nyellow = \"not a colour\"\n", false).expect_err("colour");
        assert_eq!(line, Some(3));
        let (line, message) = parse("[keys\n", false).expect_err("not TOML");
        assert_eq!(line, Some(1), "{message}");
        let (line, _) = parse("[defaults]\nalerts = \"loud\"\n", false).expect_err("alerts");
        assert_eq!(line, Some(2));
    }

    #[test]
    fn no_color_resets_every_colour_and_light_replaces_them() {
        let mut buffer = Buffer::empty(ratatui::layout::Rect::new(0, 0, 2, 1));
        buffer.content[0].fg = Color::Yellow;
        buffer.content[1].bg = CURSOR_ROW;
        let mut light = buffer.clone();
        Theme::new(ThemeName::Dark, true).apply(&mut buffer);
        assert_eq!((buffer.content[0].fg, buffer.content[1].bg), (Color::Reset, Color::Reset));
        Theme::new(ThemeName::Light, false).apply(&mut light);
        assert_eq!((light.content[0].fg, light.content[1].bg), (Color::Indexed(130), Color::Indexed(254)));
    }
}
