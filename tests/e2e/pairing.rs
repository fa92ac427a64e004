//! Pairing a device end to end over real sockets: `batond pair` prints a QR code and the page's
//! address with a one-time code; `POST /login` exchanges it (once) for a device token; the
//! device connects over a real WebSocket with it, may watch and answer but not create a task;
//! `device.list` shows it; `device.revoke` closes its open connection at once and its token
//! stops working.

use crate::common;

use std::path::Path;
use std::time::Duration;

use baton_protocol::*;
use common::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `POST /login` with a code: (status line, body).
async fn exchange(addr: &str, code: &str) -> (String, String) {
    let (head, body) = exchange_with_head(addr, code).await;
    (head.lines().next().unwrap_or_default().to_string(), body)
}

/// The answer's head (status line and headers) and body.
async fn exchange_with_head(addr: &str, code: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("POST /login HTTP/1.1\r\nHost: {addr}\r\nBaton-Login: {code}\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response)).await.expect("answer in time").expect("read");
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_string(), body.to_string())
}

async fn batond_pair(data_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let args: Vec<&str> = std::iter::once("pair").chain(args.iter().copied()).collect();
    batond_run(&args, data_dir).await
}

/// The pairing code in `batond pair`'s output (the address's `login=`).
fn code_of(printed: &str) -> String {
    let at = printed.find("?login=").unwrap_or_else(|| panic!("no pairing address in {printed}"));
    printed[at + 7..].split_whitespace().next().expect("code").to_string()
}

#[tokio::test]
async fn a_paired_device_watches_and_answers_and_is_cut_off_when_revoked() {
    let env = TestEnv::new();
    let server = env.start().await;
    let addr = server.listen_addr();
    let (owner, mut owner_notes) = server.client().await;
    let session_id = started_session(&env, &owner, &mut owner_notes, "mock", "hello").await;

    let (ok, printed, stderr) = batond_pair(&env.data_dir, &["--name", "Ana's phone", "--host", "127.0.0.1"]).await;
    assert!(ok, "{stderr}");
    assert!(printed.lines().filter(|line| line.contains('█')).count() > 10, "a QR code: {printed}");
    assert!(printed.contains(&format!("http://{addr}/?login=pair-")), "{printed}");
    assert!(printed.contains("\"Ana's phone\" (it may watch and answer)"), "{printed}");
    assert!(printed.contains("without TLS"), "a plain server is warned about: {printed}");
    let code = code_of(&printed);

    // Exchanged once for a token of the device's own.
    let (status, body) = exchange(&addr, &code).await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let token = serde_json::from_str::<Value>(&body).expect("JSON")["token"].as_str().expect("token").to_string();
    assert_ne!(Some(&token), server.token.as_ref(), "the main token never leaves the machine");
    let (status, body) = exchange(&addr, &code).await;
    assert_eq!(status, "HTTP/1.1 401 Unauthorized", "used once: {body}");
    assert!(body.contains("used already, has expired"), "{body}");
    let stored = std::fs::read(env.data_dir.join("baton.db")).expect("the database");
    assert!(!stored.windows(token.len()).any(|w| w == token.as_bytes()), "the database holds no token, only hashes");

    // The device watches and answers over a real WebSocket...
    let device_options = ClientOptions { token: Some(token.clone()), ..ClientOptions::default() };
    let (device, mut device_notes) = Client::connect_with(&server.url, device_options.clone()).await.expect("device");
    subscribe(&device, &session_id, None).await;
    assert_eq!(prompt(&device, &mut device_notes, &session_id, "/chunks 2").await, "c1 c2 ");
    device.request(QueueListParams { session_id: session_id.clone() }).await.expect("a phone reads the queue");
    // ... but creates no task.
    let refused = server_error(device.request(env.task("From the phone", "hi", "mock", true)).await);
    assert_eq!(refused.code, ErrorCode::Forbidden);
    assert!(refused.message.contains("may only watch and answer, not task.create"), "{}", refused.message);
    assert_eq!(server_error(device.request(DeviceListParams {}).await).code, ErrorCode::Forbidden);

    // Listed by the owner, with its connection and address.
    let listed = owner.request(DeviceListParams {}).await.expect("device.list").devices;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let phone = &listed[0];
    assert_eq!((phone.name.as_str(), phone.limited, phone.connections), ("Ana's phone", true, 1));
    assert_eq!(phone.last_address.as_deref(), Some("127.0.0.1"));
    assert!(phone.last_seen_at.is_some());

    // Revoked: its open connection is closed at once, and the token opens nothing any more.
    let revoked = owner.request(DeviceRevokeParams { device_id: phone.device_id.clone() }).await.expect("revoke");
    assert_eq!(revoked.closed_connections, 1);
    let closed = tokio::time::timeout(WAIT, async {
        loop {
            match device_notes.recv().await {
                Some(ClientEvent::Closed) | None => return,
                Some(_) => continue,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the revoked device's connection was not closed");
    let error = Client::connect_with(&server.url, device_options).await.err().expect("the token is refused");
    assert!(error.to_string().contains("401"), "{error}");
    assert!(owner.request(DeviceListParams {}).await.expect("device.list").devices.is_empty());
    let again = server_error(owner.request(DeviceRevokeParams { device_id: phone.device_id.clone() }).await);
    assert_eq!(again.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_device_token_outlives_a_restart_and_a_full_device_may_create_tasks() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (owner, _notes) = server.client().await;
    let pairing = owner
        .request(DevicePairParams { name: Some("tablet".into()), full: true, expires_in_secs: Some(60) })
        .await
        .expect("device.pair");
    assert!(!pairing.limited && pairing.code.starts_with("pair-"));
    let (status, body) = exchange(&server.listen_addr(), &pairing.code).await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let token = serde_json::from_str::<Value>(&body).expect("JSON")["token"].as_str().expect("token").to_string();
    drop(owner);

    let server = server.restart().await;
    let options = ClientOptions { token: Some(token), ..ClientOptions::default() };
    let (device, _notes) = Client::connect_with(&server.url, options).await.expect("still paired after a restart");
    assert!(device.request(env.task("From the tablet", "hi", "mock", false)).await.is_ok());

    // Bad parameters are refused with a reason.
    let (owner, _notes) = server.client().await;
    let error = server_error(owner.request(DevicePairParams { expires_in_secs: Some(0), ..Default::default() }).await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    assert!(error.message.contains("expires_in_secs"), "{}", error.message);
}

#[tokio::test]
async fn wrong_codes_are_rate_limited() {
    let env = TestEnv::new();
    let server = env.start().await;
    let addr = server.listen_addr();
    for _ in 0..10 {
        let (status, _) = exchange(&addr, "pair-guess").await;
        assert_eq!(status, "HTTP/1.1 401 Unauthorized");
    }
    let (owner, _notes) = server.client().await;
    let pairing = owner.request(DevicePairParams::default()).await.expect("device.pair");
    let (head, body) = exchange_with_head(&addr, &pairing.code).await;
    assert!(head.starts_with("HTTP/1.1 429 Too Many Requests"), "{head}\n{body}");
    assert!(body.contains("too many wrong"), "{body}");
    // When to try again: the first failure leaves the minute's window within 60 s.
    let retry_after: u64 = head
        .lines()
        .find_map(|line| line.split_once(':').filter(|(name, _)| name.eq_ignore_ascii_case("retry-after")))
        .and_then(|(_, secs)| secs.trim().parse().ok())
        .unwrap_or_else(|| panic!("a Retry-After in seconds: {head}"));
    assert!((1..=60).contains(&retry_after), "{head}");
    assert!(body.contains(&format!("try again in {retry_after} s")), "{body}");
    // Nothing else is slowed down meanwhile.
    tokio::time::timeout(Duration::from_secs(5), server.client()).await.expect("connections still work");
}

#[tokio::test]
async fn pair_needs_a_running_server() {
    let env = TestEnv::new();
    let (ok, _, stderr) = batond_pair(&env.data_dir, &[]).await;
    assert!(!ok);
    assert!(stderr.contains("no batond is running on"), "{stderr}");
}

/// The page in Chromium, opened by a pairing link as a phone's camera would: paired once, it
/// stays connected across a reload with the device's own token; the link does not work twice;
/// the page with the server's own token lists it (connected, from where) and revokes it
/// (asked first): the phone's page is cut off at once and asks for a token.
#[tokio::test]
async fn the_page_pairs_by_its_link_and_is_cut_off_when_revoked() {
    use crate::common::chromium::{browser_installed, Chromium};
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (owner, _notes) = server.client().await;
    let pairing = owner.request(DevicePairParams { name: Some("phone".into()), ..Default::default() }).await;
    let link = format!("http://{}/?login={}", server.listen_addr(), pairing.expect("device.pair").code);

    let chromium = Chromium::start().await;
    chromium.browser.goto(&link).await.expect("open the pairing link");
    chromium.wait_text("#connection", "connected", true).await;
    let url = chromium.browser.current_url().await.expect("url");
    assert!(!url.as_str().contains("pair-"), "the code leaves the address bar: {url}");
    chromium.browser.refresh().await.expect("reload");
    chromium.wait_text("#connection", "connected", true).await;
    let devices = owner.request(DeviceListParams {}).await.expect("device.list").devices;
    assert_eq!(devices.len(), 1, "{devices:?}");
    assert_eq!(devices[0].connections, 1, "{devices:?}");

    // Used once: the same link in another browser pairs nothing.
    let second = Chromium::start().await;
    second.browser.goto(&link).await.expect("open the used link");
    second.wait_text("#connection", "the server refused this page", false).await;
    second.browser.clone().close().await.expect("close the second browser");

    // A paired page does not offer the devices' list (its token may not read it).
    chromium.wait_until("no Devices button", "document.querySelector('#devices-open').hidden").await;

    // The page with the server's own token lists the phone and revokes it.
    let desk = Chromium::start().await;
    let token = server.token.clone().expect("the server's token");
    desk.browser.goto(&format!("http://{}/?token={token}", server.listen_addr())).await.expect("open the page");
    desk.wait_text("#connection", "connected", true).await;
    desk.click("#devices-open").await;
    let item = format!("#devices-list li[data-device-id='{}']", devices[0].device_id);
    desk.wait_text(&format!("{item} .tool"), "phone · watch and answer", true).await;
    desk.wait_text(&format!("{item} .since"), "connected (1) · seen", false).await;
    desk.wait_text(&format!("{item} .since"), "from 127.0.0.1", false).await;
    desk.screenshot("paired_devices").await;
    desk.click(&format!("{item} button.revoke")).await;
    desk.answer_ok("Revoke “phone”?").await;
    desk.wait_text("#devices-list li.empty", "No paired device.", true).await;
    chromium.wait_text("#connection", "the server refused this page", false).await;
    assert!(owner.request(DeviceListParams {}).await.expect("device.list").devices.is_empty());
    desk.browser.clone().close().await.expect("close the browser");
    chromium.browser.clone().close().await.expect("close the browser");
}

/// A pairing link opened after its code expired pairs nothing: the page is refused and asks
/// for a token, and no device is added.
#[tokio::test]
async fn the_page_refuses_an_expired_pairing_link() {
    use crate::common::chromium::{browser_installed, Chromium};
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (owner, _notes) = server.client().await;
    let params = DevicePairParams { name: Some("late phone".into()), expires_in_secs: Some(1), ..Default::default() };
    let pairing = owner.request(params).await.expect("device.pair");
    let link = format!("http://{}/?login={}", server.listen_addr(), pairing.code);
    // The code's lifetime is what is tested: wait it out (its expiry is a time, not an event).
    let expires = chrono::DateTime::parse_from_rfc3339(&pairing.expires_at).expect("expires_at");
    let left = (expires.with_timezone(&chrono::Utc) - chrono::Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(left + Duration::from_millis(100)).await;

    let chromium = Chromium::start().await;
    chromium.browser.goto(&link).await.expect("open the expired link");
    chromium.wait_text("#connection", "the server refused this page", false).await;
    let devices = owner.request(DeviceListParams {}).await.expect("device.list").devices;
    assert!(devices.is_empty(), "an expired code pairs nothing: {devices:?}");
    chromium.browser.clone().close().await.expect("close the browser");
}
