//! Terminal notifications when a session the user is not looking at starts needing them:
//! OSC 9 (iTerm2, WezTerm, Windows Terminal, kitty, foot...) and
//! OSC 777 `notify` (rxvt, VTE terminals, Ghostty...), carried through tmux's passthrough like
//! the OSC 52 copy, with a bell as the fallback every terminal has. Terminals ignore the OSC they
//! do not know, so both are sent. What is written is a pure function of the alert, tested byte
//! for byte.

use baton_protocol::Attention;
use clap::ValueEnum;

use crate::clipboard::Multiplexer;

/// `--alerts`: what a session that starts needing you makes the terminal do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum AlertMode {
    /// Nothing.
    Off,
    /// The terminal bell only.
    Bell,
    /// A desktop notification (OSC 9 and OSC 777) and the bell.
    #[default]
    Notify,
}

/// One alert: a title and a short text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub title: String,
    pub body: String,
}

impl Alert {
    /// The alert for a session of task `task_title` that started needing the user for `reason`.
    pub fn new(task_title: &str, reason: Attention) -> Alert {
        let body = match reason {
            Attention::Permission => "asks for a permission",
            Attention::Input => "waits for your next prompt",
            Attention::Resume => "needs resuming",
            Attention::Failed => "failed",
        };
        Alert { title: "Baton".into(), body: format!("{}: {body}", clean(task_title)) }
    }
}

/// Text that cannot end or break the escape sequence: no control characters, and no `;` (the
/// field separator of OSC 777).
fn clean(text: &str) -> String {
    text.chars().map(|c| if c.is_control() || c == ';' { ' ' } else { c }).collect()
}

/// The bytes that raise `alert` in `mode`; empty when off.
pub fn alert_bytes(alert: &Alert, mode: AlertMode, through: Multiplexer) -> String {
    const BELL: &str = "\x07";
    match mode {
        AlertMode::Off => String::new(),
        AlertMode::Bell => BELL.to_string(),
        AlertMode::Notify => {
            let (title, body) = (clean(&alert.title), clean(&alert.body));
            let osc9 = format!("\x1b]9;{title}: {body}\x07");
            let osc777 = format!("\x1b]777;notify;{title};{body}\x07");
            format!("{}{}{BELL}", through.carry(&osc9), through.carry(&osc777))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert() -> Alert {
        Alert::new("Fix login", Attention::Permission)
    }

    #[test]
    fn notify_writes_osc_9_osc_777_and_a_bell() {
        assert_eq!(
            alert_bytes(&alert(), AlertMode::Notify, Multiplexer::None),
            "\x1b]9;Baton: Fix login: asks for a permission\x07\
             \x1b]777;notify;Baton;Fix login: asks for a permission\x07\
             \x07"
        );
    }

    #[test]
    fn through_tmux_each_sequence_is_also_wrapped_with_its_escapes_doubled() {
        assert_eq!(
            alert_bytes(&alert(), AlertMode::Notify, Multiplexer::Tmux),
            "\x1b]9;Baton: Fix login: asks for a permission\x07\
             \x1bPtmux;\x1b\x1b]9;Baton: Fix login: asks for a permission\x07\x1b\\\
             \x1b]777;notify;Baton;Fix login: asks for a permission\x07\
             \x1bPtmux;\x1b\x1b]777;notify;Baton;Fix login: asks for a permission\x07\x1b\\\
             \x07"
        );
    }

    #[test]
    fn bell_and_off() {
        assert_eq!(alert_bytes(&alert(), AlertMode::Bell, Multiplexer::Tmux), "\x07");
        assert_eq!(alert_bytes(&alert(), AlertMode::Off, Multiplexer::None), "");
    }

    #[test]
    fn a_title_cannot_break_the_sequence() {
        let alert = Alert::new("evil\x07\x1b]52;c;x;y", Attention::Input);
        let bytes = alert_bytes(&alert, AlertMode::Notify, Multiplexer::None);
        assert_eq!(bytes.matches('\x07').count(), 3, "{bytes:?}");
        assert!(bytes.contains("evil  ]52 c x y: waits for your next prompt"), "{bytes:?}");
    }
}
