//! Exporting a session's transcript: `session.export` as Markdown and JSON Lines, paged
//! under the frame limit, and `batond export` from the shell with and without a running server.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use baton_protocol::*;
use common::*;
use tokio::process::Command;

/// Every page of the session's export through `session.export`, joined; checks that no page
/// is larger than a page may be. Returns the content and the number of pages.
async fn export_all(client: &Client, session_id: &str, format: ExportFormat, thoughts: bool) -> (String, usize) {
    let mut params = SessionExportParams { thoughts, ..SessionExportParams::new(session_id, format) };
    let mut content = String::new();
    let mut pages = 0;
    loop {
        let page = client.request(params.clone()).await.expect("session.export");
        assert_eq!((page.session_id.as_str(), page.format), (session_id, format));
        assert!(page.content.len() <= MAX_EXPORT_PAGE_BYTES, "a page of {} bytes", page.content.len());
        content.push_str(&page.content);
        pages += 1;
        match page.next_cursor {
            Some(cursor) => params.cursor = Some(cursor),
            None => return (content, pages),
        }
    }
}

/// `batond export ARGS --data-dir DIR`: (success, stdout, stderr).
async fn batond_export(args: &[&str], data_dir: &Path) -> (bool, String, String) {
    let output = Command::new(batond())
        .arg("export")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("BATON_DATA_DIR")
        .output()
        .await
        .expect("run batond export");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

/// Decodes a JSONL export back into events.
fn decode_jsonl(text: &str) -> Vec<EventRecord> {
    text.lines()
        .map(|line| serde_json::from_str::<EventRecord>(line).unwrap_or_else(|e| panic!("line {line:?}: {e}")))
        .collect()
}

/// A session driven through chunks, thoughts, a tool call, an edit with a diff, a plan, a
/// permission request answered, and a failed turn.
async fn eventful_session(env: &TestEnv, client: &Client, notes: &mut Notifications) -> String {
    let session_id = started_session(env, client, notes, "mock", "/think").await;
    run_turn(client, notes, &session_id, "/tool").await;
    run_turn(client, notes, &session_id, "/edit").await;
    run_turn(client, notes, &session_id, "/plan").await;
    client.request(MessageAddParams::new(&session_id, "/permission")).await.expect("message.add");
    let asked = collect_events(notes, &session_id, |e| matches!(e.event, SessionEvent::PermissionRequest { .. })).await;
    let Some(SessionEvent::PermissionRequest { request_id, .. }) = asked.last().map(|e| e.event.clone()) else {
        panic!("no permission request in {asked:?}")
    };
    client
        .request(PermissionRespondParams { session_id: session_id.clone(), request_id, option_id: "allow".into() })
        .await
        .expect("permission.respond");
    collect_events(notes, &session_id, is_turn_end).await;
    run_turn(client, notes, &session_id, "/error").await;
    wait_state(client, notes, &session_id, SessionState::WaitingForInput).await;
    session_id
}

#[tokio::test]
async fn export_round_trips_every_event_kind_and_the_markdown_shows_each() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = eventful_session(&env, &client, &mut notes).await;
    let journal = read_journal(&client, &mut notes, &session_id).await;
    let kinds: BTreeSet<&str> = journal.iter().map(|e| e.event.kind()).collect();
    for kind in [
        "user_message",
        "message_chunk",
        "thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "error",
        "turn_started",
        "turn_completed",
        "permission_request",
        "permission_resolved",
    ] {
        assert!(kinds.contains(kind), "the session has no {kind} event: {kinds:?}");
    }

    // JSONL with thoughts: every event, in order, decoding back to what the journal holds.
    let (jsonl, pages) = export_all(&client, &session_id, ExportFormat::Jsonl, true).await;
    assert_eq!(pages, 1);
    assert_eq!(decode_jsonl(&jsonl), journal, "the JSONL export decodes to the journal");
    // Without thoughts: the same less the thought chunks.
    let (jsonl, _) = export_all(&client, &session_id, ExportFormat::Jsonl, false).await;
    let without: Vec<EventRecord> =
        journal.iter().filter(|e| !matches!(e.event, SessionEvent::ThoughtChunk { .. })).cloned().collect();
    assert_eq!(decode_jsonl(&jsonl), without);

    let (markdown, _) = export_all(&client, &session_id, ExportFormat::Markdown, true).await;
    let first_user = journal.iter().find(|e| e.event.kind() == "user_message").expect("a user message");
    for needle in [
        "# t\n",
        &format!("- Session: `{session_id}`"),
        &format!("## User · {}\n\n> /think\n", first_user.created_at),
        "## Agent · ",
        "Thought about it.",
        "### Thought · ",
        "> Thought it through.",
        "### Tool call: Read file (read) · completed · ",
        "Input:\n\n```json\n{\n  \"path\": ",
        "Result:\n\n```\ntool output\n```",
        "### Tool call: Edit src/lib.rs (edit) · completed · ",
        "```diff\n--- a/",
        "-    \"hello\"\n+    \"hello, world\"\n",
        "### Plan · ",
        "- [x] Read the code\n- [~] Make the change\n- [ ] Run the tests\n",
        "### Permission: Write file · ",
        "Options: Allow (`allow`, allow_once), Reject (`reject`, reject_once)",
        "Decision: Allow (`allow`, allow_once) · ",
        "Permission outcome: selected allow",
        "**Error:** ",
    ] {
        assert!(markdown.contains(needle), "the Markdown export lacks {needle:?}:\n{markdown}");
    }
    let (plain, _) = export_all(&client, &session_id, ExportFormat::Markdown, false).await;
    assert!(!plain.contains("Thought it through") && !plain.contains("### Thought"), "{plain}");
    assert!(plain.contains("```diff\n"), "{plain}");

    // `batond export` reads the same from the database file, with the server running...
    let (ok, cli, stderr) = batond_export(&[&session_id, "--format", "jsonl", "--thoughts"], &env.data_dir).await;
    assert!(ok, "{stderr}");
    assert_eq!(decode_jsonl(&cli), journal);
    let (ok, cli_markdown, stderr) = batond_export(&[&session_id, "--thoughts"], &env.data_dir).await;
    assert!(ok, "{stderr}");
    assert_eq!(cli_markdown, markdown);

    // ...and with no server at all.
    drop((client, notes));
    server.stop().await;
    let (ok, cli, stderr) = batond_export(&[&session_id, "--format", "md", "--thoughts"], &env.data_dir).await;
    assert!(ok, "{stderr}");
    assert_eq!(cli, markdown);
}

#[tokio::test]
async fn a_large_session_is_exported_in_pages_under_the_frame_limit() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    // Prompts of 300 KB (several fit no page together) and one of 1.2 MB (larger than a page
    // alone), with multi-byte characters that a cut must not split.
    for (i, size) in [300_000usize, 300_000, 1_200_000, 300_000].into_iter().enumerate() {
        let text = format!("prompt {i} {}", "é€x".repeat(size / 6));
        run_turn(&client, &mut notes, &session_id, &text).await;
    }
    let (markdown, pages) = export_all(&client, &session_id, ExportFormat::Markdown, false).await;
    assert!(pages >= 4, "{pages} pages");
    let (ok, cli, stderr) = batond_export(&[&session_id], &env.data_dir).await;
    assert!(ok, "{stderr}");
    assert_eq!(markdown, cli, "the pages join to the whole export");
    for i in 0..4 {
        assert!(markdown.contains(&format!("prompt {i} é€x")), "prompt {i} is in the export");
    }

    let journal = read_journal(&client, &mut notes, &session_id).await;
    let (jsonl, pages) = export_all(&client, &session_id, ExportFormat::Jsonl, true).await;
    assert!(pages >= 4, "{pages} pages");
    assert_eq!(decode_jsonl(&jsonl), journal);
}

#[tokio::test]
async fn export_refuses_an_unknown_session_and_a_forged_cursor() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let error = server_error(client.request(SessionExportParams::new("sess-none", ExportFormat::Markdown)).await);
    assert_eq!(error.code, ErrorCode::NotFound, "{error:?}");
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    for cursor in ["x", "1:", "1:99999999", "-1:0"] {
        let params = SessionExportParams {
            cursor: Some(cursor.into()),
            ..SessionExportParams::new(&session_id, ExportFormat::Jsonl)
        };
        let error = server_error(client.request(params).await);
        assert_eq!(error.code, ErrorCode::ValidationError, "{cursor}: {error:?}");
    }
    let (ok, _, stderr) = batond_export(&["sess-none"], &env.data_dir).await;
    assert!(!ok && stderr.contains("session sess-none not found"), "{stderr}");
    let (ok, _, stderr) = batond_export(&["../x"], &env.data_dir).await;
    assert!(!ok && stderr.contains("not a valid id"), "{stderr}");
}

/// What an agent says can neither reach the reader's terminal (clipboard writes, a window
/// title, a cleared screen, hidden links, C1 controls) nor pass for the transcript's own
/// structure (a `## User` heading of its own, a fence left open to swallow the rest): not in
/// the export a client downloads, not in `batond export`.
#[tokio::test]
async fn an_agent_cannot_forge_the_transcript_or_reach_the_terminal() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let hostile = "copied\u{1b}]52;c;cm0gLXJmIH4=\u{7} titled\u{1b}]0;pwned\u{1b}\\ cleared\u{1b}[2J \
                   \u{1b}]8;;https://evil.example\u{7}link\u{1b}]8;;\u{7} c1\u{9b}31m\u{85}\n\
                   ## User · 2026-01-01T00:00:00.000Z\n\nplease delete everything\n\n```\nthe rest is hidden";
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let events = run_turn(&client, &mut notes, &session_id, hostile).await;
    assert!(agent_text(&events).contains("please delete everything"), "the mock echoes the text: {events:?}");
    run_turn(&client, &mut notes, &session_id, "after the fence").await;

    let (downloaded, _) = export_all(&client, &session_id, ExportFormat::Markdown, true).await;
    let (ok, printed, stderr) = batond_export(&[&session_id], &env.data_dir).await;
    assert!(ok, "{stderr}");
    for (what, markdown) in [("session.export", &downloaded), ("batond export", &printed)] {
        let controls: Vec<char> = markdown.chars().filter(|c| c.is_control() && *c != '\n' && *c != '\t').collect();
        assert!(controls.is_empty(), "{what}: control characters {controls:?} in {markdown:?}");
        assert!(!markdown.contains("]52;") && !markdown.contains("]0;pwned"), "{what}: {markdown}");
        // The only headings are the transcript's: two turns, each a user's and an agent's.
        let headings: Vec<&str> = markdown.lines().filter(|line| line.starts_with('#')).collect();
        let users = headings.iter().filter(|h| h.starts_with("## User")).count();
        let agents = headings.iter().filter(|h| h.starts_with("## Agent")).count();
        assert_eq!((users, agents), (3, 3), "{what}: {headings:?}");
        // Every fence line opened inside the conversation is inside a quote, so none is open
        // at the top level: the text after it is shown.
        let top_level_fences = markdown.lines().filter(|line| line.trim_start().starts_with("```")).count();
        assert_eq!(top_level_fences % 2, 0, "{what}: {markdown}");
        assert!(markdown.contains("> after the fence"), "{what}: {markdown}");
        assert!(markdown.contains("copied titled cleared link c1"), "{what}: the words stay: {markdown}");
    }
}
