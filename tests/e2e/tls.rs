//! HTTPS and WSS: batond with a self-signed certificate (made once, its fingerprint pinned by
//! the client) and with a certificate of a CA made here (trusted by the Rust client through its
//! CA file and by the JavaScript client through Node's extra CA certificates); the warning for
//! listening beyond loopback without TLS.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use baton_protocol::*;
use common::*;
use tokio::process::Command;

/// A CA and a server certificate it issued for `localhost` and 127.0.0.1, as PEM files in
/// `dir`: (CA certificate, server certificate, server key).
fn test_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "Baton test CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA");
    let server_key = KeyPair::generate().expect("server key");
    let server = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("server params")
        .signed_by(&server_key, &ca)
        .expect("server certificate");
    let paths = (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"));
    std::fs::write(&paths.0, ca.as_ref().pem()).expect("write the CA");
    std::fs::write(&paths.1, server.pem()).expect("write the certificate");
    std::fs::write(&paths.2, server_key.serialize_pem()).expect("write the key");
    (paths.0, paths.1, paths.2)
}

/// Runs `batond ARGS --data-dir DIR`; its stdout.
async fn batond_stdout(args: &[&str], data_dir: &Path) -> String {
    let output = Command::new(batond())
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("BATON_DATA_DIR")
        .output()
        .await
        .expect("run batond");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn connect_error(result: Result<(Client, Notifications), ClientError>) -> String {
    match result {
        Ok(_) => panic!("the connection was not refused"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn wss_with_a_self_signed_certificate_is_pinned_by_its_fingerprint() {
    let env = TestEnv::new();
    let server = env.start_with(&["--tls", "self-signed"]).await;
    assert!(server.url.starts_with("wss://127.0.0.1:"), "{}", server.url);
    assert!(server.page.as_deref().is_some_and(|page| page.starts_with("https://")), "{:?}", server.page);
    let fingerprint = server.fingerprint.clone().expect("batond printed the certificate's fingerprint");
    assert_eq!(fingerprint.len(), 95, "{fingerprint}");
    let status = batond_stdout(&["status"], &env.data_dir).await;
    assert!(status.contains(&format!("TLS certificate SHA-256 fingerprint: {fingerprint}")), "{status}");

    // Pinned: a real session over WSS.
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello over tls").await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "/chunks 3").await, "c1 c2 c3 ");

    // Not pinned: nobody vouches for a self-signed certificate.
    let unpinned = ClientOptions { fingerprint: None, ..server.client_options() };
    let error = connect_error(Client::connect_with(&server.url, unpinned).await);
    assert!(error.contains("self-signed certificate: pin its fingerprint"), "{error}");
    // Another fingerprint: refused, saying which certificate was offered.
    let wrong = baton_testkit::another_fingerprint(&fingerprint);
    let pinned_wrong = ClientOptions { fingerprint: Some(wrong), ..server.client_options() };
    let error = connect_error(Client::connect_with(&server.url, pinned_wrong).await);
    assert!(error.contains(&format!("has the fingerprint {fingerprint}, not the pinned one")), "{error}");
    // Plain WebSocket to a TLS port gets no Baton connection.
    let plain = server.url.replace("wss://", "ws://");
    let unfinned = ClientOptions { fingerprint: None, ..server.client_options() };
    assert!(Client::connect_with(&plain, unfinned).await.is_err());
    // A fingerprint for a ws:// URL would check nothing: refused before connecting.
    let error = connect_error(Client::connect_with(&plain, server.client_options()).await);
    assert!(error.contains("not a wss:// URL"), "{error}");

    // Made once: the next start serves the same certificate.
    drop((client, notes));
    let server = server.restart().await;
    assert_eq!(server.fingerprint.as_deref(), Some(fingerprint.as_str()));
    let (client, _notes) = server.client().await;
    assert!(client.request(SessionListParams::default()).await.is_ok());
    drop(client);
    server.stop().await;
    let status = batond_stdout(&["status"], &env.data_dir).await;
    assert!(status.contains(&format!("self-signed TLS certificate SHA-256 fingerprint: {fingerprint}")), "{status}");
}

#[tokio::test]
async fn wss_with_a_given_certificate_is_trusted_through_its_ca_by_the_rust_and_js_clients() {
    let env = TestEnv::new();
    let (ca, cert, key) = test_ca(&env.workdir);
    let server =
        env.start_with(&["--tls-cert", cert.to_str().expect("utf-8"), "--tls-key", key.to_str().expect("utf-8")]).await;
    let url = server.url.clone();
    let by_name = url.replace("127.0.0.1", "localhost");
    for address in [&url, &by_name] {
        let options = ClientOptions { fingerprint: None, ca_file: Some(ca.clone()), ..server.client_options() };
        let (client, _notes) =
            Client::connect_with(address, options).await.unwrap_or_else(|e| panic!("{address}: {e}"));
        assert!(client.request(SessionListParams::default()).await.is_ok());
    }
    // The printed fingerprint pins the given certificate just as well.
    let (client, _notes) = server.client().await;
    let created = client.request(env.task("Over TLS", "remember the blue door", "mock", true)).await.expect("create");
    let session_id = created.session.status.session_id;
    // Without the CA: an unknown issuer.
    let untrusted = ClientOptions { fingerprint: None, ..server.client_options() };
    let error = connect_error(Client::connect_with(&url, untrusted).await);
    assert!(error.contains("UnknownIssuer"), "{error}");

    // The JavaScript client, with the CA added to Node's trusted certificates.
    let Ok(version) = std::process::Command::new("node").arg("--version").output() else {
        eprintln!("SKIPPED the JavaScript part: `node` is not installed");
        return;
    };
    let major: u32 = String::from_utf8_lossy(&version.stdout)
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 20 {
        eprintln!("SKIPPED the JavaScript part: node {major} has no WebSocket");
        return;
    }
    let mut node = Command::new("node");
    if major < 22 {
        node.arg("--experimental-websocket");
    }
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/node-client.mjs");
    let run = node
        .arg(example)
        .env("BATON_URL", &by_name)
        .env("BATON_TOKEN", server.token.as_deref().expect("the server's token"))
        .env("NODE_EXTRA_CA_CERTS", &ca)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(WAIT, run).await.expect("node finished").expect("run node");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(&session_id) && stdout.contains("Over TLS"), "{stdout}\n{stderr}");
}

/// Chromium's pin of a server key: the base64 SHA-256 of its SubjectPublicKeyInfo, as
/// `--ignore-certificate-errors-spki-list` takes it.
fn spki_pin(key_pem: &Path) -> String {
    use base64::Engine;
    use rcgen::PublicKeyData;
    use sha2::{Digest, Sha256};
    let pem = std::fs::read_to_string(key_pem).expect("read the key");
    let key = rcgen::KeyPair::from_pem(&pem).expect("a key");
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(key.subject_public_key_info()))
}

/// The page over HTTPS and WSS in Chromium, which trusts the test CA's server certificate (by
/// its key's pin: Chromium's own store is not touched): it connects, lists the session, and
/// streams a turn over the encrypted WebSocket. Without the pin Chromium refuses the page.
#[tokio::test]
async fn the_page_works_over_https_and_wss_in_chromium() {
    use crate::common::chromium::{browser_installed, Chromium};
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let (_ca, cert, key) = test_ca(&env.workdir);
    let server =
        env.start_with(&["--tls-cert", cert.to_str().expect("utf-8"), "--tls-key", key.to_str().expect("utf-8")]).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember the tiled roof").await;
    let page = server.page.clone().expect("batond prints the page's address");
    assert!(page.starts_with("https://"), "{page}");

    let untrusting = Chromium::start().await;
    let refused = untrusting.browser.goto(&page).await;
    let shown = untrusting.browser.source().await.unwrap_or_default();
    assert!(refused.is_err() || !shown.contains("id=\"sessions\""), "an unknown certificate is refused");
    untrusting.browser.clone().close().await.expect("close the browser");

    let chromium = Chromium::start_with(
        &[format!("--ignore-certificate-errors-spki-list={}", spki_pin(&key))],
        serde_json::json!({}),
    )
    .await;
    chromium.browser.goto(&page).await.expect("open the page");
    chromium.wait_text("#connection", "connected", true).await;
    let scheme = chromium.browser.execute("return location.protocol", vec![]).await.expect("protocol");
    assert_eq!(scheme, serde_json::json!("https:"));
    let row = format!("button.session[data-session-id='{session_id}']");
    chromium.click(&row).await;
    chromium.wait_text("#transcript li.user", "remember the tiled roof", true).await;
    chromium.fill("#prompt", "what did I ask you to remember?").await;
    chromium.click("#send").await;
    chromium.wait_text("#transcript li.agent", "You asked me to remember the tiled roof.", true).await;
    chromium.browser.clone().close().await.expect("close the browser");
    server.stop().await;
}

/// `undici` of an npm install under target/ (once); None, after saying why, where impossible.
fn undici() -> Option<PathBuf> {
    const UNDICI: &str = "undici@7.30.3";
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("undici");
        let ready = dir.join(".installed");
        if std::fs::read_to_string(&ready).is_ok_and(|v| v == UNDICI) {
            return Some(dir);
        }
        std::fs::create_dir_all(&dir).ok()?;
        let install = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&dir)
            .arg(UNDICI)
            .output();
        match install {
            Ok(out) if out.status.success() && dir.join("node_modules/undici/index.js").is_file() => {
                std::fs::write(&ready, UNDICI).ok()?;
                Some(dir)
            }
            Ok(out) => {
                eprintln!(
                    "SKIPPED the pinned JavaScript client: npm install {UNDICI} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED the pinned JavaScript client: npm could not run: {e}");
                None
            }
        }
    })
    .clone()
}

/// The JavaScript client in Node pinned to a self-signed certificate by the fingerprint batond
/// printed (written another way): connected and answered; another fingerprint is refused
/// before anything is sent, saying which certificate was offered; what cannot be pinned (no
/// undici, a ws:// URL, not a fingerprint) is refused at once.
#[tokio::test]
async fn the_js_client_in_node_pins_a_self_signed_certificate() {
    let Ok(version) = std::process::Command::new("node").arg("--version").output() else {
        eprintln!("SKIPPED the pinned JavaScript client: `node` is not installed");
        return;
    };
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let Some(undici) = undici() else { return };
    let env = TestEnv::new();
    let server = env.start_with(&["--tls", "self-signed"]).await;
    let fingerprint = server.fingerprint.clone().expect("batond printed the certificate's fingerprint");
    let (client, _notes) = server.client().await;
    client.request(env.task("Pinned", "", "mock", false)).await.expect("task.create");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/js_pinned.mjs");
    let run = Command::new("node")
        .arg(script)
        .arg(&server.url)
        .arg(server.token.as_deref().expect("the server's token"))
        .arg(&fingerprint)
        .arg(&undici)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(WAIT, run).await.expect("node finished").expect("run node");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "node {version}: {stdout}\n{stderr}");
    let lines: Vec<serde_json::Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect();
    assert_eq!(lines[0], serde_json::json!({"connected": 1, "sessions": ["Pinned"]}), "{stdout}");
    let refused = lines[1]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains(&format!("has the fingerprint {fingerprint}, not the pinned one")), "{stdout}");
    assert_eq!(lines[1]["opened"], serde_json::json!(false));
    assert!(lines[2]["no undici"].as_str().is_some_and(|m| m.contains("needs the undici package")), "{stdout}");
    assert!(lines[3]["ws://"].as_str().is_some_and(|m| m.contains("not wss://")), "{stdout}");
    assert!(
        lines[4]["not a fingerprint"].as_str().is_some_and(|m| m.contains("not a SHA-256 fingerprint")),
        "{stdout}"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_config_file_can_ask_for_tls() {
    let env = TestEnv::new();
    env.agents_config("[tls]\nself_signed = true\n");
    let server = env.start().await;
    assert!(server.url.starts_with("wss://"), "{}", server.url);
    let (client, _notes) = server.client().await;
    assert!(client.request(SessionListParams::default()).await.is_ok());
    // --insecure-no-tls overrides the file (for a TLS proxy in front).
    drop(client);
    server.stop().await;
    let server = env.start_with(&["--insecure-no-tls"]).await;
    assert!(server.url.starts_with("ws://"), "{}", server.url);
}

/// The log file of a server that ran until its log said where it listens (the file is written
/// by a thread of its own, which a loaded machine can hold back past the stop's one-second flush:
/// the test waits for the line rather than for the stop).
async fn log_of_a_run(env: &TestEnv, args: &[&str]) -> String {
    let server = env.server().listen("0.0.0.0:0").args(args).start().await;
    let read = || {
        let mut text = String::new();
        for entry in std::fs::read_dir(env.data_dir.join("logs")).into_iter().flatten().flatten() {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
        text
    };
    until("the log to say where batond listens", || read().contains("batond listening")).await;
    server.stop().await;
    read()
}

#[tokio::test]
async fn listening_beyond_loopback_without_tls_is_warned_about_unless_silenced() {
    let warned = log_of_a_run(&TestEnv::new(), &[]).await;
    assert!(
        warned.contains("without TLS: the token and everything clients see and send cross the network"),
        "{warned}"
    );
    let silenced = log_of_a_run(&TestEnv::new(), &["--insecure-no-tls"]).await;
    assert!(silenced.contains("batond listening") && !silenced.contains("without TLS"), "{silenced}");
    let with_tls = log_of_a_run(&TestEnv::new(), &["--tls", "self-signed"]).await;
    assert!(with_tls.contains("batond listening") && !with_tls.contains("without TLS"), "{with_tls}");
}
