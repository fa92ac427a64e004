//! The prompts sent from this TUI, for Up/Down (on the first or last line) and Ctrl-P/Ctrl-N in
//! the prompt, as in a shell: walking up from the prompt being written keeps it, and walking
//! back down past the newest entry brings it back.

/// Entries kept at most; the oldest go first.
const MAX_ENTRIES: usize = 500;

#[derive(Debug, Clone, Default)]
pub(crate) struct PromptHistory {
    entries: Vec<String>,
    /// The entry shown in the prompt, while walking the history.
    at: Option<usize>,
    /// What was in the prompt when the walk started.
    draft: Option<String>,
}

impl PromptHistory {
    /// Records a prompt sent, unless it repeats the newest entry, and ends any walk.
    pub fn record(&mut self, prompt: &str) {
        self.reset();
        if prompt.trim().is_empty() || self.entries.last().is_some_and(|last| last == prompt) {
            return;
        }
        self.entries.push(prompt.to_string());
        if self.entries.len() > MAX_ENTRIES {
            self.entries.remove(0);
        }
    }

    /// Ends the walk (the prompt was sent, or another session opened).
    pub fn reset(&mut self) {
        self.at = None;
        self.draft = None;
    }

    /// The entry before the one shown (`current` is what the prompt holds now); `None` at the
    /// oldest.
    pub fn older(&mut self, current: &str) -> Option<String> {
        let next = match self.at {
            None => self.entries.len().checked_sub(1)?,
            Some(at) => at.checked_sub(1)?,
        };
        if self.at.is_none() {
            self.draft = Some(current.to_string());
        }
        self.at = Some(next);
        Some(self.entries[next].clone())
    }

    /// The entry after the one shown, or past the newest, the prompt written before the walk;
    /// `None` when not walking.
    pub fn newer(&mut self) -> Option<String> {
        let at = self.at?;
        if at + 1 < self.entries.len() {
            self.at = Some(at + 1);
            return Some(self.entries[at + 1].clone());
        }
        self.at = None;
        Some(self.draft.take().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_back_and_returns_to_the_draft() {
        let mut history = PromptHistory::default();
        history.record("first");
        history.record("second");
        history.record("second");
        assert_eq!(history.older("draft").as_deref(), Some("second"));
        assert_eq!(history.older("second").as_deref(), Some("first"));
        assert_eq!(history.older("first"), None, "nothing older");
        assert_eq!(history.newer().as_deref(), Some("second"));
        assert_eq!(history.newer().as_deref(), Some("draft"));
        assert_eq!(history.newer(), None, "not walking any more");
    }

    #[test]
    fn keeps_a_bounded_number_of_entries() {
        let mut history = PromptHistory::default();
        for i in 0..MAX_ENTRIES + 10 {
            history.record(&format!("p{i}"));
        }
        let mut oldest = None;
        while let Some(entry) = history.older("") {
            oldest = Some(entry);
        }
        assert_eq!(oldest.as_deref(), Some("p10"));
    }
}
