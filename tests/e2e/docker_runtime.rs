//! The `docker` runtime end to end: a real `batond`, a real Docker daemon (see
//! common/docker.rs: installed and started when missing, else the tests are skipped with the
//! reason on stderr), an image imported from this build's batond, and the mock agent in one
//! container per launch. batond is killed with -9 mid-turn, containers are killed from outside,
//! and left behind.

use crate::common;

use std::time::Duration;

use baton_protocol::*;
use common::docker::{boxed_agent, docker, image, Docker};
use common::*;

/// A data dir whose `boxed` agent runs in Docker, and what to remove afterwards.
struct Boxed {
    env: TestEnv,
    docker: Docker,
    image: String,
    /// Containers the test made itself.
    extra: std::sync::Mutex<Vec<String>>,
    /// Images (tags) the test made itself.
    images: std::sync::Mutex<Vec<String>>,
    _work: tempfile::TempDir,
    _turn: tokio::sync::RwLockReadGuard<'static, ()>,
}

impl Drop for Boxed {
    fn drop(&mut self) {
        let extra = self.extra.lock().map(|e| e.clone()).unwrap_or_default();
        for container in self.containers(None).into_iter().chain(extra) {
            self.docker.run(&["rm", "-f", &container]);
        }
        self.docker.run(&["rmi", "-f", &self.image]);
        for image in self.images.lock().map(|i| i.clone()).unwrap_or_default() {
            self.docker.run(&["rmi", "-f", &image]);
        }
    }
}

impl Boxed {
    /// An image (a tag) the test made, removed at the end.
    fn extra_image(&self, image: &str) {
        if let Ok(mut images) = self.images.lock() {
            images.push(image.to_string());
        }
    }

    async fn new() -> Option<Boxed> {
        let turn = common::docker::shared_turn().await;
        let docker = tokio::task::spawn_blocking(docker).await.unwrap()?;
        let work = tempfile::tempdir().unwrap();
        let image = image(&docker, work.path());
        let env = TestEnv::new();
        let state = work.path().join("mock-agent");
        std::fs::create_dir_all(&state).unwrap();
        env.agents_config(&boxed_agent(&image, &state, &docker.host_line()));
        Some(Boxed {
            env,
            docker,
            image,
            extra: Default::default(),
            images: Default::default(),
            _work: work,
            _turn: turn,
        })
    }

    fn identity(&self) -> String {
        std::fs::read_to_string(self.env.data_dir.join("runtime-id"))
            .map(|id| id.trim().to_string())
            .unwrap_or_default()
    }

    /// This data dir's containers (in `state` only, when given).
    fn containers(&self, state: Option<&str>) -> Vec<String> {
        let identity = self.identity();
        // No identity yet (batond never ran here): nothing of this test's. An empty label
        // value would match the containers of every data dir, other tests' included.
        if identity.is_empty() {
            return Vec::new();
        }
        let label = format!("label=io.baton.data-dir={identity}");
        let mut args = vec!["ps", "--all", "--filter", "label=io.baton.managed=true", "--filter", &label];
        let status = state.map(|s| format!("status={s}"));
        if let Some(status) = &status {
            args.extend(["--filter", status]);
        }
        args.extend(["--format", "{{.Names}}"]);
        self.docker.ok(&args).lines().map(str::to_string).collect()
    }

    async fn wait_containers(&self, count: usize, what: &str) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let containers = self.containers(None);
            if containers.len() == count {
                return containers;
            }
            assert!(tokio::time::Instant::now() < deadline, "{what}: {containers:?}");
            // Polled: Docker has no event for this that the test could wait on more simply.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test]
async fn a_docker_agent_keeps_its_turn_across_a_kill_9_of_batond_and_stop_removes_its_container() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, "boxed", "hello").await;
    let containers = boxed.containers(Some("running"));
    assert_eq!(containers.len(), 1, "one container runs the session's agent");
    assert!(containers[0].starts_with(&format!("baton-{}-exec-", boxed.identity())), "{containers:?}");

    let first = slow_turn_until(&client, &mut notes, &session_id, 10).await;
    server.kill9().await;

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let after = status_reconnected(&client, &mut notes, &session_id).await;
    assert_eq!((after.is_agent_running, after.needs_resume), (true, false), "reattached, not resumed");
    subscribe(&client, &session_id, Some(first.last().unwrap().seq)).await;
    let rest = collect_events(&mut notes, &session_id, is_turn_end).await;
    let all: Vec<EventRecord> = first.iter().chain(rest.iter()).cloned().collect();
    for pair in all.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "no gap and no duplicate: {pair:?}");
    }
    let turn: Vec<EventRecord> =
        all.iter().skip_while(|e| !matches!(e.event, SessionEvent::TurnStarted { .. })).cloned().collect();
    let expected: Vec<String> = (1..=60).map(|i| format!("s{i} ")).collect();
    assert_eq!(chunk_texts(&turn), expected, "every chunk once, in order");
    assert_eq!(boxed.containers(Some("running")), containers, "the same container");

    let reply = prompt(&client, &mut notes, &session_id, "still there?").await;
    assert_eq!(reply, "Echo: still there?");
    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    boxed.wait_containers(0, "stopping the session removes its container").await;
    server.stop().await;
}

#[tokio::test]
async fn a_docker_agents_stderr_is_kept_in_its_session_log_and_named_when_it_crashes() {
    let Some(boxed) = Boxed::new().await else { return };
    crate::agent_stderr::crash_after_coloured_stderr(&boxed.env, "boxed").await;
}

/// An agent started in a directory that holds batond's data dir (the TUI offers the current
/// directory: `$HOME` holds `~/.local/share/baton`) works there, but inside its container the data
/// dir is empty: the token, the database and agents.toml cannot be read or rewritten.
#[tokio::test]
async fn a_container_cannot_reach_the_data_dir_under_its_working_directory() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let home = env.data_dir.parent().unwrap();
    let mut params = env.task("t", "hello", "boxed", true);
    params.workdir = Some(home.to_string_lossy().into_owned());
    let created = client.request(params).await.expect("task.create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;
    let containers = boxed.containers(Some("running"));
    assert_eq!(containers.len(), 1, "{containers:?}");
    let inside = |path: &std::path::Path| {
        let out = boxed.docker.run(&[
            "exec",
            &containers[0],
            "/opt/baton/batond",
            "export",
            "--data-dir",
            &path.to_string_lossy(),
            &session_id,
        ]);
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (read, transcript) = inside(&env.data_dir);
    assert!(!read && !transcript.contains("hello"), "the container read batond's database: {transcript}");
    assert!(env.data_dir.join("token").is_file() && env.data_dir.join("agents.toml").is_file(), "intact outside");
    client.request(SessionStopParams { session_id }).await.expect("stop");
    server.stop().await;
}

#[tokio::test]
async fn a_killed_container_leaves_the_session_resumable_and_startup_removes_strays() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, "boxed", "remember pineapple").await;
    let container = boxed.containers(Some("running")).pop().expect("a container");
    boxed.docker.ok(&["kill", &container]);
    wait_needs_resume(&mut notes, &session_id).await;
    let error = status(&client, &session_id).await.last_error.unwrap_or_default();
    assert!(
        error.contains(&format!("its container {container} stopped (exit code 137)")) && error.contains("docker kill"),
        "says which container and what became of it: {error}"
    );
    boxed.wait_containers(0, "the dead container is removed").await;

    let resumed =
        client.request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false }).await;
    assert!(resumed.expect("resume").launched);
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert!(reply.contains("pineapple"), "{reply}");
    let running = boxed.containers(Some("running"));
    assert_eq!(running.len(), 1, "a new container: {running:?}");
    assert_ne!(running[0], container);
    server.stop().await;

    // Strays: a container of this data dir that no session owns, and one of another data dir.
    let identity = boxed.identity();
    let stray = format!("baton-{identity}-exec-stray");
    let other = format!("baton-elsewhere-{}", uuid::Uuid::new_v4().simple());
    let batond = batond();
    boxed.extra.lock().unwrap().push(other.clone());
    for (name, data_dir) in [(stray.as_str(), identity.as_str()), (other.as_str(), "elsewhere")] {
        let agent_id = name.rsplit_once("-exec-").map(|(_, id)| format!("exec-{id}")).unwrap_or(name.to_string());
        let agent_label = format!("io.baton.agent-id={agent_id}");
        let dir_label = format!("io.baton.data-dir={data_dir}");
        let volume = format!("{batond}:{batond}:ro");
        boxed.docker.ok(&[
            "run",
            "--detach",
            "--name",
            name,
            "--label",
            "io.baton.managed=true",
            "--label",
            &dir_label,
            "--label",
            &agent_label,
            "--volume",
            &volume,
            "--tmpfs",
            "/baton-agentctl",
            "--network",
            "none",
            "--entrypoint",
            batond,
            &boxed.image,
            "agentctl",
            "--data-dir",
            "/baton-agentctl",
        ]);
    }
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let s = status_reconnected(&client, &mut notes, &session_id).await;
    assert!(s.is_agent_running, "the session's own container is reattached");
    let left = boxed.wait_containers(1, "the stray container is removed at startup").await;
    assert_eq!(left, running, "only the session's container is left of this data dir");
    assert!(boxed.docker.run(&["inspect", &other]).status.success(), "another data dir's container is left alone");
    boxed.docker.run(&["rm", "-f", &other]);
    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    boxed.wait_containers(0, "stop removes the container").await;
    server.stop().await;
}

/// Every docker error says what to do, and none fails the session: a missing image or a mount
/// whose source is missing (the configuration) and a daemon that does not answer leave it
/// resumable with the error kept, and once the cause is fixed the same session resumes.
#[tokio::test]
async fn docker_errors_say_what_to_do_and_leave_the_session_resumable_until_fixed() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let host = boxed.docker.host_line();
    let missing_tag = format!("baton-test-missing:{}", uuid::Uuid::new_v4().simple());
    let absent = boxed._work.path().join("absent");
    // A network that vanished (removed since the configuration was written).
    let network = format!("baton-test-net-{}", uuid::Uuid::new_v4().simple());
    env.agents_config(&format!(
        r#"
        [agents.no-image]
        command = "{{batond}}"
        args = ["mock-agent", "--state-dir", "{{data_dir}}/mock-agent"]
        runtime = "docker"
        [agents.no-image.docker]
        image = "{missing_tag}"
        network = "none"
        {host}
        [agents.bad-mount]
        command = "{{batond}}"
        args = ["mock-agent", "--state-dir", "{{data_dir}}/mock-agent"]
        runtime = "docker"
        [agents.bad-mount.docker]
        image = "{image}"
        network = "none"
        mounts = ["{absent}:/absent"]
        {host}
        [agents.gone-net]
        command = "{{batond}}"
        args = ["mock-agent", "--state-dir", "{{data_dir}}/mock-agent"]
        runtime = "docker"
        [agents.gone-net.docker]
        image = "{image}"
        network = "{network}"
        {host}
        [agents.no-daemon]
        command = "{{batond}}"
        args = ["mock-agent", "--state-dir", "{{data_dir}}/mock-agent"]
        runtime = "docker"
        [agents.no-daemon.docker]
        image = "{image}"
        docker_host = "unix://{socket}"
        "#,
        image = boxed.image,
        absent = absent.display(),
        socket = env.data_dir.join("no-dockerd.sock").display(),
    ));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let launch = |agent: &'static str| {
        let client = &client;
        async move {
            let created = client.request(env.task("t", "", agent, false)).await.expect("task.create");
            let session_id = created.session.status.session_id.clone();
            let error = client
                .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
                .await
                .expect_err("the launch fails");
            (session_id, error.to_string())
        }
    };
    let resumable = |s: &SessionStatus, error: &str| {
        assert!(s.state != SessionState::Failed && s.is_resumable, "not the session's fault: {s:?}");
        let kept = s.last_error.as_deref().unwrap_or_default();
        assert!(kept.contains(error), "the error stays on the session: {kept:?} vs {error:?}");
    };
    let (missing, error) = launch("no-image").await;
    assert!(error.contains(&format!("{missing_tag} is not on the Docker daemon: build or load it")), "{error}");
    resumable(&status(&client, &missing).await, &format!("{missing_tag} is not on the Docker daemon"));

    let (mount, error) = launch("bad-mount").await;
    assert!(error.contains("bind source path does not exist") && error.contains("fix them"), "{error}");
    resumable(&status(&client, &mount).await, "bind source path does not exist");

    let (net, error) = launch("gone-net").await;
    assert!(error.contains(&format!("network {network} not found")) && error.contains("fix them"), "{error}");
    resumable(&status(&client, &net).await, "not found");

    let (unreachable, error) = launch("no-daemon").await;
    assert!(error.contains("no Docker daemon answers at unix://") && error.contains("start dockerd"), "{error}");
    resumable(&status(&client, &unreachable).await, "no Docker daemon answers");
    // A lazy resume (a message to a session) that fails the same way keeps its error there too.
    let created = client.request(env.task("t", "", "no-daemon", false)).await.expect("task.create");
    let lazy = created.session.status.session_id;
    let refused =
        client.request(MessageAddParams::new(lazy.clone(), "hello?")).await.expect_err("the lazy resume fails");
    assert!(refused.to_string().contains("no Docker daemon answers"), "{refused}");
    resumable(&status(&client, &lazy).await, "no Docker daemon answers");
    assert!(boxed.containers(None).is_empty(), "nothing was left behind");

    // Fixed: the image is loaded under the missing tag, the mount's source created.
    boxed.docker.ok(&["tag", &boxed.image, &missing_tag]);
    boxed.extra_image(&missing_tag);
    std::fs::create_dir_all(&absent).unwrap();
    boxed.docker.ok(&["network", "create", &network]);
    struct Network<'a>(&'a Docker, String);
    impl Drop for Network<'_> {
        fn drop(&mut self) {
            self.0.run(&["network", "rm", &self.1]);
        }
    }
    let _network = Network(&boxed.docker, network.clone());
    for session_id in [&missing, &mount, &net] {
        let resumed = client.request(SessionResumeParams::new(session_id.clone())).await.expect("resume once fixed");
        assert!(resumed.launched);
        subscribe(&client, session_id, Some(0)).await;
        wait_state(&client, &mut notes, session_id, SessionState::WaitingForInput).await;
        assert_eq!(status(&client, session_id).await.last_error, None, "cleared by the launch");
        client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    }
    boxed.wait_containers(0, "stopped sessions leave no container").await;
    server.stop().await;
}

/// `batond status` lists the agents in Docker, a plain `batond stop` says they keep running, and
/// `batond stop --agents` ends them and removes their containers.
#[tokio::test]
async fn batond_status_and_stop_agents_see_the_docker_agents() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    started_session(env, &client, &mut notes, "boxed", "hello").await;
    let container = boxed.containers(Some("running")).pop().expect("a container");
    let agent_id = container.rsplit_once("-exec-").map(|(_, id)| format!("exec-{id}")).unwrap();
    drop((client, notes));

    let (ok, status) = batond_cli(&["status"], &env.data_dir).await;
    assert!(ok, "{status}");
    assert!(status.contains("Docker (") && status.contains("): 1 agent(s)"), "{status}");
    assert!(status.contains(&format!("  {agent_id} running")), "{status}");

    let (ok, said) = batond_cli(&["stop"], &env.data_dir).await;
    assert!(ok, "{said}");
    assert!(said.contains("1 agent(s) keep running in Docker ("), "{said}");
    assert_eq!(boxed.containers(Some("running")), vec![container.clone()], "a plain stop leaves it");

    let (ok, said) = batond_cli(&["stop", "--agents"], &env.data_dir).await;
    assert!(ok, "{said}");
    assert!(said.contains("ended 1 agent(s) in Docker ("), "{said}");
    boxed.wait_containers(0, "stop --agents removes the container").await;
    drop(server);
}

/// An agent its container's memory limit kills is said to be killed for memory, with the
/// limit, rather than by signal 9; the session stays resumable. The spool's tmpfs, whose pages
/// count against that limit, is bounded to a quarter of it.
#[tokio::test]
async fn an_agent_killed_for_memory_in_its_container_is_said_so_with_the_limit() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let state = boxed._work.path().join("mock-agent");
    let table = format!(
        r#"
        [agents.small.docker]
        image = "{image}"
        network = "none"
        memory = "128m"
        mounts = ["{state}:{{data_dir}}/mock-agent"]
        {host}"#,
        image = boxed.image,
        state = state.display(),
        host = boxed.docker.host_line(),
    );
    env.agents_config(&mock_agent_in("small", "docker", &table));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, "small", "hello").await;
    let container = boxed.containers(Some("running")).pop().expect("a container");
    let tmpfs = boxed.docker.ok(&["inspect", "--format", "{{json .HostConfig.Tmpfs}}", &container]);
    assert!(tmpfs.contains(r#""/baton-agentctl":"mode=0700,size=33554432""#), "{tmpfs}");
    client.request(MessageAddParams::new(session_id.clone(), "/hog 1024")).await.unwrap();
    wait_needs_resume(&mut notes, &session_id).await;
    let error = status(&client, &session_id).await.last_error.unwrap_or_default();
    assert!(error.contains("The agent was killed for memory (limit 128m) in its container"), "{error}");
    assert!(!error.contains("signal 9"), "{error}");
    server.stop().await;
}

/// A data dir whose `boxed` agent runs on a Docker daemon of the test's own, which it restarts.
async fn on_own_daemon(live_restore: bool) -> Option<(common::docker::OwnDaemon, TestEnv, tempfile::TempDir)> {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("dockerd");
    let daemon =
        tokio::task::spawn_blocking(move || common::docker::OwnDaemon::start(&dir, live_restore)).await.unwrap()?;
    let image = image(&daemon.docker, work.path());
    let env = TestEnv::new();
    let state = work.path().join("mock-agent");
    std::fs::create_dir_all(&state).unwrap();
    env.agents_config(&boxed_agent(&image, &state, &daemon.docker.host_line()));
    Some((daemon, env, work))
}

/// With `live-restore`, a restart of the Docker daemon mid-turn loses nothing: the container
/// runs on, the `docker exec` of the attachment is reconnected once the daemon answers again,
/// and the turn streams on with no gap and no duplicate.
#[tokio::test]
async fn a_docker_daemon_restart_with_live_restore_loses_nothing() {
    let _turn = common::docker::exclusive_turn().await;
    let Some((mut daemon, env, _work)) = on_own_daemon(true).await else { return };
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "boxed", "hello").await;
    let first = slow_turn_until(&client, &mut notes, &session_id, 10).await;
    let daemon = tokio::task::spawn_blocking(move || {
        daemon.restart();
        daemon
    })
    .await
    .unwrap();
    let rest = collect_events(&mut notes, &session_id, is_turn_end).await;
    let all: Vec<EventRecord> = first.iter().chain(rest.iter()).cloned().collect();
    for pair in all.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "no gap and no duplicate: {pair:?}");
    }
    let turn: Vec<EventRecord> =
        all.iter().skip_while(|e| !matches!(e.event, SessionEvent::TurnStarted { .. })).cloned().collect();
    let expected: Vec<String> = (1..=60).map(|i| format!("s{i} ")).collect();
    assert_eq!(chunk_texts(&turn), expected, "every chunk once, in order");
    let s = status(&client, &session_id).await;
    assert!(s.is_agent_running && !s.needs_resume, "the same agent goes on: {s:?}");
    assert_eq!(prompt(&client, &mut notes, &session_id, "still there?").await, "Echo: still there?");
    server.stop().await;
    // Its containers removed, then stopped (blocking commands).
    tokio::task::spawn_blocking(move || drop(daemon)).await.unwrap();
}

/// Without `live-restore`, a restart of the Docker daemon stops the containers: the session
/// says so (and that live-restore would have kept it) and resumes in a new container.
#[tokio::test]
async fn a_docker_daemon_restart_without_live_restore_ends_the_agent_and_says_why() {
    let _turn = common::docker::exclusive_turn().await;
    let Some((mut daemon, env, _work)) = on_own_daemon(false).await else { return };
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "boxed", "remember pineapple").await;
    let daemon = tokio::task::spawn_blocking(move || {
        daemon.restart();
        daemon
    })
    .await
    .unwrap();
    wait_needs_resume(&mut notes, &session_id).await;
    let error = status(&client, &session_id).await.last_error.unwrap_or_default();
    assert!(error.contains("stopped (exit code 137)") && error.contains("restarted without live-restore"), "{error}");
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert!(reply.contains("pineapple"), "resumed in a new container: {reply}");
    server.stop().await;
    tokio::task::spawn_blocking(move || drop(daemon)).await.unwrap();
}

/// Free bytes of the filesystem at `path`, and its size.
fn statvfs(path: &std::path::Path) -> Option<(u64, u64)> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs(3) fills the struct it is given; the path is a valid C string.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let block = stat.f_frsize as u64;
    Some((stat.f_bavail as u64 * block, stat.f_blocks as u64 * block))
}

/// Output piling up in the spool while batond is down cannot get a memory-limited container
/// killed: the spool's tmpfs fills up to its bound (a quarter of the limit) and the container,
/// its agent host and the agent run on.
#[tokio::test]
async fn a_flood_of_output_while_batond_is_down_fills_the_bounded_spool_not_the_memory_limit() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let state = boxed._work.path().join("mock-agent");
    let table = format!(
        r#"
        [agents.small.docker]
        image = "{image}"
        network = "none"
        memory = "128m"
        mounts = ["{state}:{{data_dir}}/mock-agent"]
        {host}"#,
        image = boxed.image,
        state = state.display(),
        host = boxed.docker.host_line(),
    );
    env.agents_config(&mock_agent_in("small", "docker", &table));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, "small", "hello").await;
    let container = boxed.containers(Some("running")).pop().expect("a container");
    let pid = boxed.docker.ok(&["inspect", "--format", "{{.State.Pid}}", &container]);
    // The container's tmpfs, seen from this machine through its main process.
    let tmpfs = std::path::PathBuf::from(format!("/proc/{pid}/root/baton-agentctl"));
    let message = MessageAddParams::new(session_id.clone(), "/chunks 1000000");
    client.request(message).await.unwrap();
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    server.kill9().await;

    // Nothing acknowledges the output now: it goes to the spool until its tmpfs is full.
    let deadline = tokio::time::Instant::now() + WAIT * 4;
    loop {
        let state = boxed.docker.ok(&["inspect", "--format", "{{json .State}}", &container]);
        assert!(state.contains(r#""Running":true"#), "the container died: {state}");
        let (free, size) = statvfs(&tmpfs).expect("the container's tmpfs");
        assert!(size <= 32 << 20, "the spool's tmpfs is bounded: {size} bytes");
        if free < 1 << 20 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the spool did not fill its tmpfs: {free} of {size} free");
        // Polled: nothing signals the spool's growth outside the container.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let running = boxed.docker.ok(&["inspect", "--format", "{{json .State}}", &container]);
    assert!(running.contains(r#""Running":true"#) && running.contains(r#""OOMKilled":false"#), "{running}");
    let agents = boxed.docker.ok(&["exec", &container, "/opt/baton/batond", "status", "--data-dir", "/baton-agentctl"]);
    assert!(agents.contains("1 agent(s)") && agents.contains(" running"), "the agent runs on: {agents}");
}

/// `task.shell` of a task whose agent runs in Docker: `docker exec -it` into the agent's own
/// container, in its working directory. Run here without a terminal (`-i`), the shell it opens
/// runs what it is given there.
#[tokio::test]
async fn the_shell_of_a_docker_task_opens_in_the_agents_container_and_directory() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, "boxed", "hello").await;
    let task_id = status(&client, &session_id).await.task_id;
    let shell = client.request(TaskShellParams { task_id }).await.expect("task.shell");
    let container = boxed.containers(Some("running")).pop().expect("the agent's container");
    assert_eq!(shell.runtime, "docker");
    let workdir = env.workdir.canonicalize().unwrap().to_string_lossy().into_owned();
    let mut expected = vec!["docker".to_string()];
    expected.extend(boxed.docker.args());
    expected.extend(["exec", "-it", "-w", &workdir, &container, "/bin/sh", "-c"].map(String::from));
    expected.push("exec \"${SHELL:-/bin/sh}\" -l".into());
    assert_eq!(shell.argv, expected);
    assert!(shell.command.starts_with("docker ") && shell.command.contains(&container), "{}", shell.command);

    let said = shell_without_terminal(&shell.argv, ("-it", "-i"), "pwd\nexit\n").await;
    assert_eq!(said.trim(), workdir, "the shell runs in the agent's directory");
    server.stop().await;
}

/// An agent in a container is offered terminals: the command runs in its container, in its
/// directory, with the environment it asks for; a kill ends it there.
#[tokio::test]
async fn a_docker_agents_terminal_runs_in_its_container_and_a_kill_ends_it_there() {
    let Some(boxed) = Boxed::new().await else { return };
    let env = &boxed.env;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, "boxed", "hello").await;
    let container = boxed.containers(Some("running")).pop().expect("the agent's container");
    let ran = prompt(
        &client,
        &mut notes,
        &session_id,
        "/terminal pwd; test -f /.dockerenv && echo in-a-container; echo $MOCK_TERMINAL; exit 4",
    )
    .await;
    assert!(ran.starts_with("Exit 4, signal none"), "{ran}");
    let workdir = env.workdir.canonicalize().unwrap().to_string_lossy().into_owned();
    let said: Vec<&str> = ran.split_once(": ").map(|(_, out)| out.lines().collect()).unwrap_or_default();
    assert_eq!(said, [workdir.as_str(), "in-a-container", "yes"], "{ran}");

    let killed = prompt(&client, &mut notes, &session_id, "/terminal-kill echo $$; exec sleep 1000").await;
    assert!(killed.starts_with("Exit none, signal SIGKILL"), "{killed}");
    let pid: u32 = killed.rsplit(": ").next().and_then(|p| p.trim().parse().ok()).expect("the command's pid");
    // The pid is the container's: asked there.
    let probe = format!("test -e /proc/{pid} && echo alive || echo gone");
    until(&format!("the killed command to end in {container}"), || {
        boxed.docker.ok(&["exec", &container, "/bin/sh", "-c", &probe]).trim() == "gone"
    })
    .await;
    server.stop().await;
}

/// A remote Docker daemon that accepts connections and never answers (a host that hangs)
/// delays nothing at startup: batond listens and answers while the daemon is still being asked
/// for its containers, in the background.
#[tokio::test]
async fn a_docker_daemon_that_never_answers_delays_nothing_at_startup() {
    if docker().is_none() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = accepted.clone();
    // Connections are held open, unanswered, for as long as the test runs.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    let env = TestEnv::new();
    let table =
        format!("[agents.far.docker]\nimage = \"baton-never-pulled\"\ndocker_host = \"tcp://127.0.0.1:{port}\"\n");
    env.agents_config(&mock_agent_in("far", "docker", &table));
    let server = env.start().await;
    until("batond to ask the daemon for its containers", || accepted.load(std::sync::atomic::Ordering::SeqCst) > 0)
        .await;
    let (client, mut notes) = server.client().await;
    // Answered while the daemon's answer is still awaited; a local agent works meanwhile.
    client.request(SessionListParams::default()).await.expect("task.session.list");
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "meanwhile?").await, "Echo: meanwhile?");
    server.stop().await;
}
