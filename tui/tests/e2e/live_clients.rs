//! Search, export, fork and usage in the TUI against a real `batond` and the mock agent (the
//! harness is `common/live.rs`): each key is pressed as a user would, and each wait is for
//! what the screen shows, bounded.

use std::path::Path;

use baton_protocol::{
    Client, ClientEvent, MessageAddParams, MessageSearchParams, Notification, Notifications, SessionState,
    TaskCreateParams,
};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::common::live::*;

/// A task with the mock agent whose first prompt is `prompt`, its first turn ended; returns
/// the session's id.
async fn task(client: &Client, notes: &mut Notifications, dir: &Path, title: &str, prompt: &str) -> String {
    let mut params = TaskCreateParams::new(title, prompt, "mock");
    params.workdir = Some(dir.display().to_string());
    params.start = true;
    let session_id = client.request(params).await.expect("task.create").session.status.session_id;
    turn_ended(notes, &session_id).await;
    session_id
}

async fn turn_ended(notes: &mut Notifications, session_id: &str) {
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(change))
                if change.session_id == session_id && change.state == SessionState::WaitingForInput =>
            {
                Some(())
            }
            _ => None,
        })
        .await
        .expect("the turn ends");
}

async fn say(client: &Client, notes: &mut Notifications, session_id: &str, content: &str) {
    let params = MessageAddParams::new(session_id, content);
    client.request(params).await.expect("message.add");
    turn_ended(notes, session_id).await;
}

/// `f`, a word typed, Enter: the session that said it (not the one under the cursor) is
/// opened, scrolled back to the message, which is selected, though newer turns came after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_opens_the_hit_in_context() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notes) = server.client().await;
    let harvest = task(&client, &mut notes, dir.path(), "Plan the harvest", "remember pineapple").await;
    // Enough turns after it that the message is far above the bottom of the transcript.
    for n in 0..12 {
        say(&client, &mut notes, &harvest, &format!("note {n} about apples")).await;
    }
    let other = task(&client, &mut notes, dir.path(), "Write the notes", "remember kiwi").await;
    let hits = client.request(MessageSearchParams::new("pineapple")).await.expect("message.search").hits;
    let oldest = hits.iter().map(|hit| hit.seq).min().expect("hits");

    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    redact_sessions(&mut tui, &[harvest.clone(), other.clone()]);
    tui.wait_text("Write the notes").await;
    tui.key(KeyCode::Char('f'));
    tui.type_text("pineapple");
    let screen = tui.wait_for("the hits", |s| s.contains("hit 1 of") && s.contains("Plan the harvest")).await;
    assert!(!screen.contains("Write the notes · "), "only the session that said it: {screen}");
    // The hits are newest first: the oldest is the user's own message.
    for _ in 1..hits.len() {
        tui.key(KeyCode::Down);
    }
    tui.key(KeyCode::Enter);
    let screen = tui
        .wait_for("the message, selected", |s| {
            s.lines().any(|row| row.contains('▐') && row.contains("remember pineapple"))
        })
        .await;
    assert_eq!(tui.app.opened_session(), Some(harvest.as_str()));
    assert_eq!(tui.app.selected_entry(), Some(oldest));
    assert!(!screen.contains("note 11"), "scrolled back from the newest turn: {screen}");
    insta::assert_snapshot!("search_hit_opened_live", tui.snapshot());
}

/// `x` on the opened session, a path typed, Enter: the file holds the transcript as Markdown,
/// and the status bar says where it went. A second export to the same file asks before it
/// replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_writes_the_transcript_to_the_file_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notes) = server.client().await;
    let session_id = task(&client, &mut notes, dir.path(), "Plan the harvest", "remember pineapple").await;
    say(&client, &mut notes, &session_id, "/tool").await;

    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Plan the harvest").await;
    tui.key(KeyCode::Enter);
    tui.wait_text("Tool finished.").await;
    tui.key(KeyCode::Char('x'));
    let screen = tui.wait_text("Export the transcript").await;
    assert!(screen.contains(&format!("./plan-the-harvest-{session_id}.md")), "the default name: {screen}");
    let path = dir.path().join("harvest.md");
    tui.app.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    tui.type_text(&path.display().to_string());
    tui.key(KeyCode::Enter);
    let screen = tui.wait_text("exported the transcript to").await;
    assert!(screen.contains("harvest.md"), "{screen}");
    let markdown = std::fs::read_to_string(&path).expect("the file is written");
    assert!(markdown.starts_with("# Plan the harvest"), "{markdown}");
    for part in
        ["## User", "remember pineapple", "## Agent", "OK, I will remember pineapple.", "Read file", "Tool finished."]
    {
        assert!(markdown.contains(part), "{part:?} in:\n{markdown}");
    }

    // Again to the same file: kept until Enter is pressed a second time.
    std::fs::write(&path, "mine").expect("write");
    tui.key(KeyCode::Char('x'));
    tui.wait_text("Export the transcript").await;
    tui.app.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    tui.type_text(&path.display().to_string());
    tui.key(KeyCode::Enter);
    tui.wait_text("the file exists").await;
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "mine", "not replaced unasked");
    tui.key(KeyCode::Enter);
    tui.wait_text("exported the transcript to").await;
    assert!(std::fs::read_to_string(&path).expect("read").contains("remember pineapple"));
}

/// `F`, `y`: the fork is opened; the list marks it, its pane says which session it came from,
/// and it answers from the conversation it was forked from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_shows_its_origin_and_knows_the_conversation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notes) = server.client().await;
    let source = task(&client, &mut notes, dir.path(), "Plan the harvest", "remember pineapple").await;

    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Plan the harvest").await;
    tui.key(KeyCode::Char('F'));
    tui.wait_text("Fork “Plan the harvest”").await;
    tui.key(KeyCode::Char('y'));
    let short = baton_tui::sessions::short_id(&source).to_string();
    tui.wait_for("the fork, opened and ready", |s| {
        s.contains(&format!("fork of {short}"))
            && s.contains("Plan the harvest #2 · mock · waiting for you")
            && s.contains("included with your next message.")
    })
    .await;
    let fork = tui.app.opened_session().expect("the fork is opened").to_string();
    assert_ne!(fork, source);
    // Whole ids (in the transcript's status line) first, then the short ones.
    tui.redactions.push((source.clone(), format!("sess-{}", "X".repeat(source.len() - 5))));
    redact_sessions(&mut tui, &[source.clone(), fork.clone()]);
    let screen = tui.snapshot();
    let rows: Vec<&str> = screen.lines().collect();
    assert!(
        rows.iter().any(|row| row.contains("›● waiting for you mock  ?s ago #2 fork")),
        "the list marks it: {screen}"
    );
    assert!(rows.iter().any(|row| row.contains("└ fork of session0 ─")), "its pane names the source: {screen}");
    insta::assert_snapshot!("fork_opened_live", screen);

    tui.key(KeyCode::Char('i'));
    tui.type_text("what did I ask you to remember?");
    tui.key(KeyCode::Enter);
    tui.wait_text("[resume context received] You asked me to").await;
}

/// What the mock agent reports with `/usage` shows in the session's pane and, summed, in the
/// status bar; before any report, nothing is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_shows_what_the_agent_reported_and_nothing_before() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let server = start_server(&data_dir, "127.0.0.1:0");
    let (client, mut notes) = server.client().await;
    task(&client, &mut notes, dir.path(), "Plan the harvest", "hello").await;
    client.close();

    let mut tui = Tui::connect(&server.url, &dir.path().join("tui"), &data_dir).await;
    tui.wait_text("Plan the harvest").await;
    tui.key(KeyCode::Enter);
    let screen = tui.wait_text("waiting for you").await;
    assert!(!screen.contains(" in ·") && !screen.contains('Σ'), "nothing reported, nothing shown: {screen}");
    tui.key(KeyCode::Char('i'));
    tui.type_text("/usage 1200 80 1000 0.25");
    tui.key(KeyCode::Enter);
    tui.key(KeyCode::Esc);
    let screen = tui.wait_for("the usage", |s| s.contains("Σ 1.2k in · 80 out · $0.25")).await;
    assert!(screen.contains(" 1.2k in · 80 out · $0.25 "), "the session's own: {screen}");
}
