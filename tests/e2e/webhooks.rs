//! Webhooks (`[[notify.webhook]]`) against a local HTTP server written here: the ntfy and
//! Slack-compatible formats, a retry after a 500, and the bound on an endpoint that never
//! answers (the session goes on meanwhile; the failure shows in `batond status` and the log,
//! with the secret part of the address left out).

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// What the local endpoint does with a request.
#[derive(Clone, Copy)]
enum Answer {
    Status(u16),
    /// Holds the connection open and says nothing until the client gives up on it.
    Never,
}

/// A request as the endpoint received it: its head and body, and how many connections the
/// endpoint was holding unanswered when it came.
struct Received {
    head: String,
    body: String,
    held: usize,
}

/// An HTTP endpoint on a loopback port that answers each request as `rule` says (given the
/// number of the connection, from 0, and the body); returns its address and the requests.
async fn endpoint(
    rule: impl Fn(usize, &str) -> Answer + Send + Sync + 'static,
) -> (String, mpsc::UnboundedReceiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let (tx, rx) = mpsc::unbounded_channel();
    let rule = Arc::new(rule);
    let held = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        let mut turn = 0;
        while let Ok((socket, _)) = listener.accept().await {
            let (tx, rule, held) = (tx.clone(), rule.clone(), held.clone());
            tokio::spawn(async move { serve(socket, turn, &*rule, &held, tx).await });
            turn += 1;
        }
    });
    (address, rx)
}

async fn serve(
    mut socket: TcpStream,
    turn: usize,
    rule: &(dyn Fn(usize, &str) -> Answer + Send + Sync),
    held: &AtomicUsize,
    tx: mpsc::UnboundedSender<Received>,
) {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head, body) = loop {
        let Ok(n) = socket.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&data).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
        let length = head
            .lines()
            .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        if body.len() >= length {
            break (head.to_string(), body.to_string());
        }
    };
    let answer = rule(turn, &body);
    let _ = tx.send(Received { head, body, held: held.load(Ordering::SeqCst) });
    match answer {
        Answer::Status(status) => {
            let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = socket.write_all(reply.as_bytes()).await;
        }
        Answer::Never => {
            held.fetch_add(1, Ordering::SeqCst);
            // Until the client closes the connection.
            while matches!(socket.read(&mut chunk).await, Ok(n) if n > 0) {}
            held.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

async fn next(requests: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(WAIT, requests.recv()).await.expect("a webhook request in time").expect("the endpoint runs")
}

async fn status(data_dir: &Path) -> String {
    let output = tokio::process::Command::new(batond())
        .args(["status", "--data-dir"])
        .arg(data_dir)
        .env_remove("BATON_DATA_DIR")
        .output()
        .await
        .expect("batond status");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn ntfy_and_slack_webhooks_hear_that_a_session_needs_the_user() {
    let (address, mut requests) = endpoint(|_, _| Answer::Status(200)).await;
    let env = TestEnv::new();
    env.agents_config(&format!(
        "[[notify.webhook]]\nurl = \"http://{address}/secret-topic\"\nformat = \"ntfy\"\n\n\
         [[notify.webhook]]\nurl = \"http://{address}/services/SECRET\"\nformat = \"slack\"\n\
         headers = {{ Authorization = \"Bearer hook-secret\" }}\n"
    ));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("Fix the login test", "hello", "mock", true)).await.expect("create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;

    let mut received = [next(&mut requests).await, next(&mut requests).await];
    received.sort_by_key(|r| r.head.contains("/services/"));
    let (ntfy, slack) = (&received[0], &received[1]);
    assert!(ntfy.head.starts_with("POST /secret-topic HTTP/1.1"), "{}", ntfy.head);
    assert!(ntfy.head.contains("title: Baton") || ntfy.head.contains("Title: Baton"), "{}", ntfy.head);
    assert_eq!(ntfy.body, "Fix the login test: the agent's turn is over");
    assert!(slack.head.starts_with("POST /services/SECRET HTTP/1.1"), "{}", slack.head);
    assert!(slack.head.to_ascii_lowercase().contains("authorization: bearer hook-secret"), "{}", slack.head);
    let body: serde_json::Value = serde_json::from_str(&slack.body).expect("JSON");
    assert_eq!(body["text"], "Fix the login test: the agent's turn is over");

    // Once per transition: the next turn's end is another one.
    assert_eq!(prompt(&client, &mut notes, &session_id, "/chunks 1").await, "c1 ");
    next(&mut requests).await;
    next(&mut requests).await;
    let shown = status(&env.data_dir).await;
    assert!(shown.contains(&format!("webhook http://{address}/…: ")), "{shown}");
    assert!(!shown.contains("secret-topic") && !shown.contains("SECRET"), "{shown}");
}

#[tokio::test]
async fn a_webhook_answered_500_is_tried_again() {
    let (address, mut requests) = endpoint(|turn, _| Answer::Status(if turn == 0 { 500 } else { 204 })).await;
    let env = TestEnv::new();
    env.agents_config(&format!("[[notify.webhook]]\nurl = \"http://{address}/hook\"\nbackoff_ms = 50\n"));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let first = next(&mut requests).await;
    let second = next(&mut requests).await;
    assert_eq!(first.body, second.body, "the same notice again");
    let body: serde_json::Value = serde_json::from_str(&second.body).expect("JSON");
    assert_eq!(body["session_id"], session_id.as_str());
    assert_eq!(body["attention"], "input");
    wait_log(&env.data_dir, "answered 500; trying again").await;
    // Delivered: recorded as sent once, no failure.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let shown = status(&env.data_dir).await;
        if shown.contains("1 sent, 0 failed") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{shown}");
        // `batond status` reads a file the server writes when the delivery ends: polled, bounded.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_webhook_that_never_answers_is_bounded_and_holds_up_nothing_else() {
    // The endpoint never answers about one task; it answers every other one at once.
    let (address, mut requests) =
        endpoint(|_, body| if body.contains("Stuck task") { Answer::Never } else { Answer::Status(200) }).await;
    let env = TestEnv::new();
    env.agents_config(&format!(
        "[[notify.webhook]]\nurl = \"http://{address}/never-secret\"\ntimeout_secs = 3\nretries = 1\nbackoff_ms = 50\n"
    ));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("Stuck task", "hello", "mock", true)).await.expect("create");
    let stuck = created.session.status.session_id;
    subscribe(&client, &stuck, Some(0)).await;
    collect_events(&mut notes, &stuck, is_turn_end).await;
    let first = next(&mut requests).await;
    assert!(first.body.contains(&stuck), "{}", first.body);

    // While the endpoint holds that delivery, sessions go on and the other one's notices arrive.
    let created = client.request(env.task("Other task", "hello", "mock", true)).await.expect("create");
    let other = created.session.status.session_id;
    subscribe(&client, &other, Some(0)).await;
    collect_events(&mut notes, &other, is_turn_end).await;
    assert_eq!(prompt(&client, &mut notes, &other, "/chunks 2").await, "c1 c2 ");
    let mut delivered = 0;
    while delivered < 2 {
        let received = next(&mut requests).await;
        if received.body.contains(&other) {
            assert!(received.held >= 1, "the other session's notice came while the stuck one was held");
            delivered += 1;
        }
    }

    wait_log(&env.data_dir, "no answer within 3s; giving up").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let shown = loop {
        let shown = status(&env.data_dir).await;
        if shown.contains("1 failed; last failure at") {
            break shown;
        }
        assert!(tokio::time::Instant::now() < deadline, "{shown}");
        // `batond status` reads a file the server writes when the delivery ends: polled, bounded.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(shown.contains(&format!("webhook http://{address}/…: 2 sent")), "{shown}");
    assert!(shown.contains("no answer within 3s"), "{shown}");
    let mut log = String::new();
    for entry in std::fs::read_dir(env.data_dir.join("logs")).expect("logs").flatten() {
        log.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    assert!(!log.contains("never-secret") && !shown.contains("never-secret"), "the path is a secret");
}
