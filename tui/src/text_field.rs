//! An editable line of text with a cursor: the prompt input and the fields of the new-task form.

use unicode_width::UnicodeWidthStr;

use crate::action::EditOp;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextField {
    text: String,
    /// Byte offset into `text`, always on a character boundary.
    cursor: usize,
}

impl TextField {
    pub fn with_text(text: impl Into<String>) -> Self {
        let text = text.into();
        let cursor = text.len();
        TextField { text, cursor }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }

    /// Empties the field and returns what it held.
    pub fn take(&mut self) -> String {
        self.cursor = 0;
        std::mem::take(&mut self.text)
    }

    pub fn apply(&mut self, op: &EditOp) {
        match op {
            EditOp::Insert(c) => {
                self.text.insert(self.cursor, *c);
                self.cursor += c.len_utf8();
            }
            EditOp::InsertText(pasted) => {
                // Pasted line endings arrive as CR from some terminals.
                let pasted = pasted.replace("\r\n", "\n").replace('\r', "\n");
                self.text.insert_str(self.cursor, &pasted);
                self.cursor += pasted.len();
            }
            EditOp::Backspace => {
                if let Some(prev) = self.prev_boundary() {
                    self.text.replace_range(prev..self.cursor, "");
                    self.cursor = prev;
                }
            }
            EditOp::Delete => {
                if let Some(next) = self.next_boundary() {
                    self.text.replace_range(self.cursor..next, "");
                }
            }
            EditOp::Left => self.cursor = self.prev_boundary().unwrap_or(self.cursor),
            EditOp::Right => self.cursor = self.next_boundary().unwrap_or(self.cursor),
            EditOp::Home => self.cursor = self.line_start(),
            EditOp::End => self.cursor = self.line_end(),
            EditOp::Up => {
                if let Some(end) = self.text[..self.line_start()].strip_suffix('\n').map(str::len) {
                    let start = self.text[..end].rfind('\n').map_or(0, |i| i + 1);
                    self.cursor = self.at_column(start, end);
                }
            }
            EditOp::Down => {
                let end = self.line_end();
                if end < self.text.len() {
                    let start = end + 1;
                    let next_end = self.text[start..].find('\n').map_or(self.text.len(), |i| start + i);
                    self.cursor = self.at_column(start, next_end);
                }
            }
            EditOp::Clear => {
                self.text.clear();
                self.cursor = 0;
            }
        }
    }

    /// Row and display column of the cursor, counting lines split on '\n'.
    pub fn cursor_position(&self) -> (usize, usize) {
        let before = &self.text[..self.cursor];
        let row = before.matches('\n').count();
        let line = before.rsplit('\n').next().unwrap_or_default();
        (row, line.width())
    }

    /// The cursor is on the first line (Up goes to the previous prompt from there).
    pub fn on_first_line(&self) -> bool {
        !self.text[..self.cursor].contains('\n')
    }

    /// The cursor is on the last line.
    pub fn on_last_line(&self) -> bool {
        !self.text[self.cursor..].contains('\n')
    }

    /// The byte offset in the line `start..end` at the cursor's display column, or the line's
    /// end when it is shorter.
    fn at_column(&self, start: usize, end: usize) -> usize {
        let (_, column) = self.cursor_position();
        let mut used = 0;
        for (i, c) in self.text[start..end].char_indices() {
            let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if used + w > column {
                return start + i;
            }
            used += w;
        }
        end
    }

    fn prev_boundary(&self) -> Option<usize> {
        self.text[..self.cursor].char_indices().next_back().map(|(i, _)| i)
    }

    fn next_boundary(&self) -> Option<usize> {
        self.text[self.cursor..].chars().next().map(|c| self.cursor + c.len_utf8())
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1)
    }

    fn line_end(&self) -> usize {
        self.text[self.cursor..].find('\n').map_or(self.text.len(), |i| self.cursor + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str) -> TextField {
        let mut field = TextField::default();
        for c in text.chars() {
            field.apply(&EditOp::Insert(c));
        }
        field
    }

    #[test]
    fn inserts_at_the_cursor_and_deletes_whole_characters() {
        let mut field = typed("héllo");
        field.apply(&EditOp::Left);
        field.apply(&EditOp::Left);
        field.apply(&EditOp::Left);
        field.apply(&EditOp::Backspace);
        assert_eq!(field.text(), "hllo");
        field.apply(&EditOp::Insert('é'));
        field.apply(&EditOp::Delete);
        assert_eq!(field.text(), "hélo");
        assert_eq!(field.cursor_position(), (0, 2));
    }

    #[test]
    fn home_and_end_stay_on_the_current_line() {
        let mut field = typed("first");
        field.apply(&EditOp::InsertText("\r\nsecond".into()));
        assert_eq!(field.text(), "first\nsecond");
        field.apply(&EditOp::Home);
        assert_eq!(field.cursor_position(), (1, 0));
        field.apply(&EditOp::End);
        assert_eq!(field.cursor_position(), (1, 6));
    }

    #[test]
    fn up_and_down_move_between_lines_keeping_the_column() {
        let mut field = typed("first line\nab\nthird line");
        assert!(field.on_last_line() && !field.on_first_line());
        field.apply(&EditOp::Up);
        assert_eq!(field.cursor_position(), (1, 2), "the short line's end");
        field.apply(&EditOp::Up);
        assert_eq!(field.cursor_position(), (0, 2));
        assert!(field.on_first_line());
        field.apply(&EditOp::Up);
        assert_eq!(field.cursor_position(), (0, 2), "nothing above the first line");
        field.apply(&EditOp::Down);
        field.apply(&EditOp::Down);
        assert_eq!(field.cursor_position(), (2, 2));
        field.apply(&EditOp::Down);
        assert_eq!(field.cursor_position(), (2, 2), "nothing below the last line");
    }

    #[test]
    fn take_empties_the_field() {
        let mut field = typed("send me");
        assert_eq!(field.take(), "send me");
        assert!(field.is_blank());
        field.apply(&EditOp::Backspace);
        field.apply(&EditOp::Left);
        assert_eq!(field.cursor_position(), (0, 0));
    }
}
