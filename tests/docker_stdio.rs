//! The agent host's stdio seam through `docker exec -i`: a container whose main process is the
//! agent host (`batond agentctl`), built from local files (`docker import` of a tarball holding
//! this build's batond and the libraries `ldd` names; no registry), reached by the server's
//! client through `docker exec -i CONTAINER batond agentctl --stdio`, driving the mock agent
//! inside. A dropped `docker exec` loses nothing: the next one reattaches from the last
//! acknowledged line.
//!
//! Needs a Docker daemon. Where `docker info` fails, the setup installs Debian's `docker.io`
//! and starts `dockerd` on a socket of its own under the system's temp dir (left running for the
//! next run); where that is impossible (not root, no network...), the test says so on stderr
//! and is skipped.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use baton_server::agent::host::client::{AgentHost, HostedAgent};
use baton_server::agent::runtime::LaunchSpec;
use baton_server::agent::transport::Input;
use serde_json::{json, Value};

use common::*;

/// Where the test's own daemon lives when there was none.
fn own_daemon_dir() -> PathBuf {
    std::env::temp_dir().join("baton-test-dockerd")
}

/// `docker` with the daemon to use (`-H` first when it is the test's own).
struct Docker {
    host: Option<String>,
}

impl Docker {
    fn args(&self) -> Vec<String> {
        match &self.host {
            Some(host) => vec!["-H".into(), host.clone()],
            None => Vec::new(),
        }
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .args(self.args())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("docker {args:?}: {e}"))
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

fn answers(host: Option<&str>) -> bool {
    let mut command = Command::new("docker");
    if let Some(host) = host {
        command.args(["-H", host]);
    }
    command.arg("info").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn skip(why: &str) -> Option<Docker> {
    eprintln!("SKIPPED Docker test: {why}");
    None
}

/// A Docker daemon to talk to: the configured one, else the test's own (installing docker.io
/// and starting dockerd when needed); None, after saying why, when there can be none.
fn docker() -> Option<Docker> {
    if answers(None) {
        return Some(Docker { host: None });
    }
    let dir = own_daemon_dir();
    let socket = format!("unix://{}", dir.join("docker.sock").display());
    if answers(Some(&socket)) {
        return Some(Docker { host: Some(socket) });
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("no Docker daemon answers, and starting one needs root");
    }
    let installed = |program: &str| Command::new("sh").args(["-c", &format!("command -v {program}")]).output();
    if !installed("dockerd").is_ok_and(|o| o.status.success()) || !installed("docker").is_ok_and(|o| o.status.success())
    {
        let apt = |args: &[&str]| Command::new("apt-get").args(args).env("DEBIAN_FRONTEND", "noninteractive").output();
        let install = ["install", "-y", "-q", "docker.io"];
        // Without package lists (a fresh machine) the install fails: update and try again.
        let result = match apt(&install) {
            Ok(out) if out.status.success() => Ok(out),
            _ => apt(&["update", "-q"]).and_then(|_| apt(&install)),
        };
        match result {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                return skip(&format!(
                    "apt-get install docker.io failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
            Err(e) => return skip(&format!("apt-get could not run: {e}")),
        }
    }
    let _ = std::fs::create_dir_all(&dir);
    let log = match std::fs::File::create(dir.join("dockerd.log")) {
        Ok(log) => log,
        Err(e) => return skip(&format!("cannot write {}: {e}", dir.display())),
    };
    let started = Command::new("dockerd")
        .arg("-H")
        .arg(&socket)
        .arg("--data-root")
        .arg(dir.join("root"))
        .arg("--exec-root")
        .arg(dir.join("exec"))
        .arg("--pidfile")
        .arg(dir.join("dockerd.pid"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn();
    let mut dockerd = match started {
        Ok(child) => child,
        Err(e) => return skip(&format!("cannot start dockerd: {e}")),
    };
    let log_tail = || {
        let log = std::fs::read_to_string(dir.join("dockerd.log")).unwrap_or_default();
        log.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
    };
    // Polled: dockerd has no readiness signal but its socket answering.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if answers(Some(&socket)) {
            return Some(Docker { host: Some(socket) });
        }
        if let Ok(Some(status)) = dockerd.try_wait() {
            return skip(&format!("dockerd exited ({status}): {}", log_tail()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    skip(&format!("dockerd did not answer within 60 s: {}", log_tail()))
}

/// An image with this build's batond (and the libraries it links) at /opt/baton/batond.
fn image(docker: &Docker, work: &Path) -> String {
    let root = work.join("image");
    let batond = Path::new(batond());
    let mut files = vec![batond.to_path_buf()];
    let ldd = Command::new("ldd").arg(batond).output().expect("ldd");
    for word in String::from_utf8_lossy(&ldd.stdout).split_whitespace() {
        if word.starts_with('/') {
            files.push(PathBuf::from(word));
        }
    }
    for file in &files {
        let target =
            if file == batond { root.join("opt/baton/batond") } else { root.join(file.strip_prefix("/").unwrap()) };
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(file, &target).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
    for dir in ["tmp", "var/lib/baton"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let tarball = work.join("image.tar");
    let tar = Command::new("tar").arg("-C").arg(&root).arg("-cf").arg(&tarball).arg(".").status().expect("tar");
    assert!(tar.success());
    let tag = format!("baton-test-agent:{}", uuid::Uuid::new_v4().simple());
    docker.ok(&["import", &tarball.display().to_string(), &tag]);
    tag
}

/// Removes the container and the image, however the test ends.
struct Cleanup<'a> {
    docker: &'a Docker,
    container: String,
    image: String,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        self.docker.run(&["rm", "-f", &self.container]);
        self.docker.run(&["rmi", "-f", &self.image]);
    }
}

/// The `docker exec` client processes of this container (on this machine).
fn exec_clients(container: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')));
        if !zombie && args.first().is_some_and(|a| a.ends_with("docker")) && args.iter().any(|a| a == container) {
            found.push(pid);
        }
    }
    found
}

async fn next(agent: &mut HostedAgent) -> (u64, Value) {
    let (seq, line) = tokio::time::timeout(WAIT, agent.stream.lines.recv())
        .await
        .expect("a line in time")
        .expect("the stream is open");
    (seq, serde_json::from_slice(&line).expect("the agent writes JSON"))
}

async fn call(agent: &mut HostedAgent, id: u64, method: &str, params: Value) -> Vec<(u64, Value)> {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    agent.stream.input.send(Input::Write(line)).expect("the connection is open");
    let mut lines = Vec::new();
    loop {
        let (seq, message) = next(agent).await;
        let answered = message["id"] == json!(id);
        lines.push((seq, message));
        if answered {
            return lines;
        }
    }
}

fn prompt(session_id: &str, text: &str) -> Value {
    json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
}

#[tokio::test]
async fn a_mock_agent_in_a_container_is_driven_through_docker_exec_and_reattached_after_a_drop() {
    let Some(docker) = tokio::task::spawn_blocking(docker).await.unwrap() else { return };
    let work = tempfile::tempdir().unwrap();
    let tag = image(&docker, work.path());
    let container = format!("baton-test-{}", uuid::Uuid::new_v4().simple());
    let cleanup = Cleanup { docker: &docker, container: container.clone(), image: tag.clone() };
    docker.ok(&[
        "run",
        "-d",
        "--name",
        &container,
        "--label",
        "io.baton.test=1",
        "--network",
        "none",
        "--entrypoint",
        "/opt/baton/batond",
        &tag,
        "agentctl",
        "--data-dir",
        "/var/lib/baton",
        "--grace-ms",
        "600000",
    ]);
    // The host inside is ready once it said where it listens.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !docker.ok(&["logs", &container]).contains("agentctl listening")
        && !String::from_utf8_lossy(&docker.run(&["logs", &container]).stderr).contains("agentctl listening")
    {
        assert!(tokio::time::Instant::now() < deadline, "the agent host in the container did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut args = docker.args();
    args.extend(
        ["exec", "-i", &container, "/opt/baton/batond", "agentctl", "--stdio", "--data-dir", "/var/lib/baton"]
            .map(String::from),
    );
    let host = AgentHost::via_command("docker".into(), args);
    let info = host.existing().await.expect("the host answers through docker exec");
    assert_eq!(info.pid, 1, "the agent host is the container's main process");
    let spec = LaunchSpec {
        command: "/opt/baton/batond".into(),
        args: vec!["mock-agent".into(), "--state-dir".into(), "/tmp/mock".into()],
        env: BTreeMap::new(),
        cwd: "/tmp".into(),
    };
    let mut agent = host.spawn("agent-1", &spec).await.expect("spawn in the container");
    let pid = agent.pid;
    let init = call(&mut agent, 1, "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(init.last().unwrap().1["result"]["protocolVersion"], 1, "{init:?}");
    let new = call(&mut agent, 2, "session/new", json!({"cwd": "/tmp", "mcpServers": []})).await;
    let (new_seq, answer) = new.last().unwrap().clone();
    let session_id = answer["result"]["sessionId"].as_str().expect("a session id").to_string();
    agent.stream.input.send(Input::Ack(new_seq)).unwrap();
    let turn = call(&mut agent, 3, "session/prompt", prompt(&session_id, "in a box")).await;
    assert_eq!(turn.last().unwrap().1["result"]["stopReason"], "end_turn", "{turn:?}");
    let said: String = turn
        .iter()
        .filter_map(|(_, m)| m["params"]["update"]["content"]["text"].as_str().map(str::to_string))
        .collect();
    assert!(said.contains("in a box"), "{said:?}");

    // The connection drops (its docker exec is killed): the agent keeps running in the container.
    let clients = exec_clients(&container);
    assert_eq!(clients.len(), 1, "one docker exec carries the connection: {clients:?}");
    // SAFETY: signalling a process this test started.
    unsafe {
        libc::kill(clients[0] as i32, libc::SIGKILL);
    }
    let lost = tokio::time::timeout(WAIT, agent.handle.wait()).await.expect("the drop is noticed");
    assert!(lost.stderr_tail.contains("agent host"), "{lost}");
    drop(agent);

    let mut again = host.attach(&info, "agent-1").await.expect("attach through a new docker exec");
    assert_eq!(again.pid, pid, "the same agent");
    for (seq, message) in &turn {
        assert_eq!(&next(&mut again).await, &(*seq, message.clone()), "replayed from the last acknowledged line");
    }
    again.stream.input.send(Input::Ack(turn.last().unwrap().0)).unwrap();
    let second = call(&mut again, 4, "session/prompt", prompt(&session_id, "still boxed")).await;
    assert_eq!(second.first().unwrap().0, turn.last().unwrap().0 + 1, "no gap, no duplicate");
    assert_eq!(second.last().unwrap().1["result"]["stopReason"], "end_turn");

    let exit = tokio::time::timeout(WAIT, again.handle.kill()).await.expect("killed in time");
    assert!(exit.signal.is_some() || exit.code.is_some(), "{exit}");
    drop(again);
    drop(cleanup);
    let gone = docker.run(&["inspect", &container]);
    assert!(!gone.status.success(), "the container is removed");
}
