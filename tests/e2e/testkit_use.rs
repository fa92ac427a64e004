//! The testkit as its users use it: from a crate outside the workspace that depends on it by
//! path (with `BATON_BATOND` unset, the kit builds batond in its workspace and runs it from
//! there), one call to reconnect and follow sessions after a restart, and a wait that cannot
//! succeed saying why at once.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use baton_protocol::*;
use common::*;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the repository")
}

const SCRATCH_TEST: &str = r#"
use baton_testkit::*;

#[tokio::test]
async fn a_conversation_survives_a_restart() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let server = server.restart().await;
    let (client, mut notes) = server.reconnect(&[&session_id]).await;
    resume(&client, &mut notes, &session_id, false).await;
    let answer = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(answer, "You asked me to remember pineapple.");
    println!("RAN {}", batond_path().display());
}
"#;

/// A crate outside the workspace, depending on the testkit by path, as the README suggests:
/// built into a target directory of its own, its test run with `BATON_BATOND` unset. The kit
/// builds batond in its workspace (into this test binary's target directory: a build that is
/// already there) and must run the batond Cargo built, wherever that is.
#[test]
fn a_crate_outside_the_workspace_runs_the_batond_the_kit_builds() {
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("testkit-outside");
    let package = scratch.join("outside");
    std::fs::create_dir_all(package.join("tests")).expect("scratch crate");
    let manifest = format!(
        "[package]\nname = \"outside\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dev-dependencies]\nbaton-testkit = {{ path = {:?} }}\ntokio = {{ version = \"1\", features = [\"macros\", \"rt-multi-thread\"] }}\n\n\
         # Its own workspace, not the one of the directory it sits in.\n[workspace]\n",
        repo().join("testkit").display().to_string()
    );
    std::fs::write(package.join("Cargo.toml"), manifest).expect("Cargo.toml");
    std::fs::create_dir_all(package.join("src")).expect("src");
    std::fs::write(package.join("src/lib.rs"), "").expect("lib.rs");
    std::fs::write(package.join("tests/restart.rs"), SCRATCH_TEST).expect("the test");
    // The versions this workspace was built with, so that the build needs no network.
    std::fs::copy(repo().join("Cargo.lock"), package.join("Cargo.lock")).expect("Cargo.lock");

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let own_target = scratch.join("target");
    let built = Command::new(&cargo)
        .current_dir(&package)
        .args(["test", "--offline", "--no-run", "--message-format=json-render-diagnostics"])
        .env("CARGO_TARGET_DIR", &own_target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    assert!(built.status.success(), "the scratch crate does not build:\n{}", String::from_utf8_lossy(&built.stderr));
    let executable = String::from_utf8_lossy(&built.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "restart" && m["executable"].is_string())
        .and_then(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the test executable");
    assert!(executable.starts_with(&own_target), "{}", executable.display());

    // What `cargo test` runs, run here with BATON_BATOND unset; the workspace's Cargo builds
    // into this test binary's target directory (batond is already built there).
    let workspace_target = Path::new(batond()).parent().and_then(Path::parent).expect("the target directory");
    let run = Command::new(&executable)
        .current_dir(&package)
        .env_remove("BATON_BATOND")
        .env("CARGO_TARGET_DIR", workspace_target)
        .args(["--nocapture", "--test-threads=1"])
        .output()
        .expect("run the scratch test");
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "the scratch crate's test failed:\n{stdout}\n{stderr}");
    let ran = stdout
        .lines()
        .find_map(|l| l.split_once("RAN ").map(|(_, path)| path))
        .unwrap_or_else(|| panic!("the test does not say which batond ran:\n{stdout}\n{stderr}"));
    assert!(Path::new(ran).is_absolute() && Path::new(ran).starts_with(workspace_target), "{ran}\n{stderr}");
}

#[tokio::test]
async fn a_wait_for_a_session_that_is_not_followed_fails_at_once_naming_it() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;

    // After a restart, a connection that did not subscribe cannot see the turn: said at once.
    let server = server.restart().await;
    let (client, mut notes) = server.client().await;
    assert!(!client.is_subscribed(&session_id));
    let started = Instant::now();
    let error = notes.wait_turn(&session_id, Duration::from_secs(30)).await.expect_err("nothing can come");
    assert_eq!(error, ClientError::NotSubscribed(session_id.clone()));
    assert!(error.to_string().starts_with(&format!("not subscribed to {session_id}")), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5), "it failed at once, not after the bound");
    let prompted = client
        .prompt_and_wait(&mut notes, &session_id, "/chunks 2", Duration::from_secs(30))
        .await
        .expect_err("not followed");
    assert_eq!(prompted, ClientError::NotSubscribed(session_id.clone()));

    // The testkit's waits say so too.
    let waiting = tokio::spawn(async move {
        collect_events(&mut notes, &session_id, is_turn_end).await;
    });
    let panic = waiting.await.expect_err("the wait cannot succeed").into_panic();
    let message = panic.downcast_ref::<String>().map(String::as_str).unwrap_or_default();
    assert!(message.starts_with("not subscribed to sess-"), "{message}");
}

#[tokio::test]
async fn reconnecting_after_a_restart_is_one_call() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember the green gate").await;
    let server = server.restart().await;
    let (client, mut notes) = server.reconnect(&[&session_id]).await;
    assert!(client.is_subscribed(&session_id) && notes.is_subscribed(&session_id));
    resume(&client, &mut notes, &session_id, false).await;
    let turn = client
        .prompt_and_wait(&mut notes, &session_id, "What did I ask you to remember?", Duration::from_secs(60))
        .await
        .expect("the turn");
    assert_eq!(turn.text, "You asked me to remember the green gate.");
    // Unsubscribed, the session is no longer followed.
    client.request(UnsubscribeParams { session_id: session_id.clone() }).await.expect("unsubscribe");
    assert!(!notes.is_subscribed(&session_id));
}
