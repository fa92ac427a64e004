//! End to end in tmux, against a real `batond` with the mock agent: the mouse. SGR mouse
//! reports (what a terminal sends for the wheel and clicks once asked to) are typed into the
//! pane; the real `baton` reads them through crossterm. With `--mouse` the wheel scrolls the
//! transcript and a click opens another session; without it a click changes nothing until `m`
//! turns the mouse on. tmux's own view of the pane says whether baton asked for mouse reports,
//! and that it stopped asking when it exited.

use std::path::Path;

use crate::common::tmux::{baton_command, server_with_tasks, tools, Tmux};
use baton_testkit::Server;

/// `baton` against `server` with extra `args`; the pane stays after it exits, so that tmux can
/// still be asked about the mouse.
fn baton_staying(server: &Server, tui_dir: &Path, args: &str) -> String {
    format!("{}; echo baton exited; sleep 600", baton_command(server, tui_dir, args))
}

/// The report of a mouse event at the 0-based `column`, `row` (SGR encoding, 1-based).
fn sgr(button: u8, column: usize, row: usize) -> String {
    format!("\x1b[<{button};{};{}M", column + 1, row + 1)
}
const LEFT: u8 = 0;
const WHEEL_UP: u8 = 64;

/// Where a left click on `text`'s session row lands: the row under the task's title.
fn session_row_under(screen: &str, task_title: &str) -> (usize, usize) {
    let row = screen.lines().position(|line| line.starts_with('│') && line.contains(task_title));
    (5, row.unwrap_or_else(|| panic!("{task_title} not in the list:\n{screen}")) + 1)
}

/// Whether the pane asked tmux for mouse reports (any mode).
fn mouse_reported(tmux: &Tmux) -> bool {
    tmux.run(&["display", "-p", "-t", "baton", "#{mouse_any_flag}#{mouse_standard_flag}#{mouse_button_flag}"])
        .contains('1')
}

#[test]
fn with_mouse_the_wheel_scrolls_and_a_click_opens_a_session_and_without_it_nothing_happens() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let server = server_with_tasks(&dir.path().join("server"), &workdir, &["Mouse task A", "Mouse task B"]);

    // --mouse: on from the start.
    let with = dir.path().join("with");
    std::fs::create_dir_all(&with).expect("dir");
    let tmux = Tmux::start(&with, 100, 30, &baton_staying(&server, &with.join("tui"), "--mouse"));
    tmux.wait_for("the session list", |s| s.contains("Mouse task A") && s.contains("connected"));
    assert!(mouse_reported(&tmux), "baton --mouse asked for no mouse reports");
    tmux.keys(&["Enter"]);
    tmux.wait_text("Mouse task B · mock");
    tmux.keys(&["i"]);
    tmux.type_text("/chunks 800");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the long answer", |s| s.contains("c800") && !s.contains("working…"));
    tmux.keys(&["Escape"]);
    // (An Esc read together with the next report would be taken for the start of another key.)
    tmux.wait_for("the prompt left", |s| !s.contains("Prompt · Enter send"));

    // The wheel over the transcript scrolls it up, three lines a notch.
    tmux.type_text(&sgr(WHEEL_UP, 70, 12));
    tmux.wait_text("↑ 3 lines up · End to follow");
    tmux.type_text(&sgr(WHEEL_UP, 70, 12));
    tmux.wait_text("↑ 6 lines up · End to follow");

    // A click on the other task's session opens it.
    let screen = tmux.screen();
    let (x, y) = session_row_under(&screen, "Mouse task A");
    tmux.type_text(&sgr(LEFT, x, y));
    tmux.wait_text("Mouse task A · mock");

    // m turns it off: tmux is told, and a click does nothing any more.
    tmux.keys(&["m"]);
    tmux.wait_text("mouse off");
    tmux.wait_for("mouse reports off", |_| !mouse_reported(&tmux));
    tmux.keys(&["q"]);
    tmux.wait_text("baton exited");
    assert!(!mouse_reported(&tmux));

    // Without --mouse: a click changes nothing (t after it shows it was read), until m.
    let without = dir.path().join("without");
    std::fs::create_dir_all(&without).expect("dir");
    let tmux = Tmux::start(&without, 100, 30, &baton_staying(&server, &without.join("tui"), ""));
    let screen = tmux.wait_for("the session list", |s| s.contains("Mouse task A") && s.contains("connected"));
    assert!(!mouse_reported(&tmux), "baton asked for mouse reports without --mouse");
    let (x, y) = session_row_under(&screen, "Mouse task A");
    tmux.type_text(&sgr(LEFT, x, y));
    tmux.keys(&["t"]);
    let screen = tmux.wait_text("thoughts folded");
    assert!(screen.contains("Select a session with"), "a click opened a session:\n{screen}");
    let cursor_row = screen.lines().find(|line| line.contains('›')).unwrap_or_default().to_string();
    assert!(!cursor_row.is_empty() && y < screen.lines().count(), "{screen}");
    let (_, b_row) = session_row_under(&screen, "Mouse task B");
    assert_eq!(screen.lines().nth(b_row), Some(cursor_row.as_str()), "the cursor moved:\n{screen}");

    tmux.keys(&["m"]);
    tmux.wait_text("mouse on");
    tmux.wait_for("mouse reports on", |_| mouse_reported(&tmux));
    tmux.type_text(&sgr(LEFT, x, y));
    tmux.wait_text("Mouse task A · mock");
    // Quitting turns the reports off again.
    tmux.keys(&["q"]);
    tmux.wait_text("baton exited");
    assert!(!mouse_reported(&tmux));
}
