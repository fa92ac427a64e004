//! Test harness: the testkit (a real `batond` on an ephemeral loopback port with a temporary
//! data dir, driven through the typed client over a real WebSocket), and what only these tests
//! need.

pub use baton_testkit::*;

pub mod acp_stream;
pub mod chromium;
pub mod docker;
pub mod sshd;
// `pre_exec` on the command `Server::start_configured` hands over.
#[allow(unused_imports)]
pub use std::os::unix::process::CommandExt;

/// The batond of this build (the testkit finds the same one; this is for tests that run it
/// themselves, e.g. as an agent command).
pub fn batond() -> &'static str {
    env!("CARGO_BIN_EXE_batond")
}

/// The agent `name`: the mock agent (natively resuming, its state under the data dir) run by
/// `runtime`, followed by `tables`, the TOML of what that runtime needs.
pub fn mock_agent_in(name: &str, runtime: &str, tables: &str) -> String {
    format!(
        r#"
        [agents.{name}]
        command = "{{batond}}"
        args = ["mock-agent", "--state-dir", "{{data_dir}}/mock-agent"]
        runtime = "{runtime}"
        native_session_resume = true
        {tables}
        "#
    )
}

/// Configures `gated`: an agent (the mock, natively resuming) that hangs before it answers
/// `initialize` while `{data_dir}/hang` exists. `prelude` is shell run first (e.g. a trap).
pub fn gated_agent(env: &TestEnv, prelude: &str) {
    env.agents_config(&format!(
        r#"
        [agents.gated]
        command = "sh"
        args = ["-c", "{prelude}if [ -e '{{data_dir}}/hang' ]; then sleep 600; fi; exec '{{batond}}' mock-agent --state-dir '{{data_dir}}/mock-agent'"]
        native_session_resume = true
        "#
    ));
}

/// Processes of this data dir's mock agents, from /proc; with `guards`, the guards of
/// standalone agents too (`batond agent-guard` names the agent's command line).
pub fn mock_agent_processes(env: &TestEnv, guards: bool) -> Vec<u32> {
    let needle = env.data_dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let wanted = guards || !cmdline.contains("agent-guard");
            cmdline.contains("mock-agent") && wanted && cmdline.contains(&needle) && process_alive(*pid)
        })
        .collect()
}

/// The pids of live processes whose command line (its words) `matches`.
pub fn processes(matches: impl Fn(&[String]) -> bool) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')));
        if !zombie && matches(&args) {
            found.push(pid);
        }
    }
    found
}

/// Kills `pid` with SIGKILL (a crash, or a dropped connection's process).
/// Runs `task.shell`'s command without a terminal (its `flags.0` replaced by `flags.1`, `-it`
/// by `-i` for docker, `-t` by `-T` for ssh), `input` typed into the shell it opens; returns
/// what it printed, once it exited with success.
pub async fn shell_without_terminal(argv: &[String], flags: (&str, &str), input: &str) -> String {
    use std::io::Write;
    let (program, args) = argv.split_first().expect("a command");
    let args: Vec<&str> = args.iter().map(|a| if a == flags.0 { flags.1 } else { a.as_str() }).collect();
    let mut child = std::process::Command::new(program)
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("type into the shell");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().expect("the shell ends");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn kill9(pid: u32) {
    // SAFETY: signalling a process the test started (itself or through batond) and means to kill.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

/// Polls `done` until it holds, bounded by `WAIT`: for what has no event to wait on (a
/// process's end, a line reaching a file).
pub async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// `batond <args> --data-dir DATA_DIR` (no token or data dir from this environment): its
/// success, its stdout and its stderr.
pub async fn batond_run(args: &[&str], data_dir: &std::path::Path) -> (bool, String, String) {
    let output = tokio::process::Command::new(batond())
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("BATON_TOKEN")
        .env_remove("BATON_DATA_DIR")
        .output()
        .await
        .expect("run batond");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

/// [`batond_run`]: its success, and its stdout then stderr.
pub async fn batond_cli(args: &[&str], data_dir: &std::path::Path) -> (bool, String) {
    let (ok, stdout, stderr) = batond_run(args, data_dir).await;
    (ok, stdout + &stderr)
}

/// Deletes the record of the session's running agent from the database of a stopped batond, as
/// after a launch that raced a delete: the agent, still running, is then owned by no session.
pub fn forget_running_agent(env: &TestEnv, session_id: &str) {
    let db = rusqlite::Connection::open(env.data_dir.join("baton.db")).expect("the database opens");
    let forgotten = db.execute("DELETE FROM executors_running WHERE session_id = ?1", [session_id]).expect("delete");
    assert_eq!(forgotten, 1, "the session's running agent was on record");
}

/// What a process's descriptors are, by kind: (pipes, pidfds, agent log files).
pub fn descriptor_kinds(pid: u32) -> (usize, usize, usize) {
    let mut kinds = (0, 0, 0);
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        let target = target.to_string_lossy();
        if target.starts_with("pipe:") {
            kinds.0 += 1;
        } else if target.contains("pidfd") {
            kinds.1 += 1;
        } else if target.contains("agent-logs") {
            kinds.2 += 1;
        }
    }
    kinds
}
