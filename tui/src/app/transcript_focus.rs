//! The transcript with the focus: read like a pager (line, page, top, bottom), step from entry
//! to entry or tool call to tool call, and expand a tool call to see its input and output.
//!
//! The app keeps which entry is selected (by seq, which stays put while older pages are put in
//! front) and asks the next frame to scroll it into view; the view, which knows the rows, does
//! that and reports the entry it marked (see [`FrameMetrics::transcript_selected`]). A selection
//! scrolled out of view follows to the nearest entry on screen, as a pager's cursor does.

use std::collections::HashSet;

use super::{App, Focus, FrameMetrics};
use crate::transcript::EntryBody;

#[derive(Debug, Default)]
pub(crate) struct Reading {
    /// Where leaving the transcript hands the focus back to (the list or the prompt).
    back_to_input: bool,
    /// The selected entry's seq; `None` before a frame chose one (the newest on screen).
    pub(crate) selected: Option<u64>,
    /// The next frame scrolls the selected entry into view.
    pub(crate) reveal: bool,
    /// ... starting from its first row on this row of the view (where it was).
    pub(crate) pin_row: Option<usize>,
    /// Where the last frame showed the selected entry's first row.
    selected_row: Option<usize>,
    /// Tool calls shown with their input and output: (session, seq of the call).
    expanded: HashSet<(String, u64)>,
    /// Changes with every expand and collapse: a kept layout lays tool calls out again.
    pub(crate) expand_generation: u64,
}

impl Reading {
    /// Takes what the frame marked selected, once a focused transcript was drawn.
    pub(super) fn frame_drawn(&mut self, metrics: &FrameMetrics) {
        if metrics.anchor.is_some() {
            self.reveal = false;
            self.pin_row = None;
        }
        self.selected_row = metrics.transcript_selected_row;
        if let Some(seq) = metrics.transcript_selected {
            self.selected = Some(seq);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Back,
    Forward,
}

impl App {
    pub(super) fn focus_transcript(&mut self) {
        self.show_key_target();
        if self.opened.is_none() {
            self.flash("open a session (Enter) to read its transcript", true);
            return;
        }
        self.reading.back_to_input = self.focus == Focus::Input;
        self.focus = Focus::Transcript;
        // The selection is found again on screen by the next frame.
        self.reading.reveal = false;
    }

    pub(super) fn leave_transcript(&mut self) {
        self.focus = if self.reading.back_to_input { Focus::Input } else { Focus::List };
    }

    /// A session was opened: nothing of the previous one stays selected.
    pub(super) fn reset_reading(&mut self) {
        self.reading.selected = None;
        self.reading.reveal = false;
    }

    /// Selects the entry before or after the selected one (only tool calls when `tool_calls`),
    /// and has it scrolled into view. Past the first entry, the older page is asked for; past
    /// the last, the view follows new output again.
    pub(super) fn step_entry(&mut self, step: Step, tool_calls: bool) {
        let Some(transcript) = self.opened_transcript() else {
            return;
        };
        let entries = transcript.entries();
        // No selection yet: stepping back starts from the end.
        let at = match self.reading.selected {
            Some(seq) => entries.partition_point(|entry| entry.seq < seq),
            None => entries.len(),
        };
        let wanted = |index: &usize| !tool_calls || matches!(entries[*index].body, EntryBody::ToolCall(_));
        let found = match step {
            Step::Back => (0..at).rev().find(wanted),
            Step::Forward => (at + 1..entries.len()).find(wanted),
        };
        match found {
            Some(index) => {
                self.reading.selected = Some(entries[index].seq);
                self.reading.reveal = true;
                self.reading.pin_row = None;
            }
            None if step == Step::Back => {
                if tool_calls {
                    self.flash("no tool call above this one", false);
                }
                self.load_older_messages();
            }
            None => {
                if tool_calls {
                    self.flash("no tool call below this one", false);
                }
                self.scroll = 0;
            }
        }
    }

    /// Enter on the selected entry: a tool call is expanded to its input and output, or
    /// collapsed again.
    pub(super) fn toggle_expand(&mut self) {
        let Some(session_id) = self.opened.clone() else {
            return;
        };
        let selected = self.reading.selected.and_then(|seq| {
            let transcript = self.opened_transcript()?;
            let entries = transcript.entries();
            entries.get(entries.partition_point(|entry| entry.seq < seq)).filter(|entry| entry.seq == seq)
        });
        let Some(entry) = selected.filter(|entry| matches!(entry.body, EntryBody::ToolCall(_))) else {
            self.flash("Enter expands a tool call: select one with { and } (or [ and ])", false);
            return;
        };
        let key = (session_id, entry.seq);
        if !self.reading.expanded.remove(&key) {
            self.reading.expanded.insert(key);
        }
        self.reading.expand_generation += 1;
        self.reading.reveal = true;
        self.reading.pin_row = self.reading.selected_row;
    }

    /// The tool call at `seq` of the session is shown with its input and output.
    pub fn is_expanded(&self, session_id: &str, seq: u64) -> bool {
        // Looked up by frames for every tool call: no allocation for the key.
        self.reading.expanded.iter().any(|(session, at)| *at == seq && session == session_id)
    }

    /// The entry the focused transcript has selected (its seq).
    pub fn selected_entry(&self) -> Option<u64> {
        self.reading.selected
    }
}
