//! `tui.toml`: the user's keys, colours and defaults. Keys are bound by action name (the list's
//! keys: those that act on sessions and open views); a key bound to two actions is refused
//! with the line that binds it. Colours come from a dark or light theme, with named colours
//! replaced one by one; `NO_COLOR` (any value) turns every colour off. `baton --print-config`
//! writes the defaults out as a file to start from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crossterm::event::KeyCode;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use serde::Deserialize;
use toml::Spanned;

use crate::action::Action;
use crate::alerts::AlertMode;

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

/// What the list's plain keys do: the defaults with the file's bindings applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Bindings {
    list: HashMap<KeyCode, Action>,
}

impl Default for Bindings {
    fn default() -> Self {
        Bindings { list: every_key().filter_map(|code| Some((code, crate::keymap::default_list_key(code)?))).collect() }
    }
}

impl Bindings {
    /// What a plain key does in the list.
    pub fn list_action(&self, code: KeyCode) -> Option<Action> {
        self.list.get(&code).cloned()
    }

    /// The keys bound to `action`, sorted as the file writes them.
    pub fn keys_of(&self, action: &Action) -> Vec<String> {
        let mut keys: Vec<String> = self.list.iter().filter(|(_, a)| *a == action).map(|(k, _)| key_name(*k)).collect();
        keys.sort();
        keys
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
    keys: HashMap<String, Spanned<KeyList>>,
    /// `theme`, and colours replaced by name.
    #[serde(default)]
    colors: HashMap<String, Spanned<String>>,
    #[serde(default)]
    defaults: FileDefaults,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum KeyList {
    One(String),
    Many(Vec<String>),
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

    // Keys: the defaults, then each action named takes exactly the keys it is given.
    let mut bindings = Bindings::default();
    let mut given: Vec<(&str, &Action, Vec<KeyCode>, usize)> = Vec::new();
    for (name, keys) in &file.keys {
        let line = line_of(text, keys.span().start);
        let Some((name, action, _)) = ACTIONS.iter().find(|(n, _, _)| n == name) else {
            let known = ACTIONS.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", ");
            return Err((Some(line), format!("no action is called {name:?}; the actions are: {known}")));
        };
        let list = match keys.get_ref() {
            KeyList::One(key) => vec![key.clone()],
            KeyList::Many(keys) => keys.clone(),
        };
        let codes =
            list.iter().map(|key| parse_key(key)).collect::<Result<Vec<_>, _>>().map_err(|e| (Some(line), e))?;
        given.push((name, action, codes, line));
    }
    given.sort_by_key(|(_, _, _, line)| *line);
    for (_, action, _, _) in &given {
        bindings.list.retain(|_, a| a != *action);
    }
    let mut bound_at: HashMap<KeyCode, (&str, usize)> = HashMap::new();
    for (name, action, codes, line) in &given {
        for code in codes {
            if let Some((other, other_line)) = bound_at.get(code) {
                return Err((
                    Some(*line),
                    format!("{} is bound to both {other} (line {other_line}) and {name}", key_name(*code)),
                ));
            }
            if let Some(taken) = bindings.list.get(code) {
                let other = ACTIONS.iter().find(|(_, a, _)| a == taken).map_or("another action", |(n, _, _)| *n);
                return Err((
                    Some(*line),
                    format!(
                        "{} is already {other}'s key; bind {other} to another key too, or choose another key for {name}",
                        key_name(*code)
                    ),
                ));
            }
            bound_at.insert(*code, (name, *line));
            bindings.list.insert(*code, (*action).clone());
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
         # backspace. An action given here has only the keys given; a key bound twice is an error.\n\
         [keys]\n",
    );
    for (name, action, about) in ACTIONS {
        let keys = bindings.keys_of(action);
        let value = match keys.as_slice() {
            [one] => format!("{one:?}"),
            many => format!("[{}]", many.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ")),
        };
        out.push_str(&format!("{name} = {value}  # {about}\n"));
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
    fn bad_files_say_which_line() {
        let (line, message) = parse("[keys]\nnew_task = \"n\"\nnope = \"q\"\n", false).expect_err("unknown action");
        assert_eq!(line, Some(3));
        assert!(message.contains("no action is called \"nope\""), "{message}");
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
