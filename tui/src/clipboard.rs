//! Copying to the clipboard of the terminal the user sits at, through SSH and tmux: the OSC 52
//! escape sequence. The terminal (not this process) owns the clipboard, so the text travels
//! in the output stream; tmux passes it on when wrapped in its DCS passthrough.

use base64::Engine;

/// Terminals known to ignore OSC 52, by `TERM`: the copy would silently do nothing there.
const NO_OSC52_TERMS: &[&str] = &["linux", "dumb", "vt100", "vt220"];

/// Where the escape sequence has to go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Multiplexer {
    None,
    /// `TMUX` is set: tmux takes OSC 52 with `set-clipboard on`, or passes a wrapped one on with
    /// `allow-passthrough on`.
    Tmux,
    /// `TERM` starts with `screen` (GNU screen): the same DCS wrapping, without tmux's escape doubling.
    Screen,
}

impl Multiplexer {
    pub fn from_env() -> Multiplexer {
        if std::env::var_os("TMUX").is_some() {
            Multiplexer::Tmux
        } else if std::env::var("TERM").is_ok_and(|term| term.starts_with("screen")) {
            Multiplexer::Screen
        } else {
            Multiplexer::None
        }
    }
}

/// Whether the terminal named by `TERM` may take OSC 52 at all (most do: xterm, iTerm2, kitty,
/// WezTerm, Windows Terminal, foot, alacritty; the Linux console does not).
pub fn terminal_may_copy(term: Option<&str>) -> bool {
    term.is_some_and(|term| !NO_OSC52_TERMS.contains(&term))
}

/// The bytes that ask the terminal to put `text` on its clipboard.
pub fn osc52(text: &str, through: Multiplexer) -> String {
    let payload = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    through.carry(&format!("\x1b]52;c;{payload}\x07"))
}

impl Multiplexer {
    /// `sequence` (an OSC) as it has to be written to reach the outer terminal.
    pub fn carry(self, sequence: &str) -> String {
        match self {
            Multiplexer::None => sequence.to_string(),
            // Plain, for tmux itself (with `set-clipboard on` it keeps an OSC 52 and passes it
            // on to the outer terminal), then in DCS passthrough with every ESC doubled, for
            // the outer terminal when tmux allows passthrough instead. Both carry the same text.
            Multiplexer::Tmux => format!("{sequence}\x1bPtmux;{}\x1b\\", sequence.replace('\x1b', "\x1b\x1b")),
            Multiplexer::Screen => format!("\x1bP{sequence}\x1b\\"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc52_bytes_plain_and_through_tmux() {
        assert_eq!(osc52("hi", Multiplexer::None), "\x1b]52;c;aGk=\x07");
        assert_eq!(osc52("hi", Multiplexer::Tmux), "\x1b]52;c;aGk=\x07\x1bPtmux;\x1b\x1b]52;c;aGk=\x07\x1b\\");
        assert_eq!(osc52("hi", Multiplexer::Screen), "\x1bP\x1b]52;c;aGk=\x07\x1b\\");
        // Any text, newlines and non-ASCII included, travels as base64.
        let text = "línea 1\nline 2";
        let sent = osc52(text, Multiplexer::None);
        let payload = sent.trim_start_matches("\x1b]52;c;").trim_end_matches('\x07');
        let decoded = base64::engine::general_purpose::STANDARD.decode(payload).unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), text);
    }

    #[test]
    fn the_linux_console_cannot_copy() {
        assert!(terminal_may_copy(Some("xterm-256color")));
        assert!(terminal_may_copy(Some("tmux-256color")));
        assert!(!terminal_may_copy(Some("linux")));
        assert!(!terminal_may_copy(None));
    }
}
