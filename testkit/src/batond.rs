//! Finding the `batond` binary to run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The `batond` the kit runs, found once per process:
/// 1. `BATON_BATOND`, when set (another build, an installed one);
/// 2. a `batond` next to the running executable or one directory up (where Cargo puts binaries
///    for the tests, benches and examples of the same target directory);
/// 3. otherwise built with `cargo build -p baton-server --bin batond` in the workspace the kit
///    belongs to (same profile as the running executable), and run from where Cargo put it
///    (the workspace's target directory, or `CARGO_TARGET_DIR`): this is how a crate outside
///    the workspace that depends on the kit by path finds it;
/// 4. otherwise `batond` on `PATH`.
pub fn batond_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(locate).clone()
}

fn locate() -> PathBuf {
    if let Some(path) = std::env::var_os("BATON_BATOND") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().ok();
    let dirs: Vec<PathBuf> = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|dir| {
            std::iter::successors(Some(dir.to_path_buf()), |d| d.parent().map(Path::to_path_buf)).take(2).collect()
        })
        .unwrap_or_default();
    let beside = |dirs: &[PathBuf]| dirs.iter().map(|dir| dir.join("batond")).find(|path| path.is_file());
    if let Some(found) = beside(&dirs) {
        return found;
    }
    if let Some(built) = build(exe.as_deref()) {
        return built;
    }
    PathBuf::from("batond")
}

/// Builds batond in the workspace the kit was compiled in and returns the executable Cargo
/// reports for it (wherever its target directory is). None when that is not possible (the kit
/// was copied elsewhere, or the build failed).
fn build(exe: Option<&Path>) -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf);
    let workspace = workspace.filter(|w| w.join("server").join("Cargo.toml").is_file())?;
    let release = exe.is_some_and(|exe| exe.components().any(|c| c.as_os_str() == "release"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&workspace)
        .args(["build", "-p", "baton-server", "--bin", "batond", "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if release {
        command.arg("--release");
    }
    eprintln!(
        "baton-testkit: building batond ({}) in {}",
        if release { "release" } else { "dev" },
        workspace.display()
    );
    let output = command.output().ok().filter(|output| output.status.success())?;
    let built = String::from_utf8_lossy(&output.stdout).lines().find_map(batond_artifact);
    if built.is_none() {
        eprintln!("baton-testkit: cargo built batond but did not say where");
    }
    built
}

/// The executable of a Cargo `compiler-artifact` message (`--message-format=json`) when it is
/// batond's.
fn batond_artifact(line: &str) -> Option<PathBuf> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    let is_batond = message["reason"] == "compiler-artifact" && message["target"]["name"] == "batond";
    let executable = message["executable"].as_str().filter(|_| is_batond)?;
    Some(PathBuf::from(executable))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_artifact_message_of_batond_names_its_executable() {
        let line = r#"{"reason":"compiler-artifact","target":{"name":"batond","kind":["bin"]},"executable":"/t/debug/batond","fresh":true}"#;
        assert_eq!(batond_artifact(line), Some(PathBuf::from("/t/debug/batond")));
        let other = r#"{"reason":"compiler-artifact","target":{"name":"baton_protocol"},"executable":null}"#;
        assert_eq!(batond_artifact(other), None);
        assert_eq!(batond_artifact("Compiling baton-server"), None);
        assert_eq!(batond_artifact(r#"{"reason":"build-finished","success":true}"#), None);
    }
}
