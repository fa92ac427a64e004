//! End to end in tmux, against a real `batond` with the mock agent: reading a transcript with
//! the focus on it. The agent runs a tool and then answers at length, so the tool call is far
//! above the bottom; `v` focuses the transcript, `{` selects the tool call and scrolls up to it,
//! Enter shows its input and output and folds it again, j/k and Space scroll, Esc goes back.

use crate::common::tmux::{baton_command, server_with_tasks, tools, Tmux};

#[test]
fn reading_a_transcript_selects_expands_and_folds_a_tool_call() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let server = server_with_tasks(&dir.path().join("server"), &workdir, &["Reading task"]);
    let tmux = Tmux::start(dir.path(), 100, 30, &baton_command(&server, &dir.path().join("tui"), ""));

    tmux.wait_for("the session list", |s| s.contains("Reading task") && s.contains("connected"));
    tmux.keys(&["Enter"]);
    tmux.wait_text("Reading task · mock");
    tmux.keys(&["i"]);
    tmux.type_text("/tool");
    tmux.keys(&["Enter"]);
    tmux.wait_text("agent: Tool finished.");
    // A long answer pushes the tool call out of view.
    tmux.type_text("/chunks 400");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the long answer", |s| s.contains("c400") && !s.contains("Read file"));

    // Ctrl-O from the prompt focuses the transcript; the newest entry is selected.
    tmux.keys(&["C-o"]);
    tmux.wait_for("the answer marked", |s| s.lines().any(|row| row.contains("│▐") && row.contains("c400")));

    // { selects the tool call, far above: the view scrolls up to it.
    tmux.keys(&["{"]);
    // (Waiting for both: a capture may catch a frame half drawn.)
    tmux.wait_for("the tool call selected, scrolled up", |s| {
        s.contains("▐▸ read Read file  [completed]") && s.contains("lines up · End to follow")
    });

    // Enter shows what it was given and what it produced; Enter again folds it.
    tmux.keys(&["Enter"]);
    let readme = workdir.join("README.md").display().to_string();
    tmux.wait_for("the call expanded", |s| {
        s.contains("▐▾ read Read file  [completed]")
            && s.contains("▐  input:")
            && s.contains(&format!("path: {readme}"))
            && s.contains("▐  output:")
            && s.contains("▐    tool output")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for("the call folded", |s| s.contains("▐▸ read Read file") && !s.contains("input:"));

    // ] selects the entry below; End follows the bottom again; k and Space scroll by a line
    // and a page.
    tmux.keys(&["]"]);
    tmux.wait_text("▐agent: Tool finished.");
    tmux.keys(&["End"]);
    tmux.wait_for("the bottom", |s| !s.contains("lines up") && s.contains("c400"));
    tmux.keys(&["k"]);
    tmux.wait_text("↑ 1 lines up · End to follow");
    tmux.keys(&["k"]);
    tmux.wait_text("↑ 2 lines up · End to follow");
    tmux.keys(&["Space"]);
    tmux.wait_for("a page down", |s| !s.contains("lines up"));

    // Esc hands the focus back to the prompt it came from.
    tmux.keys(&["Escape"]);
    tmux.wait_for("the prompt focused", |s| {
        s.contains("· Enter send · Alt-Enter new line") && !s.contains("{ } select")
    });
    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    tmux.wait_for("baton to exit", |_| tmux.run(&["list-sessions"]).is_empty());
}
