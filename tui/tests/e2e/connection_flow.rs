//! Connection failures against real sockets, explained in the status bar: a refused token stops
//! the retries, another program on the port is named as such, and a server baton did not start
//! is only reconnected to. And the launcher: which server is ours, and why one we started
//! exited.

use std::path::{Path, PathBuf};
use std::time::Instant;

use baton_protocol::{Client, ClientError, ClientOptions};
use baton_tui::app::{App, ConnectionState};
use baton_tui::command::Command;
use baton_tui::command::ServerRestart;
use baton_tui::launcher::{connect_or_launch, restart_server, LaunchOptions, STDERR_FILE, URL_FILE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::common::*;

/// A program on a local port that answers every connection with `answer` and hangs up.
async fn foreign_server(answer: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = [0u8; 2048];
            let _ = socket.read(&mut request).await;
            let _ = socket.write_all(answer.as_bytes()).await;
        }
    });
    format!("ws://127.0.0.1:{port}/ws")
}

async fn connect_error(url: &str, token: Option<&str>) -> ClientError {
    let options = ClientOptions { token: token.map(str::to_string), ..ClientOptions::default() };
    match Client::connect_with(url, options).await {
        Ok(_) => panic!("{url} accepted the connection"),
        Err(error) => error,
    }
}

fn status_line(app: &App) -> String {
    let screen = render(app);
    // The status rows follow the prompt box.
    let rows: Vec<&str> = screen.lines().collect();
    let after_prompt = rows.iter().rposition(|row| row.contains('└')).map_or(0, |i| i + 1);
    rows[after_prompt..].iter().map(|row| row.trim_matches('"').trim_end()).collect::<Vec<_>>().join(" ")
}

#[tokio::test]
async fn a_refused_token_is_explained_and_not_retried() {
    let url = foreign_server("HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n").await;
    let error = connect_error(&url, Some("wrong")).await;
    let mut app = App::new(url.clone(), None);
    app.set_token_given(true);
    app.on_connect_failed(&error, Instant::now());
    assert!(matches!(app.connection(), ConnectionState::Offline { .. }), "{:?}", app.connection());
    assert_eq!(app.take_commands(), vec![], "no retry");
    let status = status_line(&app);
    assert!(status.contains("refused the token (401 Unauthorized)"), "{status}");
}

#[tokio::test]
async fn another_program_on_the_port_is_named_and_retried() {
    for answer in ["HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n", "SSH-2.0-OpenSSH_9.6\r\n"] {
        let url = foreign_server(answer).await;
        let error = connect_error(&url, None).await;
        let mut app = App::new(url.clone(), None);
        app.on_connect_failed(&error, Instant::now());
        assert!(matches!(app.take_commands().as_slice(), [Command::Connect { .. }]), "keeps retrying");
        let status = status_line(&app);
        assert!(status.contains(&format!("not a Baton server at {url}")), "{error}: {status}");
    }
}

/// --no-spawn or a remote server: a lost server is only reconnected to.
#[test]
fn a_server_baton_may_not_start_is_only_reconnected_to() {
    let mut app = listed_app();
    app.set_may_start_server(false);
    app.on_disconnected("the server closed the connection", Instant::now());
    for _ in 0..3 {
        app.on_connect_failed(
            &ClientError::Connect("IO error: Connection refused (os error 111)".into()),
            Instant::now(),
        );
    }
    let commands = app.take_commands();
    assert!(commands.iter().all(|c| matches!(c, Command::Connect { .. })), "{commands:?}");
    let status = status_line(&app);
    assert!(status.contains(&format!("{SERVER} │ ○ the server is gone; reconnecting in")), "{status}");
}

fn batond() -> Option<PathBuf> {
    let batond = Path::new(env!("CARGO_BIN_EXE_baton")).with_file_name("batond");
    if batond.is_file() {
        Some(batond)
    } else {
        eprintln!("skipped: needs {} (cargo build -p baton-server)", batond.display());
        None
    }
}

fn launch_options(batond: PathBuf, data_dir: &Path) -> LaunchOptions {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    LaunchOptions {
        url: format!("ws://127.0.0.1:{port}/ws"),
        // As baton does for a local server: the token from the data dir.
        client: ClientOptions::for_data_dir(data_dir),
        data_dir: data_dir.to_path_buf(),
        batond: Some(batond),
        no_spawn: false,
        startup_bound: baton_tui::launcher::STARTUP_BOUND,
    }
}

#[tokio::test]
async fn a_server_that_will_not_start_says_why() {
    let Some(batond) = batond() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("agents.toml"), "[agents.x]\ncommand = 5\n").expect("agents.toml");
    let options = launch_options(batond, dir.path());
    let error = match connect_or_launch(&options).await {
        Ok(_) => panic!("batond started with a bad agents.toml"),
        Err(error) => format!("{error:#}"),
    };
    assert!(error.contains("agents.toml is invalid: TOML parse error at line 2"), "{error}");
    assert!(error.contains("invalid type: integer `5`, expected a string"), "{error}");
    assert!(error.contains(&dir.path().join(STDERR_FILE).display().to_string()), "{error}");
}

/// A data dir of an older batond, its journal at the schema before migration 260 and holding
/// `events` events, so that a new batond rewrites the journal before it answers.
fn old_data_dir(data_dir: &Path, events: usize) {
    let migrations = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(&migrations)
        .expect("the migrations")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let version = path.file_name()?.to_str()?.split('_').next()?.parse().ok()?;
            Some((version, path))
        })
        .filter(|(version, _)| *version < 260)
        .collect();
    files.sort();
    let mut conn = rusqlite::Connection::open(data_dir.join("baton.db")).expect("the database");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .expect("schema_migrations");
    let tx = conn.transaction().expect("a transaction");
    for (version, path) in &files {
        tx.execute_batch(&std::fs::read_to_string(path).expect("a migration")).expect("an old migration");
        tx.execute("INSERT INTO schema_migrations VALUES (?1, 'old', 't')", [version]).expect("recorded");
    }
    {
        let mut insert = tx
            .prepare("INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES ('s', ?1, 'status', ?2, 't')")
            .expect("prepare");
        let payload = r#"{"kind":"status","message":"an event of an older journal, long enough to weigh"}"#;
        for seq in 1..=events {
            insert.execute(rusqlite::params![seq as i64, payload]).expect("an old event");
        }
    }
    tx.commit().expect("commit");
}

/// A new batond on an older data dir rewrites its journal before it answers, which takes longer
/// than a server is given to start when the journal is large: baton sees batond say so and waits
/// on for it, instead of giving up on a server that is working.
#[tokio::test]
async fn a_server_upgrading_a_large_database_is_waited_for() {
    let Some(batond) = batond() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    old_data_dir(dir.path(), 300_000);
    let mut options = launch_options(batond, dir.path());
    options.startup_bound = std::time::Duration::from_millis(200);
    let started = Instant::now();
    let launched = connect_or_launch(&options).await;
    let waited = started.elapsed();
    let launched = launched.unwrap_or_else(|e| panic!("not waited for: {e:#}"));
    assert!(launched.connection.is_ok());
    assert!(launched.started_server);
    assert!(waited > options.startup_bound, "the upgrade took less than the bound ({waited:?}): nothing was shown");
    stop_batond_serving(dir.path());
}

/// `--server ws://127.0.0.1:PORT` (no /ws): batond starts and answers 404; the error says at
/// once which URL to use.
#[tokio::test]
async fn a_url_without_ws_is_told_the_ws_url() {
    let Some(batond) = batond() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let mut options = launch_options(batond, dir.path());
    options.url = options.url.trim_end_matches("/ws").to_string();
    let started = Instant::now();
    let error = match connect_or_launch(&options).await {
        Ok(_) => panic!("connected without /ws"),
        Err(error) => format!("{error:#}"),
    };
    assert!(error.contains(&format!("try --server {}/ws", options.url)), "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(8), "no wait for the startup bound");
    stop_batond_serving(dir.path());
}

#[tokio::test]
async fn only_a_server_baton_started_is_its_own() {
    let Some(batond) = batond() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let options = launch_options(batond.clone(), dir.path());
    let ours = connect_or_launch(&options).await.expect("batond starts");
    assert!(ours.connection.is_ok());
    assert!(ours.started_server);

    // The same address again: a server answers, so this baton did not start it.
    let mut second = options.clone();
    second.data_dir = dir.path().join("other");
    let theirs = connect_or_launch(&second).await.expect("connects");
    assert!(theirs.connection.is_ok());
    assert!(!theirs.started_server);

    // The server we started runs detached; stop it as its owner would.
    stop_batond_serving(dir.path());
}

/// Two `baton`s started at once with no server: both batonds start, one loses the data dir (or,
/// with another data dir, the port) and exits; its launcher connects to the winner instead of
/// failing with the winner's output as its reason.
#[tokio::test]
async fn two_launches_at_once_both_connect_to_the_one_that_won() {
    let Some(batond) = batond() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let one = launch_options(batond, dir.path());
    let (a, b) = tokio::join!(connect_or_launch(&one), connect_or_launch(&one));
    let (a, b) = (a.expect("first launch"), b.expect("second launch"));
    assert!(a.connection.is_ok() && b.connection.is_ok());
    assert_eq!(u8::from(a.started_server) + u8::from(b.started_server), 1, "one batond serves");
    // The loser's output was not kept; the winner's is batond.stderr.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("data dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(STDERR_FILE))
        .collect();
    assert_eq!(names, vec![STDERR_FILE.to_string()]);
    stop_batond_serving(dir.path());

    // Same port, two data dirs: the loser cannot bind. A fresh port: the first one may have been
    // taken by another test's server since it was freed.
    // Two data dirs are two servers with a token each: the batons share one (given to the
    // servers they start), as two users of one server would.
    let mut other = launch_options(one.batond.clone().expect("batond"), &dir.path().join("a"));
    other.client.token = Some("shared-s3cret".into());
    let mut second = other.clone();
    second.data_dir = dir.path().join("b");
    let (a, b) = tokio::join!(connect_or_launch(&other), connect_or_launch(&second));
    let (a, b) = (a.expect("first launch"), b.expect("second launch"));
    assert!(a.connection.is_ok() && b.connection.is_ok(), "{:?} / {:?}", a.connection.err(), b.connection.err());
    stop_batond_serving(&dir.path().join("a"));
    stop_batond_serving(&dir.path().join("b"));
}

/// The rule for starting a lost server again, decided by our data dir's `batond.url`: left
/// behind by a crash (start it), removed by a clean shutdown (leave it), or naming another URL
/// (not ours).
#[tokio::test]
async fn a_lost_server_is_started_again_only_after_a_crash_on_our_data_dir() {
    let Some(batond) = batond() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let options = launch_options(batond, dir.path());
    let first = connect_or_launch(&options).await.expect("batond starts");
    drop(first);
    let url_file = dir.path().join(URL_FILE);
    assert_eq!(std::fs::read_to_string(&url_file).expect("batond.url").trim(), options.url);

    signal_batond_serving(dir.path(), libc::SIGKILL);
    assert!(url_file.is_file(), "a crash leaves batond.url behind");
    assert_eq!(restart_server(&options).await.expect("restart"), ServerRestart::Started);
    assert!(Client::connect_with(&options.url, options.client.clone()).await.is_ok());

    // kill -TERM: a clean shutdown removes batond.url, and the server stays stopped.
    stop_batond_serving(dir.path());
    assert!(!url_file.exists());
    assert_eq!(restart_server(&options).await.expect("no restart"), ServerRestart::Stopped);
    assert!(Client::connect_with(&options.url, options.client.clone()).await.is_err());

    // Our data dir's server listens elsewhere: the server lost is not ours.
    std::fs::write(&url_file, "ws://127.0.0.1:1/ws\n").expect("write");
    let not_ours = restart_server(&options).await.expect("no restart");
    assert_eq!(not_ours, ServerRestart::NotOurs("ws://127.0.0.1:1/ws".into()));
}

/// SIGTERM to the batond serving `data_dir`, and a bounded wait for it to go before the
/// directory is removed.
fn stop_batond_serving(data_dir: &Path) {
    signal_batond_serving(data_dir, libc::SIGTERM);
}

/// `signal` to the batond serving `data_dir` (found through /proc: the launcher started it), and
/// a bounded wait for it to go.
fn signal_batond_serving(data_dir: &Path, signal: i32) {
    let serving = || -> Vec<i32> {
        let wanted = data_dir.as_os_str().as_encoded_bytes();
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let mut args = cmdline.split(|b| *b == 0);
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                // A zombie (exited, not yet reaped by the launcher's thread) is gone already.
                let zombie = stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'));
                !zombie && args.next().is_some_and(|exe| exe.ends_with(b"/batond")) && args.any(|arg| arg == wanted)
            })
            .collect()
    };
    for pid in serving() {
        // SAFETY: kill(2) on the batond serving our temporary data dir; no memory is shared.
        unsafe {
            libc::kill(pid, signal);
        }
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    // Process exit has no event to wait on here; the poll is bounded.
    while !serving().is_empty() && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `baton --server wss://… --fingerprint FP`: the TUI connects to a server with a self-signed
/// certificate when the fingerprint pinned is the server's, and says why not otherwise.
#[tokio::test]
async fn a_wss_server_is_reached_with_its_fingerprint_pinned() {
    use clap::Parser;
    let dir = tempfile::tempdir().expect("temp dir");
    let server = baton_testkit::ServerBuilder::new(dir.path()).args(["--tls", "self-signed"]).start_blocking();
    let fingerprint = server.fingerprint.clone().expect("batond printed its fingerprint");
    let launch = |fingerprint: &str| {
        let args =
            baton_tui::cli::Args::try_parse_from(["baton", "--server", &server.url, "--fingerprint", fingerprint])
                .expect("the flags parse");
        LaunchOptions {
            url: args.server,
            client: ClientOptions { fingerprint: args.fingerprint, ..ClientOptions::for_data_dir(dir.path()) },
            data_dir: dir.path().to_path_buf(),
            batond: None,
            no_spawn: true,
            startup_bound: baton_tui::launcher::STARTUP_BOUND,
        }
    };
    let startup = connect_or_launch(&launch(&fingerprint)).await.expect("startup");
    let (client, _notes) = startup.connection.expect("connected over wss");
    assert!(!client.hello().server_version.is_empty());

    let wrong = baton_testkit::another_fingerprint(&fingerprint);
    let error = connect_or_launch(&launch(&wrong)).await.expect("startup").connection.err().expect("refused");
    let mut app = App::new(server.url.clone(), None);
    app.on_connect_failed(&error, Instant::now());
    let status = status_line(&app);
    assert!(status.contains("not the pinned one"), "{status}");
}
