//! Text from agents made safe to show in a terminal: escape sequences (CSI such as `ESC[2J`,
//! OSC such as a title `ESC]0;…`, a clipboard write `ESC]52;…` or a link `ESC]8;;…`, DCS and
//! the other string sequences) are removed whole, with their parameters, and so are the other
//! control characters, C1 (U+0080 to U+009F) included. Line breaks and tabs are kept.

/// `text` without terminal escape sequences and control characters, line breaks and tabs
/// excepted. A carriage return, which lets a line overwrite what a terminal showed, goes too.
pub fn strip_terminal_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~.
                Some('[') => skip_csi(&mut chars),
                // OSC, DCS, SOS, PM, APC: a string up to BEL or the string terminator.
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // A two-character sequence (ESC 7, ESC c...): both go.
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            return;
        }
        // A control character inside ends the sequence without being kept.
        if c.is_control() {
            return;
        }
    }
}

fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::strip_terminal_controls as strip;

    #[test]
    fn escape_sequences_go_whole_and_text_stays() {
        assert_eq!(strip("plain text\n\twith a tab"), "plain text\n\twith a tab");
        assert_eq!(strip("a\u{1b}]52;c;ZXZpbA==\u{7}b"), "ab", "a clipboard write");
        assert_eq!(strip("a\u{1b}]0;fake title\u{1b}\\b"), "ab", "a window title");
        assert_eq!(strip("a\u{1b}[2J\u{1b}[1;31mb\u{1b}[0m"), "ab", "clear screen and colours");
        assert_eq!(strip("\u{1b}]8;;https://evil.example\u{7}click\u{1b}]8;;\u{7}"), "click", "a hidden link");
        assert_eq!(strip("a\u{9b}2Jb\u{9d}0;t\u{9c}c\u{85}d"), "abcd", "C1 controls");
        assert_eq!(strip("over\rwrite\u{7}\u{0}\u{7f}"), "overwrite");
        assert_eq!(strip("unterminated \u{1b}]0;title"), "unterminated ");
        assert_eq!(strip("café 日本 😀"), "café 日本 😀");
    }
}
