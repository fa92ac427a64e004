//! batond from the shell: `stop`, `status`, and the command-line mistakes a user makes.

use crate::common;

use std::path::Path;

use baton_protocol::*;
use common::*;
use tokio::process::Command;

#[tokio::test]
async fn stop_ends_the_server_of_a_data_dir_and_says_so() {
    let env = TestEnv::new();
    let server = env.start().await;
    let lock = std::fs::read_to_string(env.data_dir.join("batond.lock")).unwrap();
    assert_eq!(lock.trim(), server.pid.to_string(), "the lock file holds the server's pid");

    let (ok, status, _) = batond_run(&["status"], &env.data_dir).await;
    assert!(ok);
    assert!(status.contains(&format!("batond: running, pid {}", server.pid)), "{status}");
    assert!(status.contains("ws://127.0.0.1:"), "{status}");

    let (ok, said, stderr) = batond_run(&["stop"], &env.data_dir).await;
    assert!(ok, "{stderr}");
    assert_eq!(said.trim(), format!("batond (pid {}) stopped", server.pid));
    assert!(!process_alive(server.pid), "stop returns once the server is gone");

    let (ok, said, _) = batond_run(&["stop"], &env.data_dir).await;
    assert!(ok);
    assert!(said.starts_with("no batond is running on"), "{said}");
    let (_, status, _) = batond_run(&["status"], &env.data_dir).await;
    assert!(status.contains("batond: not running"), "{status}");
}

#[tokio::test]
async fn stop_with_agents_also_ends_the_hosted_agents() {
    let env = TestEnv::new();
    let server = env.start_with(&["--agent-runtime", "hosted"]).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let pid = client.request(SessionStatusParams { session_id }).await.unwrap().agent_pid.expect("agent pid");
    drop((client, notes));

    let (_, status, _) = batond_run(&["status"], &env.data_dir).await;
    assert!(status.contains("agent host: running") && status.contains(&format!("pid {pid} running")), "{status}");

    let (ok, said, stderr) = batond_run(&["stop", "--agents"], &env.data_dir).await;
    assert!(ok, "{stderr}");
    assert!(said.contains(&format!("batond (pid {}) stopped", server.pid)), "{said}");
    assert!(said.contains("ended 1 hosted agent(s)"), "{said}");
    assert!(wait_process_gone(pid).await, "the hosted agent was ended");
}

#[tokio::test]
async fn stop_without_agents_says_the_hosted_ones_keep_running() {
    let env = TestEnv::new();
    let server = env.start_with(&["--agent-runtime", "hosted"]).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let pid = client.request(SessionStatusParams { session_id }).await.unwrap().agent_pid.expect("agent pid");
    drop((client, notes));

    let (ok, said, stderr) = batond_run(&["stop"], &env.data_dir).await;
    assert!(ok, "{stderr}");
    assert!(said.contains("1 hosted agent(s) keep running"), "{said}");
    assert!(process_alive(pid), "hosted agents outlive a plain stop");
    let (ok, said, _) = batond_run(&["stop", "--agents"], &env.data_dir).await;
    assert!(ok && said.contains("ended 1 hosted agent(s)"), "{said}");
    assert!(wait_process_gone(pid).await);
}

#[tokio::test]
async fn a_host_name_that_resolves_to_loopback_can_be_listened_on() {
    let env = TestEnv::new();
    let server = Server::start_listening(&env.data_dir, "localhost:0", &[]).await;
    assert!(server.url.starts_with("ws://127.0.0.1:") || server.url.starts_with("ws://[::1]:"), "{}", server.url);
    let (client, _) = server.client().await;
    client.request(AgentListParams {}).await.expect("a client connects");

    let refused = batond_refuses(&env.data_dir, "no-such-host.invalid:7777", &[]).await;
    assert!(refused.contains("cannot resolve"), "{refused}");
    let refused = batond_refuses(&env.data_dir, "localhost", &[]).await;
    assert!(refused.contains("no port"), "{refused}");
}

#[tokio::test]
async fn a_named_agents_config_that_does_not_exist_is_an_error() {
    let env = TestEnv::new();
    let missing = env.workdir.join("missing.toml");
    let missing = missing.to_str().unwrap();
    let (ok, _, stderr) = batond_run(&["--listen", "127.0.0.1:0", "--agents-config", missing], &env.data_dir).await;
    assert!(!ok, "batond started without its named config");
    assert!(stderr.contains(missing) && stderr.contains("does not exist"), "{stderr}");
}

#[tokio::test]
async fn a_data_dir_that_is_a_file_is_called_not_a_directory() {
    let env = TestEnv::new();
    let file = env.workdir.join("hostname");
    std::fs::write(&file, "box\n").unwrap();
    let (ok, _, stderr) = batond_run(&["--listen", "127.0.0.1:0"], &file).await;
    assert!(!ok);
    assert!(stderr.contains("is not a directory"), "{stderr}");
    assert!(!stderr.contains("File exists"), "{stderr}");
}

/// A copy of a data dir that its user can read but not write (a backup, a mount): batond
/// refuses it with an error that names what it cannot write, not a panic, and `batond export`
/// reads it. Permissions bind only other users than root: the copy is read by user nobody.
#[tokio::test]
async fn a_read_only_data_dir_is_an_error_not_a_panic_and_still_exports() {
    use std::process::Stdio;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("[batond-cli] read-only data dir: SKIPPED (switching to user nobody needs root)");
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "a conversation kept read-only").await;
    drop(client);
    server.stop().await;

    let copy = env.data_dir.with_file_name("read-only-copy");
    let copied = Command::new("cp").arg("-a").arg(&env.data_dir).arg(&copy).status().await.expect("cp");
    assert!(copied.success());
    for (program, args) in [("chown", ["-R", "nobody"]), ("chmod", ["-R", "a-w"])] {
        let status = Command::new(program).args(args).arg(&copy).status().await.expect(program);
        assert!(status.success(), "{program}");
    }
    // The parents of the copy must let nobody through.
    let mut parent = copy.parent();
    while let Some(dir) = parent {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir).expect("parent").permissions().mode();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o011)).expect("chmod parent");
        parent = dir.parent().filter(|p| *p != Path::new("/"));
    }
    let as_nobody = |args: &[&str]| {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(batond())
            .args(args)
            .arg("--data-dir")
            .arg(&copy)
            .env_remove("BATON_TOKEN")
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    };
    let started = tokio::time::timeout(WAIT, as_nobody(&["--listen", "127.0.0.1:0"]).output())
        .await
        .expect("batond gives up on a read-only data dir within the bound")
        .expect("run batond");
    let stderr = String::from_utf8_lossy(&started.stderr);
    assert_eq!(started.status.code(), Some(1), "a clear error, not a panic (101): {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains(&*copy.display().to_string()) && stderr.contains("Permission denied"), "{stderr}");

    let exported = tokio::time::timeout(WAIT, as_nobody(&["export", &session_id]).output())
        .await
        .expect("export within the bound")
        .expect("run batond export");
    let (stdout, stderr) = (String::from_utf8_lossy(&exported.stdout), String::from_utf8_lossy(&exported.stderr));
    assert!(exported.status.success(), "export of a read-only data dir: {stderr}");
    assert!(stdout.contains("a conversation kept read-only"), "{stdout}");
}

/// Agents on a host that cannot be reached are named as left running there, and why, by both
/// `batond status` and `batond stop --agents`.
#[tokio::test]
async fn stop_with_agents_says_which_remote_agents_it_could_not_reach() {
    let env = TestEnv::new();
    env.agents_config(
        r#"
        [agents.far]
        command = "agent"
        runtime = "ssh"
        [agents.far.ssh]
        host = "127.0.0.1"
        ssh_args = ["-p", "1", "-o", "ConnectTimeout=5"]
        "#,
    );
    let server = env.start().await;
    let (_, status, _) = batond_run(&["status"], &env.data_dir).await;
    assert!(status.contains("ssh host 127.0.0.1: cannot be reached: cannot reach 127.0.0.1 over ssh"), "{status}");
    let (ok, said, stderr) = batond_run(&["stop", "--agents"], &env.data_dir).await;
    assert!(ok, "{stderr}");
    assert!(said.contains(&format!("batond (pid {}) stopped", server.pid)), "{said}");
    assert!(
        said.contains("cannot reach ssh host 127.0.0.1, so its agents (if any) are left running there")
            && said.contains("Connection refused"),
        "{said}"
    );
}

/// Started with the soft descriptor limit of a stock login below its hard limit, batond raises
/// it to the hard limit (its agents take a few each), and `batond status` tells the figure,
/// what is open and about how many more agents fit.
#[tokio::test]
async fn batond_raises_its_descriptor_limit_and_status_says_how_many_agents_fit() {
    const SOFT: u64 = 256;
    const HARD: u64 = 8192;
    let env = TestEnv::new();
    let server = Server::start_configured(&env.data_dir, &[], |command| {
        // SAFETY: only an async-signal-safe call (setrlimit) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let rlimit = libc::rlimit { rlim_cur: SOFT as libc::rlim_t, rlim_max: HARD as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.pid)).expect("limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("the descriptor limit");
    assert_eq!(line.split_whitespace().nth(3), Some(HARD.to_string().as_str()), "the soft limit raised: {line}");
    let (ok, status, _) = batond_run(&["status"], &env.data_dir).await;
    assert!(ok);
    let said = status.lines().find(|l| l.starts_with("descriptors: ")).unwrap_or_else(|| panic!("{status}"));
    assert!(said.contains(&format!("open of {HARD} allowed (room for about ")), "{said}");
    server.stop().await;
}
