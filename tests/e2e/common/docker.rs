//! A Docker daemon for tests, and an image built from this build's batond. Where `docker info`
//! fails, the setup installs Debian's `docker.io` and starts `dockerd` on a socket of its own
//! under the system's temp dir (left running for the next run); where that is impossible (not
//! root, no network...), it says so on stderr and the test is skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::CommandExt;

/// Where the test's own daemon lives when there was none.
pub fn own_daemon_dir() -> PathBuf {
    std::env::temp_dir().join("baton-test-dockerd")
}

/// `docker` with the daemon to use (`-H` first when it is the test's own).
#[derive(Clone)]
pub struct Docker {
    pub host: Option<String>,
}

impl Docker {
    /// The agent config's `docker_host` line for this daemon (empty for the default one).
    pub fn host_line(&self) -> String {
        self.host.as_ref().map(|h| format!("docker_host = \"{h}\"\n")).unwrap_or_default()
    }

    pub fn args(&self) -> Vec<String> {
        match &self.host {
            Some(host) => vec!["-H".into(), host.clone()],
            None => Vec::new(),
        }
    }

    pub fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .args(self.args())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("docker {args:?}: {e}"))
    }

    pub fn ok(&self, args: &[&str]) -> String {
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

/// Taken by every Docker test: exclusively by the tests that start a Docker daemon of their
/// own and by the test of a remote daemon reached over ssh, shared by the others. That test
/// was seen to lose its container at its first `docker exec` ("No such container") while
/// other Docker tests ran (a daemon started beside the shared one, and on a loaded machine
/// with only the shared daemon's tests beside it); the cause is not found, so it runs alone.
static DOCKER_TESTS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The turn of a test that no other Docker test may run beside.
pub async fn exclusive_turn() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    DOCKER_TESTS.write().await
}

/// The turn of a Docker test that others of its kind may run beside.
pub async fn shared_turn() -> tokio::sync::RwLockReadGuard<'static, ()> {
    DOCKER_TESTS.read().await
}

fn skip(why: &str) -> Option<Docker> {
    eprintln!("SKIPPED Docker test: {why}");
    None
}

/// A Docker daemon to talk to: the configured one, else the test's own (installing docker.io
/// and starting dockerd when needed); None, after saying why, when there can be none.
pub fn docker() -> Option<Docker> {
    // Once per test binary: its tests run at once, and one install and one daemon serve all.
    static DOCKER: std::sync::Mutex<Option<Option<Docker>>> = std::sync::Mutex::new(None);
    let mut found = DOCKER.lock().unwrap_or_else(|p| p.into_inner());
    if found.is_none() {
        *found = Some(find_or_start_docker());
    } else if let Some(None) = &*found {
        eprintln!("SKIPPED Docker test: see the reason above");
    }
    found.clone().flatten()
}

fn find_or_start_docker() -> Option<Docker> {
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

/// The `boxed` agent of the docker tests: the mock agent in `image`, no network, its state dir
/// `state` (outside the data dir: batond never lets a container reach that) mounted where the
/// mock looks for it; `host_line` is its `docker_host` line (see [`Docker::host_line`]).
pub fn boxed_agent(image: &str, state: &Path, host_line: &str) -> String {
    let table = format!(
        r#"
        [agents.boxed.docker]
        image = "{image}"
        network = "none"
        mounts = ["{state}:{{data_dir}}/mock-agent"]
        {host_line}"#,
        state = state.display()
    );
    super::mock_agent_in("boxed", "docker", &table)
}

/// An image with this build's batond (and the libraries it links) at /opt/baton/batond, and
/// this machine's /bin/sh (for a shell in the container).
pub fn image(docker: &Docker, work: &Path) -> String {
    let root = work.join("image");
    let batond = Path::new(super::batond());
    let shell = Path::new("/bin/sh");
    let sleep = Path::new("/bin/sleep");
    let mut files = vec![batond.to_path_buf(), shell.to_path_buf(), sleep.to_path_buf()];
    for program in [batond, shell, sleep] {
        let ldd = Command::new("ldd").arg(program).output().expect("ldd");
        for word in String::from_utf8_lossy(&ldd.stdout).split_whitespace() {
            if word.starts_with('/') && !files.iter().any(|f| f == Path::new(word)) {
                files.push(PathBuf::from(word));
            }
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
pub struct Cleanup<'a> {
    pub docker: &'a Docker,
    pub container: String,
    pub image: String,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        self.docker.run(&["rm", "-f", &self.container]);
        self.docker.run(&["rmi", "-f", &self.image]);
    }
}

/// A Docker daemon of the test's own, under `dir` (its socket, data and state), which the test
/// stops and starts again: a daemon restart. With `live_restore`, containers keep running
/// across it. No bridge and no iptables rules: it shares the machine with other daemons, and
/// the tests' containers have no network.
pub struct OwnDaemon {
    dir: PathBuf,
    live_restore: bool,
    child: Option<std::process::Child>,
    pub docker: Docker,
}

impl OwnDaemon {
    /// None (after saying why) where no daemon can be started: not root, no dockerd.
    pub fn start(dir: &Path, live_restore: bool) -> Option<OwnDaemon> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED Docker test: starting a Docker daemon of the test's own needs root");
            return None;
        }
        // The shared daemon's setup installs dockerd where it is missing.
        docker()?;
        let socket = format!("unix://{}", dir.join("docker.sock").display());
        let mut daemon =
            OwnDaemon { dir: dir.to_path_buf(), live_restore, child: None, docker: Docker { host: Some(socket) } };
        daemon.run().then_some(daemon)
    }

    fn run(&mut self) -> bool {
        let dir = &self.dir;
        let _ = std::fs::create_dir_all(dir);
        let Ok(log) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("dockerd.log")) else {
            return false;
        };
        let mut command = Command::new("dockerd");
        command
            .arg("-H")
            .arg(self.docker.host.as_deref().unwrap_or_default())
            .arg("--data-root")
            .arg(dir.join("root"))
            .arg("--exec-root")
            .arg(dir.join("exec"))
            .arg("--pidfile")
            .arg(dir.join("dockerd.pid"))
            .args(["--bridge=none", "--iptables=false", "--ip6tables=false"]);
        if self.live_restore {
            command.arg("--live-restore");
        }
        let started = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log).process_group(0).spawn();
        let Ok(mut child) = started else { return false };
        // Polled: dockerd has no readiness signal but its socket answering.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if answers(self.docker.host.as_deref()) {
                self.child = Some(child);
                return true;
            }
            if let Ok(Some(status)) = child.try_wait() {
                eprintln!("SKIPPED Docker test: dockerd of the test's own exited ({status})");
                return false;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = child.kill();
        false
    }

    /// Stops the daemon (SIGTERM, as a service manager does) and waits for it to exit.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling the daemon this test started.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let _ = child.wait();
        }
    }

    /// A daemon restart: stopped, then started again on the same state.
    pub fn restart(&mut self) {
        self.stop();
        assert!(self.run(), "the test's own dockerd started again: see {}", self.dir.join("dockerd.log").display());
    }
}

impl Drop for OwnDaemon {
    /// Removes its containers (with `live-restore` they would outlive the daemon), then stops it.
    fn drop(&mut self) {
        if self.child.is_some() {
            let all = self.docker.run(&["ps", "--all", "--quiet"]);
            for id in String::from_utf8_lossy(&all.stdout).split_whitespace() {
                self.docker.run(&["rm", "--force", id]);
            }
        }
        self.stop();
        // dockerd bind-mounts its data root on itself and leaves it so when it exits: undone,
        // so that the test's directory can be removed.
        if let Ok(root) = std::ffi::CString::new(self.dir.join("root").as_os_str().as_encoded_bytes()) {
            // SAFETY: umount2(2) with a valid C string; a path that is not mounted fails harmlessly.
            unsafe {
                libc::umount2(root.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
}
