//! The JavaScript client (`server/web/baton-client.js`) in Node against a real batond: it
//! follows a session across a server restart with no duplicate and no gap, and the example
//! `examples/node-client.mjs` streams a reply. Skipped, saying so, when `node` is missing.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use baton_protocol::*;
use common::*;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{ChildStdout, Command};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// `node` (with the flag that gives Node 20 and 21 their WebSocket), or None after saying why
/// the test is skipped.
fn node() -> Option<Command> {
    let version = match std::process::Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        _ => {
            eprintln!("SKIPPED JavaScript client test: `node` is not installed");
            return None;
        }
    };
    let major: u32 = version.trim_start_matches('v').split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
    if major < 20 {
        eprintln!("SKIPPED JavaScript client test: node {version} has no WebSocket (20 or newer needed)");
        return None;
    }
    let mut command = Command::new("node");
    if major < 22 {
        command.arg("--experimental-websocket");
    }
    command.stdin(Stdio::null()).kill_on_drop(true);
    Some(command)
}

/// Reads the follower's JSON lines until `done` accepts one; returns every line read.
async fn read_until(lines: &mut Lines<BufReader<ChildStdout>>, seen: &mut Vec<Value>, done: impl Fn(&Value) -> bool) {
    tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.expect("read node's output") {
            let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            seen.push(value.clone());
            if done(&value) {
                return;
            }
        }
        panic!("node exited early; it printed {seen:?}");
    })
    .await
    .unwrap_or_else(|_| panic!("node did not get there in time; it printed {seen:?}"));
}

#[tokio::test]
async fn js_client_follows_a_session_across_a_restart_without_duplicate_or_gap() {
    let Some(mut runner) = node() else { return };
    let env = TestEnv::new();
    let server = env.start().await;
    let addr = server.url.trim_start_matches("ws://").trim_end_matches("/ws").to_string();
    let (client, _notes) = server.client().await;
    // A long, slow first turn: the server is killed while it streams.
    let created = client.request(env.task("Count slowly", "/slow 200", "mock", true)).await.expect("create");
    let session_id = created.session.status.session_id;

    let mut follower = runner
        .arg(repo("tests/fixtures/js_follow.mjs"))
        .args([&server.url, &session_id, "2", server.token.as_deref().expect("the server's token")])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn node");
    let mut lines = BufReader::new(follower.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    read_until(&mut lines, &mut seen, |v| v["kind"] == "message_chunk" && v["seq"].as_u64() >= Some(10)).await;

    // kill -9 mid-stream; a new batond on the same port. The client reconnects by itself and
    // resubscribes from the last seq it applied.
    server.kill9().await;
    let server = env.start_with(&["--listen", &addr]).await;
    read_until(&mut lines, &mut seen, |v| v["open"] == 2).await;
    let (client, mut notes) = server.client().await;
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .expect("resume");
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    subscribe(&client, &session_id, None).await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "/chunks 5").await, "c1 c2 c3 c4 c5 ");
    // The follower exits on its own after the second turn_completed (the interrupted turn
    // closed at startup, then this one): read to the end of its output.
    tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.expect("read node's output") {
            seen.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("node did not finish; it printed {seen:?}"));
    let status = tokio::time::timeout(WAIT, follower.wait()).await.expect("node exits").expect("wait");
    assert!(status.success(), "node failed: {status}");

    let errors: Vec<&Value> = seen.iter().filter(|v| v.get("error").is_some()).collect();
    assert!(errors.is_empty(), "the client reported errors: {errors:?}");
    let delivered: Vec<u64> = seen.iter().filter_map(|v| v["seq"].as_u64()).collect();
    let journal = client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await;
    let last = journal.expect("subscribe").current_seq;
    let expected: Vec<u64> = (1..=last).collect();
    assert_eq!(delivered, expected, "every seq once, in order, across the restart");
    assert!(seen.iter().any(|v| v["open"] == 2), "the client did reconnect");
}

#[tokio::test]
async fn node_example_streams_a_reply() {
    let Some(mut runner) = node() else { return };
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("Example", "remember the green gate", "mock", true)).await.expect("create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;

    let run = runner
        .arg(repo("examples/node-client.mjs"))
        .args([&session_id, "What did I ask you to remember?"])
        .env("BATON_URL", &server.url)
        .env("BATON_TOKEN", server.token.as_deref().expect("the server's token"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    let output = tokio::time::timeout(WAIT, run).await.expect("the example finished").expect("run node");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "You asked me to remember the green gate.", "stderr: {stderr}");
    assert!(stderr.contains("turn ended: end_turn"), "{stderr}");

    // Without arguments it lists the sessions.
    // Page by page, every session: more than one page of the server's 100 rows.
    let mut all = vec![session_id.clone()];
    for i in 0..120 {
        let created = client.request(env.task(&format!("Task {i}"), "", "mock", false)).await.expect("create");
        all.push(created.session.status.session_id);
    }
    let Some(mut lister) = node() else { return };
    let listed = lister
        .arg(repo("examples/node-client.mjs"))
        .env("BATON_URL", &server.url)
        .env("BATON_TOKEN", server.token.as_deref().expect("the server's token"))
        .output();
    let output = tokio::time::timeout(WAIT, listed).await.expect("listed in time").expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&session_id) && stdout.contains("Example"), "{stdout}");
    for session in &all {
        assert_eq!(stdout.matches(session.as_str()).count(), 1, "{session} listed once: {stdout}");
    }
}

#[tokio::test]
async fn js_client_subscribes_before_the_connection_is_open_and_errors_say_whether_to_retry() {
    let Some(mut runner) = node() else { return };
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let journal = subscribe(&client, &session_id, None).await.current_seq;

    let run = runner
        .arg(repo("tests/fixtures/js_early.mjs"))
        .args([&server.url, &session_id, server.token.as_deref().expect("the server's token")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    let output = tokio::time::timeout(WAIT, run).await.expect("node finished").expect("run node");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    // The early subscription happened once connected: the whole journal, once each.
    let expected: Vec<u64> = (1..=journal).collect();
    assert_eq!(lines[0]["current_seq"], journal, "{stdout}");
    assert_eq!(lines[0]["seqs"], serde_json::json!(expected), "{stdout}");
    assert_eq!(lines[0]["last_seq"], journal, "{stdout}");
    // An out-of-range limit: a validation error, not worth retrying.
    assert_eq!(lines[1]["code"], "VALIDATION_ERROR", "{stdout}");
    assert_eq!(lines[1]["retryable"], false, "{stdout}");
    // Closed before it opened: rejected, and no subscription kept for a later connection.
    assert_eq!(lines[2]["closed_subscribe"], "the client is closed", "{stdout}");
    assert_eq!(lines[2]["last_seq"], Value::Null, "{stdout}");
}
