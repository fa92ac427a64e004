//! Keys to actions, per mode. The only place that knows which key does what (the help overlay
//! lists the same bindings).

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::action::{Action, EditOp};
use crate::config::{Bindings, View};

/// Which keys are live: decided by the app from its focus and overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyMode {
    /// The session list has focus.
    List,
    /// The session list has focus and the highlighted session asks for permission: `y`, `N`
    /// and the option numbers answer it. `n` still opens the new-task form: a key that answers
    /// an agent is never one that does something else in another moment.
    Permission,
    /// The prompt input has focus.
    Input,
    /// The transcript has focus: keys scroll it, select entries and expand tool calls; `y`,
    /// `N` and the option numbers answer a permission request.
    Transcript,
    /// Typing a filter for the session list.
    Filter,
    Help,
    /// The last error's popup (`E`).
    ErrorDetails,
    Confirm,
    Form,
    /// The approval queue is open: move, answer with y/N/1-9, Enter opens the session.
    Approvals,
    /// A session's standing answers are open: move, x revokes.
    Rules,
    /// The modes and options of a session's agent are open (`M`): move, Enter picks.
    Options,
    /// The queued messages (`u`).
    Queue,
    /// The paired devices (`p`): n pairs one, x revokes.
    Devices,
    /// Typing a search (`f`): text edits the query, ↑/↓ choose a hit, Enter opens it.
    Search,
    /// Where to export the transcript (`x`).
    Export,
    /// The archived tasks (`z`): move, u unarchives.
    Archived,
    /// The agents to hand a conversation to (`H`): move, Enter picks.
    HandOver,
    /// A task's changes (`d`): files, diff, commit, merge, pull request.
    Changes,
    /// Writing a commit message in the changes (`c`).
    CommitMessage,
}

/// [`map_key_with`] with the default keys.
pub fn map_key(mode: KeyMode, key: KeyEvent) -> Option<Action> {
    map_key_with(mode, key, &Bindings::default())
}

/// The action of `key` in `mode`, the list's plain keys as `bindings` has them (`tui.toml`).
pub fn map_key_with(mode: KeyMode, key: KeyEvent, bindings: &Bindings) -> Option<Action> {
    // Terminals that report releases and repeats would otherwise act twice.
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && key.code == KeyCode::Char('c') {
        return Some(Action::Interrupt);
    }
    match mode {
        KeyMode::List | KeyMode::Permission => list_key(key.code, ctrl, bindings),
        KeyMode::Input => input_key(key, ctrl),
        KeyMode::Transcript => transcript_key(key.code, ctrl, bindings),
        KeyMode::Filter => filter_key(key, ctrl),
        // A help taller than the terminal scrolls, as the last error's popup does.
        KeyMode::Help => match key.code {
            KeyCode::Char('?') => Some(Action::CloseOverlay),
            code => pager_key(code),
        },
        KeyMode::ErrorDetails => match key.code {
            KeyCode::Char('E') => Some(Action::CloseOverlay),
            code => pager_key(code),
        },
        KeyMode::Confirm => match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => Some(Action::Confirm),
            KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => Some(Action::CloseOverlay),
            _ => None,
        },
        KeyMode::Form => form_key(key, ctrl),
        KeyMode::Approvals
        | KeyMode::Rules
        | KeyMode::Options
        | KeyMode::Queue
        | KeyMode::Devices
        | KeyMode::Archived
        | KeyMode::HandOver
        | KeyMode::Changes => bound_views(mode).first().and_then(|view| view_key(*view, key.code, ctrl, bindings)),
        KeyMode::Search => search_key(key, ctrl),
        KeyMode::Export => export_key(key, ctrl),
        KeyMode::CommitMessage => form_key(key, ctrl),
    }
}

/// The views whose `tui.toml` tables bind a mode's plain keys, first to last (the focused
/// transcript's own, then the list's); empty for a mode that keeps its keys (text fields, the
/// help, confirmations). The keymap looks keys up there, the status bar's hints name them.
pub fn bound_views(mode: KeyMode) -> &'static [View] {
    match mode {
        KeyMode::List | KeyMode::Permission => &[View::List],
        KeyMode::Transcript => &[View::Transcript, View::List],
        KeyMode::Approvals => &[View::Approvals],
        KeyMode::Rules => &[View::Rules],
        KeyMode::Options => &[View::Options],
        KeyMode::HandOver => &[View::HandOver],
        KeyMode::Queue => &[View::Queue],
        KeyMode::Devices => &[View::Devices],
        KeyMode::Archived => &[View::Archived],
        KeyMode::Changes => &[View::Changes],
        _ => &[],
    }
}

/// A task's changes: j/k between files, J/K and PgUp/PgDn scroll the diff, n/N between hunks.
pub fn default_changes_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('d') => Action::CloseOverlay,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Char('J') => Action::ScrollLineDown,
        KeyCode::Char('K') => Action::ScrollLineUp,
        KeyCode::PageDown => Action::ScrollDown,
        KeyCode::PageUp => Action::ScrollUp,
        KeyCode::Char('n') => Action::NextHunk,
        KeyCode::Char('N') => Action::PrevHunk,
        KeyCode::Char(' ') => Action::ToggleKeep,
        KeyCode::Char('r') => Action::RefreshChanges,
        KeyCode::Char('c') => Action::Commit,
        KeyCode::Char('m') => Action::Merge { remove_worktree: false },
        KeyCode::Char('M') => Action::Merge { remove_worktree: true },
        KeyCode::Char('P') => Action::PullRequest,
        KeyCode::Char('!') => Action::OpenShell,
        _ => return None,
    })
}

/// The approval queue: a list of requests, each answered where it is.
pub fn default_approvals_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('A') => Action::CloseOverlay,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Char('y') => Action::AllowPermission,
        KeyCode::Char('N') => Action::RejectPermission,
        KeyCode::Char(digit @ '1'..='9') => Action::ChooseOption(digit as usize - '1' as usize),
        KeyCode::Enter => Action::OpenSelected,
        _ => return None,
    })
}

/// The archived tasks: u brings the highlighted one's task back into the list.
pub fn default_archived_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('z') => Action::CloseOverlay,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Char('u') => Action::Unarchive,
        _ => return None,
    })
}

/// A session's standing answers: x (or Delete) revokes the one under the cursor.
pub fn default_rules_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('P') => Action::CloseOverlay,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Char('x') | KeyCode::Delete => Action::RevokeRule,
        _ => return None,
    })
}

/// The modes and options: Enter (or space) switches to the value under the cursor.
pub fn default_options_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('M') => Action::CloseOverlay,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Enter | KeyCode::Char(' ') => Action::PickOption,
        _ => return None,
    })
}

/// The agents to hand a conversation to: move, Enter picks, Esc (or H again) closes.
pub fn default_hand_over_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('H') => Action::CloseOverlay,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Enter => Action::PickOption,
        _ => return None,
    })
}

/// The queued messages: x (or Delete) removes, e edits, r sends the next one of a held queue.
pub fn default_queue_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('u') => Action::CloseOverlay,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Char('x') | KeyCode::Delete => Action::RemoveQueued,
        KeyCode::Char('e') | KeyCode::Enter => Action::EditQueued,
        KeyCode::Char('r') => Action::ReleaseQueue,
        _ => return None,
    })
}

/// The paired devices: n shows a pairing code (QR code and address), x (or Delete) revokes.
pub fn default_devices_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('p') => Action::CloseOverlay,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Char('n') => Action::PairDevice,
        KeyCode::Char('x') | KeyCode::Delete => Action::RevokeDevice,
        _ => return None,
    })
}

/// A box that scrolls over the screen: Esc or q closes it.
fn pager_key(code: KeyCode) -> Option<Action> {
    match code {
        KeyCode::Esc | KeyCode::Char('q') => Some(Action::CloseOverlay),
        KeyCode::Up | KeyCode::Char('k') => Some(Action::ScrollLineUp),
        KeyCode::Down | KeyCode::Char('j') => Some(Action::ScrollLineDown),
        KeyCode::PageUp | KeyCode::Char('b') => Some(Action::ScrollUp),
        KeyCode::PageDown | KeyCode::Char(' ') => Some(Action::ScrollDown),
        _ => None,
    }
}

fn list_key(code: KeyCode, ctrl: bool, bindings: &Bindings) -> Option<Action> {
    if ctrl {
        return line_scroll(code);
    }
    bindings.action(View::List, code)
}

/// A view's plain keys, as `bindings` has them (`[keys.VIEW]` of `tui.toml`); no Ctrl key acts
/// in these views.
fn view_key(view: View, code: KeyCode, ctrl: bool, bindings: &Bindings) -> Option<Action> {
    if ctrl {
        return None;
    }
    bindings.action(view, code)
}

/// The list's plain keys as they are without a `tui.toml` (the help and `--print-config` list
/// the same).
pub fn default_list_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('?') => Action::ToggleHelp,
        // Cancelling a turn stops the agent's work, never the agent (s does that, after a
        // question).
        KeyCode::Esc => Action::Escape,
        KeyCode::Char('/') => Action::StartFilter,
        KeyCode::Char('t') => Action::ToggleThoughts,
        KeyCode::Char('w') => Action::NextNeedingYou,
        KeyCode::Char('W') => Action::ToggleNeedsYouOnly,
        KeyCode::Char('A') => Action::OpenApprovals,
        KeyCode::Char('P') => Action::OpenRules,
        KeyCode::Char('M') => Action::OpenOptions,
        KeyCode::Char('u') => Action::OpenQueue,
        KeyCode::Char('p') => Action::OpenDevices,
        KeyCode::Char('d') => Action::OpenChanges,
        KeyCode::Char('!') => Action::OpenShell,
        KeyCode::Up | KeyCode::Char('k') => Action::MoveUp,
        KeyCode::Down | KeyCode::Char('j') => Action::MoveDown,
        KeyCode::Enter => Action::OpenSelected,
        KeyCode::Char('i') | KeyCode::Tab => Action::FocusInput,
        KeyCode::Char('v') => Action::FocusTranscript,
        KeyCode::Char('c') => Action::CancelTurn,
        KeyCode::Char('r') => Action::Resume,
        KeyCode::Char('R') => Action::ResumeFresh,
        KeyCode::Char('s') => Action::Stop,
        KeyCode::Char('n') => Action::NewTask,
        KeyCode::Char('e') => Action::RenameTask,
        KeyCode::Char('a') => Action::ArchiveTask,
        KeyCode::Char('z') => Action::OpenArchived,
        KeyCode::Char('O') => Action::ShowPageAddress,
        KeyCode::Char('D') => Action::DeleteTask,
        KeyCode::Char('Y') => Action::CopyAnswer,
        KeyCode::Char('B') => Action::CopyCodeBlock,
        KeyCode::Char('E') => Action::ShowError,
        KeyCode::Char('m') => Action::ToggleMouse,
        KeyCode::Char('x') => Action::Export,
        KeyCode::Char('f') => Action::Search,
        KeyCode::Char('F') => Action::Fork,
        KeyCode::Char('H') => Action::HandOver,
        KeyCode::Char('Q') => Action::StopServer,
        KeyCode::Char('S') => Action::StartSession,
        KeyCode::Char('y') => Action::AllowPermission,
        KeyCode::Char('N') => Action::RejectPermission,
        KeyCode::Char(digit @ '1'..='9') => Action::ChooseOption(digit as usize - '1' as usize),
        KeyCode::PageUp => Action::ScrollUp,
        KeyCode::PageDown => Action::ScrollDown,
        KeyCode::Home | KeyCode::Char('g') => Action::ScrollTop,
        KeyCode::End | KeyCode::Char('G') => Action::ScrollBottom,
        _ => return None,
    })
}

/// In the prompt, an Alt-<char> that is not an Alt shortcut (none is, today) is what the
/// terminal sends for Esc quickly followed by <char>: returns <char> without Alt, to be handled
/// after leaving the prompt.
pub fn escape_then(mode: KeyMode, key: KeyEvent) -> Option<KeyEvent> {
    // Shift may come along: Esc then `Y` is Alt-Shift-Y.
    let alt_only = key.modifiers.difference(KeyModifiers::SHIFT) == KeyModifiers::ALT;
    match key.code {
        KeyCode::Char(_) if mode == KeyMode::Input && alt_only && key.kind != KeyEventKind::Release => {
            Some(KeyEvent::new_with_kind(key.code, key.modifiers.difference(KeyModifiers::ALT), key.kind))
        }
        _ => None,
    }
}

fn input_key(key: KeyEvent, ctrl: bool) -> Option<Action> {
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    Some(match key.code {
        KeyCode::Esc | KeyCode::Tab => Action::LeaveInput,
        // Alt-Enter breaks the line: plain Enter sends, and terminals cannot report Shift-Enter.
        KeyCode::Enter if alt => Action::Edit(EditOp::Insert('\n')),
        KeyCode::Enter => Action::Submit,
        // Raw mode turns flow control off, so Ctrl-S reaches the program.
        KeyCode::Char('s') if ctrl => Action::Steer,
        KeyCode::PageUp => Action::ScrollUp,
        KeyCode::PageDown => Action::ScrollDown,
        KeyCode::Up | KeyCode::Down if ctrl => line_scroll(key.code)?,
        KeyCode::Up => Action::PromptUp,
        KeyCode::Down => Action::PromptDown,
        KeyCode::Char('o') if ctrl => Action::FocusTranscript,
        KeyCode::Char('p') if ctrl => Action::HistoryPrev,
        KeyCode::Char('n') if ctrl => Action::HistoryNext,
        _ => Action::Edit(edit_op(key.code, ctrl)?),
    })
}

/// The focused transcript: moving and paging like a pager, `[`/`]` between entries, `{`/`}`
/// between tool calls, Enter expands a tool call; the other keys act as in the list.
fn transcript_key(code: KeyCode, ctrl: bool, bindings: &Bindings) -> Option<Action> {
    if ctrl {
        return match code {
            KeyCode::Char('o') => Some(Action::LeaveTranscript),
            _ => line_scroll(code),
        };
    }
    bindings.action(View::Transcript, code).or_else(|| list_key(code, false, bindings))
}

/// The focused transcript's own plain keys without a `tui.toml`; the others are the list's.
pub fn default_transcript_key(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('v') => Action::LeaveTranscript,
        KeyCode::Up | KeyCode::Char('k') => Action::ScrollLineUp,
        KeyCode::Down | KeyCode::Char('j') => Action::ScrollLineDown,
        KeyCode::PageUp | KeyCode::Char('b') => Action::ScrollUp,
        KeyCode::PageDown | KeyCode::Char(' ') => Action::ScrollDown,
        KeyCode::Char('[') => Action::PrevEntry,
        KeyCode::Char(']') => Action::NextEntry,
        KeyCode::Char('{') => Action::PrevToolCall,
        KeyCode::Char('}') => Action::NextToolCall,
        KeyCode::Enter => Action::ToggleExpand,
        _ => return None,
    })
}

/// Typing a filter: text edits it, Enter keeps it, Esc clears it; the cursor still moves.
fn filter_key(key: KeyEvent, ctrl: bool) -> Option<Action> {
    Some(match key.code {
        KeyCode::Esc => Action::ClearFilter,
        KeyCode::Enter | KeyCode::Tab => Action::KeepFilter,
        KeyCode::Up => Action::MoveUp,
        KeyCode::Down => Action::MoveDown,
        _ => Action::Edit(edit_op(key.code, ctrl)?),
    })
}

/// The search view: the query takes text; ↑/↓ (Ctrl-P/N) choose a hit, PgDn pages on, Enter
/// opens the hit, Esc closes.
fn search_key(key: KeyEvent, ctrl: bool) -> Option<Action> {
    Some(match key.code {
        KeyCode::Esc => Action::CloseOverlay,
        KeyCode::Enter => Action::Submit,
        KeyCode::Up => Action::MoveUp,
        KeyCode::Down => Action::MoveDown,
        KeyCode::Char('p') if ctrl => Action::MoveUp,
        KeyCode::Char('n') if ctrl => Action::MoveDown,
        KeyCode::PageUp => Action::ScrollUp,
        KeyCode::PageDown => Action::ScrollDown,
        _ => Action::Edit(edit_op(key.code, ctrl)?),
    })
}

/// The export form: the path takes text; Tab switches Markdown / JSON Lines, Ctrl-T the
/// thoughts; Enter writes, Esc cancels.
fn export_key(key: KeyEvent, ctrl: bool) -> Option<Action> {
    Some(match key.code {
        KeyCode::Esc => Action::CloseOverlay,
        KeyCode::Enter => Action::Submit,
        KeyCode::Tab | KeyCode::BackTab => Action::ToggleExportFormat,
        KeyCode::Char('t') if ctrl => Action::ToggleExportThoughts,
        _ => Action::Edit(edit_op(key.code, ctrl)?),
    })
}

/// Ctrl-Up/Ctrl-Down scroll the transcript by a line, from the list and from the prompt (plain
/// Up/Down move in the list there).
fn line_scroll(code: KeyCode) -> Option<Action> {
    match code {
        KeyCode::Up => Some(Action::ScrollLineUp),
        KeyCode::Down => Some(Action::ScrollLineDown),
        _ => None,
    }
}

fn form_key(key: KeyEvent, ctrl: bool) -> Option<Action> {
    Some(match key.code {
        KeyCode::Esc => Action::CloseOverlay,
        KeyCode::Enter => Action::Submit,
        KeyCode::Tab | KeyCode::Down => Action::NextField,
        KeyCode::BackTab | KeyCode::Up => Action::PrevField,
        _ => Action::Edit(edit_op(key.code, ctrl)?),
    })
}

fn edit_op(code: KeyCode, ctrl: bool) -> Option<EditOp> {
    if ctrl {
        return match code {
            KeyCode::Char('u') => Some(EditOp::Clear),
            KeyCode::Char('a') => Some(EditOp::Home),
            KeyCode::Char('e') => Some(EditOp::End),
            _ => None,
        };
    }
    Some(match code {
        KeyCode::Char(c) => EditOp::Insert(c),
        KeyCode::Backspace => EditOp::Backspace,
        KeyCode::Delete => EditOp::Delete,
        KeyCode::Left => EditOp::Left,
        KeyCode::Right => EditOp::Right,
        KeyCode::Home => EditOp::Home,
        KeyCode::End => EditOp::End,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    #[test]
    fn list_keys_navigate_and_act_on_sessions() {
        let list = |code| map_key(KeyMode::List, key(code));
        assert_eq!(list(KeyCode::Char('j')), Some(Action::MoveDown));
        assert_eq!(list(KeyCode::Down), Some(Action::MoveDown));
        assert_eq!(list(KeyCode::Char('k')), Some(Action::MoveUp));
        assert_eq!(list(KeyCode::Enter), Some(Action::OpenSelected));
        assert_eq!(list(KeyCode::Char('r')), Some(Action::Resume));
        assert_eq!(list(KeyCode::Char('R')), Some(Action::ResumeFresh));
        assert_eq!(list(KeyCode::Char('c')), Some(Action::CancelTurn));
        assert_eq!(list(KeyCode::Char('s')), Some(Action::Stop));
        assert_eq!(list(KeyCode::Char('n')), Some(Action::NewTask));
        assert_eq!(list(KeyCode::Char('S')), Some(Action::StartSession));
        assert_eq!(list(KeyCode::Esc), Some(Action::Escape));
        assert_eq!(list(KeyCode::Char('/')), Some(Action::StartFilter));
        assert_eq!(list(KeyCode::Char('t')), Some(Action::ToggleThoughts));
        assert_eq!(list(KeyCode::Char('i')), Some(Action::FocusInput));
        assert_eq!(list(KeyCode::Tab), Some(Action::FocusInput));
        assert_eq!(list(KeyCode::PageUp), Some(Action::ScrollUp));
        assert_eq!(list(KeyCode::Char('q')), Some(Action::Quit));
        assert_eq!(list(KeyCode::Char('?')), Some(Action::ToggleHelp));
    }

    #[test]
    fn permission_keys_allow_reject_or_pick_by_number() {
        let list = |code| map_key(KeyMode::List, key(code));
        assert_eq!(list(KeyCode::Char('y')), Some(Action::AllowPermission));
        assert_eq!(list(KeyCode::Char('N')), Some(Action::RejectPermission));
        assert_eq!(list(KeyCode::Char('1')), Some(Action::ChooseOption(0)));
        assert_eq!(list(KeyCode::Char('9')), Some(Action::ChooseOption(8)));
        assert_eq!(list(KeyCode::Char('0')), None);
    }

    #[test]
    fn while_a_permission_request_waits_n_still_opens_a_new_task_and_capital_n_rejects() {
        let asking = |code| map_key(KeyMode::Permission, key(code));
        assert_eq!(asking(KeyCode::Char('y')), Some(Action::AllowPermission));
        assert_eq!(asking(KeyCode::Char('n')), Some(Action::NewTask));
        assert_eq!(map_key(KeyMode::Transcript, key(KeyCode::Char('n'))), Some(Action::NewTask));
        assert_eq!(map_key(KeyMode::Approvals, key(KeyCode::Char('n'))), None);
        assert_eq!(asking(KeyCode::Char('N')), Some(Action::RejectPermission));
        assert_eq!(asking(KeyCode::Char('2')), Some(Action::ChooseOption(1)));
        // The other list keys work as in the list.
        assert_eq!(asking(KeyCode::Char('j')), Some(Action::MoveDown));
        assert_eq!(asking(KeyCode::Enter), Some(Action::OpenSelected));
        assert_eq!(map_key(KeyMode::List, key(KeyCode::Char('n'))), Some(Action::NewTask));
    }

    #[test]
    fn the_transcript_takes_the_focus_from_the_list_and_the_prompt() {
        assert_eq!(map_key(KeyMode::List, key(KeyCode::Char('v'))), Some(Action::FocusTranscript));
        assert_eq!(map_key(KeyMode::Input, ctrl('o')), Some(Action::FocusTranscript));
        assert_eq!(map_key(KeyMode::Input, key(KeyCode::Char('v'))), Some(Action::Edit(EditOp::Insert('v'))));
        for back in [key(KeyCode::Esc), key(KeyCode::Char('v')), ctrl('o')] {
            assert_eq!(map_key(KeyMode::Transcript, back), Some(Action::LeaveTranscript), "{back:?}");
        }
    }

    #[test]
    fn the_focused_transcript_scrolls_jumps_and_expands() {
        let focused = |code| map_key(KeyMode::Transcript, key(code));
        assert_eq!(focused(KeyCode::Char('j')), Some(Action::ScrollLineDown));
        assert_eq!(focused(KeyCode::Up), Some(Action::ScrollLineUp));
        assert_eq!(focused(KeyCode::PageUp), Some(Action::ScrollUp));
        assert_eq!(focused(KeyCode::Char(' ')), Some(Action::ScrollDown));
        assert_eq!(focused(KeyCode::Char('b')), Some(Action::ScrollUp));
        assert_eq!(focused(KeyCode::Char('G')), Some(Action::ScrollBottom));
        assert_eq!(focused(KeyCode::Char('[')), Some(Action::PrevEntry));
        assert_eq!(focused(KeyCode::Char(']')), Some(Action::NextEntry));
        assert_eq!(focused(KeyCode::Char('{')), Some(Action::PrevToolCall));
        assert_eq!(focused(KeyCode::Char('}')), Some(Action::NextToolCall));
        assert_eq!(focused(KeyCode::Enter), Some(Action::ToggleExpand));
        // The permission keys answer from here too; n is the new task everywhere.
        assert_eq!(focused(KeyCode::Char('y')), Some(Action::AllowPermission));
        assert_eq!(focused(KeyCode::Char('n')), Some(Action::NewTask));
        assert_eq!(focused(KeyCode::Char('N')), Some(Action::RejectPermission));
        assert_eq!(focused(KeyCode::Char('3')), Some(Action::ChooseOption(2)));
        assert_eq!(focused(KeyCode::Char('q')), Some(Action::Quit));
        assert_eq!(focused(KeyCode::Char('?')), Some(Action::ToggleHelp));
    }

    #[test]
    fn the_help_scrolls() {
        let help = |code| map_key(KeyMode::Help, key(code));
        assert_eq!(help(KeyCode::Down), Some(Action::ScrollLineDown));
        assert_eq!(help(KeyCode::Char('k')), Some(Action::ScrollLineUp));
        assert_eq!(help(KeyCode::PageDown), Some(Action::ScrollDown));
    }

    #[test]
    fn e_shows_the_last_error_in_a_popup_that_scrolls_and_closes() {
        assert_eq!(map_key(KeyMode::List, key(KeyCode::Char('E'))), Some(Action::ShowError));
        assert_eq!(map_key(KeyMode::Transcript, key(KeyCode::Char('E'))), Some(Action::ShowError));
        let popup = |code| map_key(KeyMode::ErrorDetails, key(code));
        assert_eq!(popup(KeyCode::Char('j')), Some(Action::ScrollLineDown));
        assert_eq!(popup(KeyCode::Char('k')), Some(Action::ScrollLineUp));
        assert_eq!(popup(KeyCode::PageDown), Some(Action::ScrollDown));
        assert_eq!(popup(KeyCode::PageUp), Some(Action::ScrollUp));
        for close in [KeyCode::Esc, KeyCode::Char('q'), KeyCode::Char('E')] {
            assert_eq!(popup(close), Some(Action::CloseOverlay), "{close:?}");
        }
    }

    #[test]
    fn m_turns_the_mouse_on_and_off_from_the_list_and_the_transcript() {
        assert_eq!(map_key(KeyMode::List, key(KeyCode::Char('m'))), Some(Action::ToggleMouse));
        assert_eq!(map_key(KeyMode::Transcript, key(KeyCode::Char('m'))), Some(Action::ToggleMouse));
        assert_eq!(map_key(KeyMode::Input, key(KeyCode::Char('m'))), Some(Action::Edit(EditOp::Insert('m'))));
    }

    #[test]
    fn typing_in_the_input_edits_instead_of_acting() {
        let input = |code| map_key(KeyMode::Input, key(code));
        assert_eq!(input(KeyCode::Char('q')), Some(Action::Edit(EditOp::Insert('q'))));
        assert_eq!(input(KeyCode::Char('r')), Some(Action::Edit(EditOp::Insert('r'))));
        assert_eq!(input(KeyCode::Enter), Some(Action::Submit));
        assert_eq!(input(KeyCode::Esc), Some(Action::LeaveInput));
        assert_eq!(input(KeyCode::Backspace), Some(Action::Edit(EditOp::Backspace)));
        assert_eq!(map_key(KeyMode::Input, ctrl('u')), Some(Action::Edit(EditOp::Clear)));
        let alt_enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT);
        assert_eq!(map_key(KeyMode::Input, alt_enter), Some(Action::Edit(EditOp::Insert('\n'))));
    }

    #[test]
    fn up_down_and_ctrl_p_n_walk_the_prompt_history() {
        let input = |key| map_key(KeyMode::Input, key);
        assert_eq!(input(key(KeyCode::Up)), Some(Action::PromptUp));
        assert_eq!(input(key(KeyCode::Down)), Some(Action::PromptDown));
        assert_eq!(input(ctrl('p')), Some(Action::HistoryPrev));
        assert_eq!(input(ctrl('n')), Some(Action::HistoryNext));
    }

    #[test]
    fn the_filter_takes_text_until_enter_or_esc() {
        let filter = |code| map_key(KeyMode::Filter, key(code));
        assert_eq!(filter(KeyCode::Char('q')), Some(Action::Edit(EditOp::Insert('q'))));
        assert_eq!(filter(KeyCode::Char('/')), Some(Action::Edit(EditOp::Insert('/'))));
        assert_eq!(filter(KeyCode::Backspace), Some(Action::Edit(EditOp::Backspace)));
        assert_eq!(filter(KeyCode::Enter), Some(Action::KeepFilter));
        assert_eq!(filter(KeyCode::Esc), Some(Action::ClearFilter));
        assert_eq!(filter(KeyCode::Down), Some(Action::MoveDown));
    }

    #[test]
    fn ctrl_up_and_down_scroll_by_a_line_from_the_list_and_the_prompt() {
        let ctrl_key = |code| KeyEvent::new(code, KeyModifiers::CONTROL);
        for mode in [KeyMode::List, KeyMode::Input] {
            assert_eq!(map_key(mode, ctrl_key(KeyCode::Up)), Some(Action::ScrollLineUp), "{mode:?}");
            assert_eq!(map_key(mode, ctrl_key(KeyCode::Down)), Some(Action::ScrollLineDown), "{mode:?}");
        }
        assert_eq!(map_key(KeyMode::List, key(KeyCode::Up)), Some(Action::MoveUp));
    }

    #[test]
    fn ctrl_c_interrupts_from_every_mode() {
        for mode in [
            KeyMode::List,
            KeyMode::Permission,
            KeyMode::Input,
            KeyMode::Transcript,
            KeyMode::Filter,
            KeyMode::Help,
            KeyMode::ErrorDetails,
            KeyMode::Confirm,
            KeyMode::Form,
            KeyMode::Approvals,
            KeyMode::Rules,
            KeyMode::Options,
            KeyMode::Queue,
            KeyMode::Devices,
            KeyMode::Search,
            KeyMode::Export,
        ] {
            assert_eq!(map_key(mode, ctrl('c')), Some(Action::Interrupt), "{mode:?}");
        }
    }

    #[test]
    fn alt_char_in_the_prompt_is_escape_then_the_char() {
        let alt = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::ALT);
        assert_eq!(escape_then(KeyMode::Input, alt('y')), Some(key(KeyCode::Char('y'))));
        // Esc then an upper-case key arrives as Alt-Shift-<key>.
        let alt_shift_y = KeyEvent::new(KeyCode::Char('Y'), KeyModifiers::ALT | KeyModifiers::SHIFT);
        assert_eq!(
            escape_then(KeyMode::Input, alt_shift_y),
            Some(KeyEvent::new(KeyCode::Char('Y'), KeyModifiers::SHIFT))
        );
        // Elsewhere, and for Alt-Enter (a new line), Alt keeps its meaning.
        assert_eq!(escape_then(KeyMode::List, alt('y')), None);
        assert_eq!(escape_then(KeyMode::Form, alt('y')), None);
        assert_eq!(escape_then(KeyMode::Input, KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT)), None);
        assert_eq!(escape_then(KeyMode::Input, ctrl('y')), None);
    }

    #[test]
    fn overlays_close_with_escape_and_confirm_with_y() {
        assert_eq!(map_key(KeyMode::Help, key(KeyCode::Esc)), Some(Action::CloseOverlay));
        assert_eq!(map_key(KeyMode::Help, key(KeyCode::Char('q'))), Some(Action::CloseOverlay));
        assert_eq!(map_key(KeyMode::Confirm, key(KeyCode::Char('y'))), Some(Action::Confirm));
        assert_eq!(map_key(KeyMode::Confirm, key(KeyCode::Char('n'))), Some(Action::CloseOverlay));
        assert_eq!(map_key(KeyMode::Form, key(KeyCode::Tab)), Some(Action::NextField));
        assert_eq!(map_key(KeyMode::Form, key(KeyCode::Enter)), Some(Action::Submit));
    }

    #[test]
    fn x_exports_f_searches_and_shift_f_forks() {
        let list = |code| map_key(KeyMode::List, key(code));
        assert_eq!(list(KeyCode::Char('x')), Some(Action::Export));
        assert_eq!(list(KeyCode::Char('f')), Some(Action::Search));
        assert_eq!(list(KeyCode::Char('F')), Some(Action::Fork));
        assert_eq!(map_key(KeyMode::Transcript, key(KeyCode::Char('x'))), Some(Action::Export));
        let search = |code| map_key(KeyMode::Search, key(code));
        assert_eq!(search(KeyCode::Char('q')), Some(Action::Edit(EditOp::Insert('q'))));
        assert_eq!(search(KeyCode::Down), Some(Action::MoveDown));
        assert_eq!(search(KeyCode::Enter), Some(Action::Submit));
        assert_eq!(search(KeyCode::Esc), Some(Action::CloseOverlay));
        let export = |key| map_key(KeyMode::Export, key);
        assert_eq!(export(key(KeyCode::Tab)), Some(Action::ToggleExportFormat));
        assert_eq!(export(ctrl('t')), Some(Action::ToggleExportThoughts));
        assert_eq!(export(key(KeyCode::Char('x'))), Some(Action::Edit(EditOp::Insert('x'))));
    }

    #[test]
    fn key_releases_are_ignored() {
        let mut release = key(KeyCode::Char('q'));
        release.kind = KeyEventKind::Release;
        assert_eq!(map_key(KeyMode::List, release), None);
    }
}
