//! Entering and leaving the full-screen terminal, and a panic hook that leaves it too, so a
//! crash never strands the user in raw mode on the alternate screen.

use std::io::{self, stdout, Stdout};

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::execute;
use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

pub type Tui = Terminal<CrosstermBackend<Stdout>>;

/// Raw mode, alternate screen, bracketed paste (so a pasted prompt is one edit, not a burst of
/// keys whose newlines would send it early).
pub fn enter() -> io::Result<Tui> {
    install_panic_hook();
    enable_raw_mode()?;
    if let Err(error) = execute!(stdout(), EnterAlternateScreen, EnableBracketedPaste) {
        restore();
        return Err(error);
    }
    Terminal::new(CrosstermBackend::new(stdout()))
}

/// Puts the terminal back; safe to call more than once.
pub fn restore() {
    // Each step is attempted even if an earlier one failed: restore as much as possible.
    let _ = execute!(stdout(), DisableBracketedPaste, LeaveAlternateScreen);
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), crossterm::cursor::Show);
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        tracing::error!("panic: {info}");
        previous(info);
    }));
}
