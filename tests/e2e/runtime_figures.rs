//! Figures per runtime (standalone, hosted, docker, ssh), printed, not asserted: events/s of one
//! `/chunks N` turn as a subscribed client receives them (the turn of the hosted bench's H1
//! row), and the time from starting a batond after a `kill -9` mid-turn to the reattached
//! turn streaming again (standalone: to the session resumed and waiting). Needs the test sshd
//! and Docker daemon of the other tests (skipped with a reason without them). Run in release:
//! `cargo test --release -p baton-server --test e2e runtime_figures:: -- --ignored --nocapture`
//! (`BATON_FIGURE_CHUNKS` sets N, default 50000).

use crate::common;

use std::time::{Duration, Instant};

use baton_protocol::*;
use common::docker::{docker, image};
use common::sshd::{ssh_on_path, sshd_with, Sshd, HOST};
use common::*;

async fn start(env: &TestEnv, path: &str) -> Server {
    env.server().env("PATH", path).start().await
}

/// kill -9 mid-turn, then the time from starting a new batond to the turn streaming again.
async fn back_after_kill(env: &TestEnv, path: &str, server: Server, session_id: &str) -> (Duration, &'static str) {
    let (client, mut notes) = server.client().await;
    subscribe(&client, session_id, None).await;
    client.request(MessageAddParams::new(session_id, "/slow 400")).await.expect("message.add");
    let mut last = 0;
    collect_events(&mut notes, session_id, |e| {
        last = e.seq;
        matches!(e.event, SessionEvent::MessageChunk { .. })
    })
    .await;
    drop(client);
    server.kill9().await;
    let started = Instant::now();
    let server = start(env, path).await;
    let (client, mut notes) = server.client().await;
    let how = if status(&client, session_id).await.is_agent_running {
        subscribe(&client, session_id, Some(last)).await;
        collect_events(&mut notes, session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
        "reattached, the turn streaming again"
    } else {
        resume(&client, &mut notes, session_id, false).await;
        "resumed (the turn was lost with the agent)"
    };
    let elapsed = started.elapsed();
    client.request(SessionStopParams { session_id: session_id.into() }).await.expect("stop");
    server.stop().await;
    (elapsed, how)
}

async fn measure(runtime: &str, table: &str, path: &str, chunks: u64) {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.data_dir.join("mock-agent")).unwrap();
    env.agents_config(&mock_agent_in("bench", runtime, table));
    let server = start(&env, path).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "bench", "hi").await;
    let rate = chunks_rate(&client, &mut notes, &session_id, chunks, Duration::from_secs(600)).await;
    println!("| events/s, /chunks {chunks} -> 1 client, {runtime} | {rate:.0} |");
    drop(client);
    let (elapsed, how) = back_after_kill(&env, path, server, &session_id).await;
    println!("| kill -9 mid-turn -> new batond start to {how}, {runtime} | {} ms |", elapsed.as_millis());
}

#[tokio::test]
#[ignore = "figures, not a check: run in release with --ignored --nocapture"]
async fn figures_per_runtime() {
    let chunks = std::env::var("BATON_FIGURE_CHUNKS").ok().and_then(|n| n.parse().ok()).unwrap_or(50_000);
    let path = std::env::var("PATH").unwrap_or_default();
    measure("standalone", "", &path, chunks).await;
    measure("hosted", "", &path, chunks).await;

    let _turn = common::docker::shared_turn().await;
    let docker = tokio::task::spawn_blocking(docker).await.unwrap();
    let set_env = docker.as_ref().and_then(|d| d.host.as_ref()).map(|h| format!("SetEnv DOCKER_HOST={h}"));
    let sshd: Option<Sshd> =
        tokio::task::spawn_blocking(move || sshd_with(&set_env.unwrap_or_default())).await.unwrap();
    if let Some(docker) = &docker {
        let work = tempfile::tempdir().unwrap();
        let tag = image(docker, work.path());
        let host = docker.host_line();
        measure(
            "docker",
            &format!("[agents.bench.docker]\nimage = \"{tag}\"\nnetwork = \"none\"\n{host}"),
            &path,
            chunks,
        )
        .await;
        if let Some(sshd) = &sshd {
            let via_ssh = format!("{}:{path}", ssh_on_path(sshd).display());
            let table = format!(
                "[agents.bench.docker]\nimage = \"{tag}\"\nnetwork = \"none\"\ndocker_host = \"ssh://root@127.0.0.1:{}\"",
                sshd.port
            );
            println!("(Remote Docker: the same daemon, reached through the test sshd)");
            measure("docker", &table, &via_ssh, chunks).await;
        }
        docker.run(&["rmi", "-f", &tag]);
    }
    if let Some(sshd) = &sshd {
        let table = format!(
            "[agents.bench.ssh]\nhost = \"{HOST}\"\nbatond = \"{}\"\nssh_args = [\"-F\", \"{}\"]\ndata_dir = \"{}\"",
            batond(),
            sshd.client_config.display(),
            sshd.dir.path().join("remote-data").display()
        );
        measure("ssh", &table, &path, chunks).await;
        // The same with a shared connection (ssh's ControlMaster): connections after the
        // first skip the handshake.
        let control = sshd.dir.path().join("cm-%C").display().to_string();
        let shared = table.replace(
            "ssh_args = [\"-F\", ",
            &format!("ssh_args = [\"-o\", \"ControlMaster=auto\", \"-o\", \"ControlPath={control}\", \"-o\", \"ControlPersist=60\", \"-F\", "),
        );
        println!("(ssh with ControlMaster=auto, ControlPersist=60)");
        measure("ssh", &shared, &path, chunks).await;
    }
}
