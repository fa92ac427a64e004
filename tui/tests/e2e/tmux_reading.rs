//! End to end in tmux, against a real `batond` with the mock agent: reading a transcript with
//! the focus on it. The agent runs a tool and then answers at length, so the tool call is far
//! above the bottom; `v` focuses the transcript, `{` selects the tool call and scrolls up to it,
//! Enter shows its input and output and folds it again, j/k and Space scroll, Esc goes back.

use std::path::Path;

use crate::common::tmux::Tmux;
use baton_protocol::TaskCreateParams;
use baton_testkit::{batond_path, Server, ServerBuilder};

/// batond on `data_dir` with one task of the mock agent working in `workdir`.
fn server_with_a_task(data_dir: &Path, workdir: &Path, title: &str) -> Server {
    let server = ServerBuilder::new(data_dir).start_blocking();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (client, _notifications) = server.client().await;
        let mut params = TaskCreateParams::new(title, "", "mock");
        params.workdir = Some(workdir.display().to_string());
        params.start = false;
        client.request(params).await.expect("task.create");
        client.close();
    });
    server
}

/// `baton` against `server`, its data dir apart from the server's (the token goes in the
/// environment), with extra `args`.
fn baton_command(server: &Server, tui_dir: &Path, args: &str) -> String {
    let baton = env!("CARGO_BIN_EXE_baton");
    format!(
        "BATON_TOKEN='{}' '{baton}' --server '{}' --no-spawn --data-dir '{}' {args}",
        server.token.as_deref().unwrap_or_default(),
        server.url,
        tui_dir.display()
    )
}

#[test]
fn reading_a_transcript_selects_expands_and_folds_a_tool_call() {
    if !Tmux::available() {
        return;
    }
    assert!(batond_path().is_file());
    let dir = tempfile::tempdir().expect("temp dir");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let server = server_with_a_task(&dir.path().join("server"), &workdir, "Reading task");
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
    tmux.wait_for("the prompt focused", |s| s.contains("Prompt · Enter send") && !s.contains("{ } select"));
    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    tmux.wait_for("baton to exit", |_| tmux.run(&["list-sessions"]).is_empty());
}
