//! Web Push against a push service written here (a local HTTP endpoint): a paired phone
//! subscribes (`push.subscribe`, with a P-256 key and an auth secret of the test's own, as a
//! browser makes them); when its session starts needing the user the endpoint receives a push
//! whose VAPID token (RFC 8292) it checks against the server's `push.key` and whose payload
//! it decrypts (RFC 8291, written here from the RFC); the push's Allow action, sent as the
//! page's service worker sends it (`POST /push/answer`, no token), answers the permission
//! request, and only once.

use crate::common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use baton_protocol::*;
use common::*;
use ring::{aead, agreement, hkdf, signature};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A push as the endpoint received it.
struct Pushed {
    head: String,
    body: Vec<u8>,
}

impl Pushed {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_string())
        })
    }
}

/// A push service on a loopback port: answers 201 to every POST; returns its address and the
/// pushes.
async fn push_service() -> (String, mpsc::UnboundedReceiver<Pushed>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move { receive(socket, tx).await });
        }
    });
    (address, rx)
}

async fn receive(mut socket: TcpStream, tx: mpsc::UnboundedSender<Pushed>) {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&chunk[..n]);
        let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&data[..end]).into_owned();
        let pushed = Pushed { head, body: data[end + 4..].to_vec() };
        let length = pushed.header("content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
        if pushed.body.len() >= length {
            let _ = tx.send(pushed);
            let _ = socket.write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
            return;
        }
    }
}

async fn next(pushes: &mut mpsc::UnboundedReceiver<Pushed>) -> Pushed {
    tokio::time::timeout(WAIT, pushes.recv()).await.expect("a push in time").expect("the push service runs")
}

/// Checks the VAPID token of a push to `audience` (RFC 8292 §2 and §3): ES256 signed by `key`.
fn check_vapid(pushed: &Pushed, audience: &str, key: &str) {
    let authorization = pushed.header("authorization").expect("an Authorization header");
    let rest = authorization.strip_prefix("vapid ").expect("the vapid scheme");
    let mut token = None;
    let mut k = None;
    for part in rest.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => token = Some(value.to_string()),
            Some(("k", value)) => k = Some(value.to_string()),
            _ => {}
        }
    }
    assert_eq!(k.as_deref(), Some(key), "k is the server's push.key");
    let token = token.expect("t=");
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "a JWS: {token}");
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).expect("b64")).expect("JSON");
    assert_eq!(header["alg"], "ES256");
    let public = URL_SAFE_NO_PAD.decode(key).expect("the key in base64url");
    let signed = format!("{}.{}", parts[0], parts[1]);
    signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &public)
        .verify(signed.as_bytes(), &URL_SAFE_NO_PAD.decode(parts[2]).expect("b64"))
        .expect("the VAPID signature verifies with the server's key");
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("JSON");
    assert_eq!(claims["aud"], audience);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let exp = claims["exp"].as_u64().expect("exp");
    assert!(exp > now && exp <= now + 24 * 3600, "exp within 24 hours: {claims}");
    assert!(claims["sub"].as_str().is_some_and(|s| s.starts_with("mailto:") || s.starts_with("https:")), "{claims}");
}

struct Len(usize);
impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn expand(prk: &hkdf::Prk, info: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    prk.expand(&[info], Len(len)).expect("expand").fill(&mut out).expect("fill");
    out
}

/// The receiving side of RFC 8291 (with RFC 8188's `aes128gcm` header): the payload, from the
/// subscription's private key (used once), its public key and auth secret.
fn decrypt(body: &[u8], ua_private: agreement::EphemeralPrivateKey, ua_public: &[u8], auth: &[u8]) -> Vec<u8> {
    let (salt, rest) = body.split_at(16);
    let record_size = u32::from_be_bytes(rest[..4].try_into().expect("rs"));
    assert!(record_size >= 18, "rs {record_size}");
    let id_len = rest[4] as usize;
    assert_eq!(id_len, 65, "the key id is the server's ECDH public key");
    let as_public = &rest[5..5 + id_len];
    let ciphertext = &rest[5 + id_len..];
    let peer = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, as_public);
    let ecdh = agreement::agree_ephemeral(ua_private, &peer, |secret| secret.to_vec()).expect("ECDH");
    let prk_key = hkdf::Salt::new(hkdf::HKDF_SHA256, auth).extract(&ecdh);
    let mut info = b"WebPush: info\0".to_vec();
    info.extend_from_slice(ua_public);
    info.extend_from_slice(as_public);
    let ikm = expand(&prk_key, &info, 32);
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(&ikm);
    let cek = expand(&prk, b"Content-Encoding: aes128gcm\0", 16);
    let nonce = expand(&prk, b"Content-Encoding: nonce\0", 12);
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, &cek).expect("key"));
    let mut record = ciphertext.to_vec();
    let nonce = aead::Nonce::try_assume_unique_for_key(&nonce).expect("nonce");
    let plain = key.open_in_place(nonce, aead::Aad::empty(), &mut record).expect("the payload decrypts");
    // The last record ends with 2, then optional zero padding.
    let end = plain.iter().rposition(|&b| b != 0).expect("a delimiter");
    assert_eq!(plain[end], 2, "the last record's delimiter");
    plain[..end].to_vec()
}

/// `POST /push/answer` as the service worker sends it: (status line, body).
async fn answer(addr: &str, capability: &str, answer: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "POST /push/answer HTTP/1.1\r\nHost: {addr}\r\nBaton-Capability: {capability}\r\nBaton-Answer: {answer}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response)).await.expect("answer in time").expect("read");
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.lines().next().unwrap_or_default().to_string(), body.to_string())
}

/// A device token for a new limited device, paired as the page pairs.
async fn paired_device(owner: &Client, addr: &str) -> String {
    let code = owner.request(DevicePairParams::default()).await.expect("device.pair").code;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("POST /login HTTP/1.1\r\nHost: {addr}\r\nBaton-Login: {code}\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response)).await.expect("answer in time").expect("read");
    let text = String::from_utf8_lossy(&response).into_owned();
    let body = text.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default();
    serde_json::from_str::<Value>(body).expect("JSON")["token"].as_str().expect("token").to_string()
}

#[tokio::test]
async fn a_permission_push_is_encrypted_signed_and_its_allow_answers_once() {
    let (service, mut pushes) = push_service().await;
    let env = TestEnv::new();
    let server = env.start().await;
    let addr = server.listen_addr();
    let (owner, mut notes) = server.client().await;
    let session_id = started_session(&env, &owner, &mut notes, "mock", "hello").await;
    let key_file = env.data_dir.join("push-vapid.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).expect("the VAPID key").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the VAPID key is private");
    }

    // A phone subscribes with keys of its own, as a browser's PushManager makes them.
    let token = paired_device(&owner, &addr).await;
    let options = ClientOptions { token: Some(token), ..ClientOptions::default() };
    let (phone, _phone_notes) = Client::connect_with(&server.url, options).await.expect("the phone connects");
    let public_key = phone.request(PushKeyParams {}).await.expect("push.key").public_key;
    let rng = ring::rand::SystemRandom::new();
    let ua_private = agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &rng).expect("key");
    let ua_public = ua_private.compute_public_key().expect("public").as_ref().to_vec();
    let auth = [7u8; 16];
    let endpoint = format!("http://{service}/push/v2/phone-1");
    let subscribed = phone
        .request(PushSubscribeParams {
            endpoint: endpoint.clone(),
            p256dh: URL_SAFE_NO_PAD.encode(&ua_public),
            auth: URL_SAFE_NO_PAD.encode(auth),
        })
        .await
        .expect("push.subscribe");
    assert!(subscribed.subscription_id.starts_with("push-"), "{subscribed:?}");

    // The agent asks for a permission: one push, signed and encrypted for the phone.
    owner.request(MessageAddParams::new(&session_id, "/permission")).await.expect("message.add");
    let pushed = next(&mut pushes).await;
    assert!(pushed.head.starts_with("POST /push/v2/phone-1 HTTP/1.1"), "{}", pushed.head);
    assert_eq!(pushed.header("content-encoding").as_deref(), Some("aes128gcm"));
    assert!(pushed.header("ttl").is_some_and(|ttl| ttl.parse::<u32>().is_ok()), "{}", pushed.head);
    check_vapid(&pushed, &format!("http://{service}"), &public_key);
    let payload = decrypt(&pushed.body, ua_private, &ua_public, &auth);
    let payload: Value = serde_json::from_slice(&payload).expect("a JSON payload");
    assert_eq!(payload["session_id"], session_id.as_str());
    assert_eq!(payload["attention"], "permission");
    assert_eq!(payload["body"], "t: the agent asks for a permission: edit Write file", "{payload}");
    assert_eq!(payload["url"], format!("/?session={session_id}"));
    let actions: Vec<&str> =
        payload["actions"].as_array().expect("actions").iter().filter_map(|a| a["action"].as_str()).collect();
    assert_eq!(actions, ["allow", "reject"]);
    let capability = payload["capability"].as_str().expect("a capability").to_string();

    // Allow, from the notification: the request is answered, once.
    let (status, body) = answer(&addr, &capability, "allow").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).expect("JSON")["option_id"], "allow");
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    let answered: Vec<Option<&str>> = events
        .iter()
        .filter_map(|record| match &record.event {
            SessionEvent::PermissionResolved { option_id, .. } => Some(option_id.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, [Some("allow")], "answered once, with Allow");
    let said: String = events
        .iter()
        .filter_map(|record| match &record.event {
            SessionEvent::MessageChunk { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(said, "Permission outcome: selected allow");
    let (status, body) = answer(&addr, &capability, "reject").await;
    assert_eq!(status, "HTTP/1.1 410 Gone", "used once: {body}");
    let (status, _) = answer(&addr, "cap-0123456789abcdef0123456789abcdef", "allow").await;
    assert_eq!(status, "HTTP/1.1 410 Gone", "a code never given");

    // The turn's end is the next transition: one push, no second one for the permission.
    let pushed = next(&mut pushes).await;
    assert!(pushed.head.starts_with("POST /push/v2/phone-1 HTTP/1.1"), "{}", pushed.head);
    assert!(pushes.try_recv().is_err(), "one push per transition");
    check_vapid(&pushed, &format!("http://{service}"), &public_key);

    // A revoked phone's subscription goes with it.
    let devices = owner.request(DeviceListParams {}).await.expect("device.list").devices;
    owner.request(DeviceRevokeParams { device_id: devices[0].device_id.clone() }).await.expect("device.revoke");
    let removed = owner.request(PushUnsubscribeParams { endpoint }).await.expect("push.unsubscribe").removed;
    assert!(!removed, "the revoked device's subscription was dropped with it");
}

#[tokio::test]
async fn push_subscriptions_are_checked_and_forgotten() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (owner, _notes) = server.client().await;
    let bad = owner
        .request(PushSubscribeParams { endpoint: "ftp://x/y".into(), p256dh: "A".repeat(87), auth: "B".repeat(22) })
        .await;
    assert_eq!(server_error(bad).code, ErrorCode::ValidationError);
    let params = PushSubscribeParams {
        endpoint: "https://push.example.net/send/1".into(),
        p256dh: "A".repeat(87),
        auth: "B".repeat(22),
    };
    let first = owner.request(params.clone()).await.expect("push.subscribe");
    let again = owner.request(params.clone()).await.expect("push.subscribe again");
    assert_eq!(first.subscription_id, again.subscription_id, "the same endpoint is one subscription");
    let removed = owner.request(PushUnsubscribeParams { endpoint: params.endpoint.clone() }).await;
    assert!(removed.expect("push.unsubscribe").removed);
    let removed = owner.request(PushUnsubscribeParams { endpoint: params.endpoint }).await;
    assert!(!removed.expect("push.unsubscribe").removed);
}

/// The page in Chromium registers its service worker (`/sw.js`, scope `/`) on load, and a
/// push notification's address (`/?session=ID`) opens that session, with the pending request's
/// input and diff and its buttons. Chromium here cannot
/// reach a real push service, so the subscription itself is left to the test above.
#[tokio::test]
async fn the_page_registers_its_service_worker_and_opens_a_pushed_session() {
    use crate::common::chromium::{browser_installed, Chromium};
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (owner, mut notes) = server.client().await;
    let session_id = started_session(&env, &owner, &mut notes, "mock", "hello").await;
    // What a permission push opens: the session, with the request's input and diff in view.
    owner.request(MessageAddParams::new(&session_id, "/permission always")).await.expect("message.add");
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::PermissionRequest { .. })).await;
    let token = server.token.clone().expect("the server's token");
    let chromium = Chromium::start().await;
    let page = format!("http://{}/?token={token}&session={session_id}", server.listen_addr());
    chromium.browser.goto(&page).await.expect("open the page");
    chromium.wait_text("#connection", "connected", true).await;
    chromium
        .wait_until("the pushed session is open", "document.querySelector('#session-title').textContent === 't'")
        .await;
    chromium.wait_text("#transcript li.permission pre.input", "\"path\": \"src/lib.rs\"", false).await;
    chromium.wait_text("#transcript li.permission pre .add", "+     42", false).await;
    chromium.wait_until("the request's buttons", "document.querySelector('#transcript li.permission button')").await;
    chromium
        .wait_until(
            "the service worker is registered",
            "document.querySelector('#notify-me').dataset.push === 'registered'",
        )
        .await;
    let scope = chromium
        .browser
        .execute_async(
            "const done = arguments[0]; navigator.serviceWorker.getRegistration('/').then(r => done(r ? r.scope + ' ' + (r.active ? r.active.scriptURL : '') : ''))",
            vec![],
        )
        .await
        .expect("the registration");
    let scope = scope.as_str().unwrap_or_default().to_string();
    let origin = format!("http://{}", server.listen_addr());
    assert_eq!(scope, format!("{origin}/ {origin}/sw.js"), "scope and script");
    let url = chromium.browser.current_url().await.expect("url");
    assert!(!url.as_str().contains("session="), "the session leaves the address bar: {url}");
    chromium.browser.clone().close().await.expect("close the browser");
}

/// With notifications allowed, the page in Chromium goes as far as Web Push goes offline: it
/// registers its service worker, asks the server for its key and asks the browser's push
/// service for a subscription, which this machine cannot reach (Chromium's subscription then
/// never settles); the page says so on `#notify-me` (`not subscribed: REASON`, after 10 s) and
/// keeps working.
#[tokio::test]
async fn the_page_subscribes_to_push_as_far_as_the_browser_can_offline() {
    use crate::common::chromium::{browser_installed, Chromium};
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let token = server.token.clone().expect("the server's token");
    let allowed = serde_json::json!({ "profile.default_content_setting_values.notifications": 1 });
    let chromium = Chromium::start_with(&[], allowed).await;
    chromium.browser.goto(&format!("http://{}/?token={token}", server.listen_addr())).await.expect("open the page");
    chromium.wait_text("#connection", "connected", true).await;
    let permission = chromium.browser.execute("return Notification.permission", vec![]).await.expect("permission");
    assert_eq!(permission, serde_json::json!("granted"), "notifications are allowed in this profile");
    chromium
        .wait_until(
            "the page to try a subscription",
            "(document.querySelector('#notify-me').dataset.push || '').includes('subscribed')",
        )
        .await;
    let said = chromium
        .browser
        .execute("return document.querySelector('#notify-me').dataset.push", vec![])
        .await
        .expect("data-push");
    let said = said.as_str().unwrap_or_default().to_string();
    match said.strip_prefix("not subscribed: ") {
        // No push service can be reached from here: the browser refuses (its reason), or never
        // answers, which the page says after a while.
        Some(reason) => assert!(!reason.trim().is_empty(), "a reason is given: {said}"),
        None => assert_eq!(said, "subscribed", "{said}"),
    }
    eprintln!("[web-push] Chromium offline: {said}");
    // The page still works.
    let (client, mut notes) = server.client().await;
    started_session(&env, &client, &mut notes, "mock", "hello").await;
    chromium.wait_text("nav .task", "t", true).await;
    chromium.browser.clone().close().await.expect("close the browser");
}
