//! Entering and leaving the full-screen terminal, and a panic hook that leaves it too, so a
//! crash never strands the user in raw mode on the alternate screen (or with a mouse that
//! selects nothing).

use std::io::{self, stdout, Stdout};

use crossterm::event::{DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture};
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

/// Mouse reporting on or off (`--mouse`, `m`); off again in [`restore`], whatever happens.
pub fn set_mouse_capture(tui: &mut Tui, on: bool) {
    let result = if on {
        execute!(tui.backend_mut(), EnableMouseCapture)
    } else {
        execute!(tui.backend_mut(), DisableMouseCapture)
    };
    if let Err(error) = result {
        tracing::warn!("could not turn the mouse {}: {error}", if on { "on" } else { "off" });
    }
}

/// Puts the terminal back; safe to call more than once. Mouse reporting is turned off even if
/// it was never on: a terminal left reporting would type escape codes into the shell.
pub fn restore() {
    // Each step is attempted even if an earlier one failed: restore as much as possible.
    let _ = execute!(stdout(), DisableMouseCapture, DisableBracketedPaste, LeaveAlternateScreen);
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), crossterm::cursor::Show);
}

/// Leaves the full-screen terminal, runs `work` (a program that uses the terminal itself),
/// then enters it again (mouse reporting as it was) and has the next frame drawn whole.
pub async fn run_outside<T, F: std::future::Future<Output = T>>(
    tui: &mut Tui,
    mouse: bool,
    work: impl FnOnce() -> F,
) -> T {
    restore();
    let result = work().await;
    let _ = enable_raw_mode();
    let _ = execute!(stdout(), EnterAlternateScreen, EnableBracketedPaste);
    if mouse {
        set_mouse_capture(tui, true);
    }
    if let Err(error) = tui.clear() {
        tracing::warn!("could not clear the screen after the shell: {error}");
    }
    result
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        tracing::error!("panic: {info}");
        previous(info);
    }));
}
