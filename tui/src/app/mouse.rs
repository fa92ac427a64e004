//! The mouse, when the user turns it on (`--mouse`, or `m`): off by default, so that a
//! terminal over SSH keeps its own text selection. The wheel scrolls the pane under the
//! pointer (the help or the error popup when one is open), a left click on a session opens it,
//! a click in the transcript gives it the focus, one in the prompt starts writing.
//!
//! Where the pointer is comes from the rectangles the last frame drew ([`Panes`]), through a
//! pure function, [`hit_test`]: the app never guesses a layout of its own.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};

use super::{App, Focus};
use crate::action::Action;
use crate::command::Command;

/// Lines the transcript moves per notch of the wheel (what most terminals' pagers do).
const WHEEL_LINES: usize = 3;

/// What the last frame drew where, for the mouse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Panes {
    /// The session list, borders included (`None`: not drawn, on a narrow screen).
    pub list: Option<Rect>,
    /// The session on each row inside the list's borders, from its first row (`None`: a task's
    /// title).
    pub list_rows: Vec<Option<String>>,
    /// The transcript with the boxes under it, borders included.
    pub transcript: Option<Rect>,
    pub prompt: Option<Rect>,
}

/// What is under the pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hit {
    /// A session's row in the list.
    Session(String),
    /// The list, elsewhere than on a session.
    List,
    Transcript,
    Prompt,
    Nothing,
}

/// What is at `column`, `row` of the screen the panes were drawn on.
pub fn hit_test(panes: &Panes, column: u16, row: u16) -> Hit {
    let at = Position { x: column, y: row };
    if let Some(list) = panes.list.filter(|list| list.contains(at)) {
        let inside = column > list.x && column + 1 < list.right() && row > list.y;
        let session = inside.then(|| panes.list_rows.get(usize::from(row - list.y - 1))).flatten().cloned().flatten();
        return session.map_or(Hit::List, Hit::Session);
    }
    if panes.transcript.is_some_and(|pane| pane.contains(at)) {
        return Hit::Transcript;
    }
    if panes.prompt.is_some_and(|pane| pane.contains(at)) {
        return Hit::Prompt;
    }
    Hit::Nothing
}

impl App {
    /// `--mouse`: the mouse is on from the start.
    pub fn set_mouse(&mut self, on: bool) {
        self.mouse = on;
        self.commands.push(Command::Mouse(on));
    }

    pub fn mouse_enabled(&self) -> bool {
        self.mouse
    }

    /// `m`: turns the mouse on or off, and says how to get back.
    pub(super) fn toggle_mouse(&mut self) {
        self.set_mouse(!self.mouse);
        let said = if self.mouse {
            "mouse on: wheel scrolls, click opens (m: off, to select text)"
        } else {
            "mouse off: the terminal selects text (m: on)"
        };
        self.flash(said, false);
    }

    /// A mouse event from the terminal; ignored while the mouse is off (a terminal may still
    /// send one, and the user asked for a terminal that does not react to it).
    pub fn handle_mouse(&mut self, event: MouseEvent) {
        if !self.mouse {
            return;
        }
        let hit = hit_test(&self.metrics.panes, event.column, event.row);
        match event.kind {
            MouseEventKind::ScrollUp => self.wheel(hit, true),
            MouseEventKind::ScrollDown => self.wheel(hit, false),
            MouseEventKind::Down(MouseButton::Left) => self.click(hit),
            // Moves and drags come by the hundred: they change nothing, and draw nothing.
            _ => return,
        }
        self.dirty = true;
    }

    fn wheel(&mut self, hit: Hit, up: bool) {
        if self.overlay_scroll().is_some() {
            // The help and the error popup cover the screen: the wheel scrolls them.
            let action = if up { Action::ScrollLineUp } else { Action::ScrollLineDown };
            for _ in 0..WHEEL_LINES {
                self.handle_action(action.clone());
            }
            return;
        }
        if self.overlay.is_some() {
            return;
        }
        match hit {
            Hit::Session(_) | Hit::List => self.handle_action(if up { Action::MoveUp } else { Action::MoveDown }),
            Hit::Transcript if up => self.scroll_up(WHEEL_LINES),
            Hit::Transcript => self.scroll = self.scroll.saturating_sub(WHEEL_LINES),
            Hit::Prompt | Hit::Nothing => {}
        }
    }

    fn click(&mut self, hit: Hit) {
        if self.overlay.is_some() {
            // A box asks for keys (a question, a form): a click elsewhere must not act behind it.
            return;
        }
        match hit {
            Hit::Session(session_id) => {
                // As moving to it and pressing Enter would.
                self.leave_for_list();
                self.sessions.set_cursor(&session_id);
                self.handle_action(Action::OpenSelected);
            }
            Hit::List => self.leave_for_list(),
            Hit::Transcript if self.focus != Focus::Transcript => self.handle_action(Action::FocusTranscript),
            Hit::Prompt => self.focus = Focus::Input,
            Hit::Transcript | Hit::Nothing => {}
        }
    }

    /// The list takes the focus; a filter being typed is kept.
    fn leave_for_list(&mut self) {
        match self.focus {
            Focus::Filter => self.handle_action(Action::KeepFilter),
            Focus::Input | Focus::Transcript => self.focus = Focus::List,
            Focus::List => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of 30 columns and 10 rows at the left (a task's title, then two sessions), the
    /// transcript right of it, the prompt under both.
    fn panes() -> Panes {
        Panes {
            list: Some(Rect::new(0, 0, 30, 10)),
            list_rows: vec![None, Some("s-1".into()), Some("s-2".into())],
            transcript: Some(Rect::new(30, 0, 70, 10)),
            prompt: Some(Rect::new(0, 10, 100, 3)),
        }
    }

    #[test]
    fn a_session_row_is_hit_inside_the_list_borders() {
        let panes = panes();
        // Rows start under the top border.
        assert_eq!(hit_test(&panes, 5, 2), Hit::Session("s-1".into()));
        assert_eq!(hit_test(&panes, 28, 3), Hit::Session("s-2".into()));
        // A task's title, a row past the last session, the borders: the list, no session.
        assert_eq!(hit_test(&panes, 5, 1), Hit::List);
        assert_eq!(hit_test(&panes, 5, 4), Hit::List);
        assert_eq!(hit_test(&panes, 5, 0), Hit::List);
        assert_eq!(hit_test(&panes, 0, 2), Hit::List);
        assert_eq!(hit_test(&panes, 29, 2), Hit::List);
    }

    #[test]
    fn the_transcript_and_the_prompt_are_hit_where_they_were_drawn() {
        let panes = panes();
        assert_eq!(hit_test(&panes, 30, 2), Hit::Transcript);
        assert_eq!(hit_test(&panes, 99, 9), Hit::Transcript);
        assert_eq!(hit_test(&panes, 50, 11), Hit::Prompt);
        // Under the prompt: the status line.
        assert_eq!(hit_test(&panes, 50, 13), Hit::Nothing);
    }

    #[test]
    fn a_pane_not_drawn_is_never_hit() {
        // A narrow screen showing the session alone: no list.
        let panes = Panes { list: None, list_rows: vec![], transcript: Some(Rect::new(0, 0, 60, 15)), ..panes() };
        assert_eq!(hit_test(&panes, 5, 2), Hit::Transcript);
        let panes = Panes { transcript: None, ..Panes::default() };
        assert_eq!(hit_test(&panes, 5, 2), Hit::Nothing);
    }
}
