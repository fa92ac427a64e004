//! Finding the `batond` binary to run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `batond` the kit runs, found once per process:
/// 1. `BATON_BATOND`, when set (another build, an installed one);
/// 2. a `batond` next to the running executable or one directory up (where Cargo puts binaries
///    for the tests, benches and examples of the same target directory);
/// 3. otherwise built with `cargo build -p baton-server --bin batond` in this workspace (same
///    profile as the running executable), when the kit runs from inside it;
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
    if build(exe.as_deref()) {
        if let Some(found) = beside(&dirs) {
            return found;
        }
    }
    PathBuf::from("batond")
}

/// Builds batond in the workspace the kit was compiled in, into the target directory of the
/// running executable. False when that is not possible (the kit was copied elsewhere).
fn build(exe: Option<&Path>) -> bool {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf);
    let Some(workspace) = workspace.filter(|w| w.join("server").join("Cargo.toml").is_file()) else {
        return false;
    };
    let release = exe.is_some_and(|exe| exe.components().any(|c| c.as_os_str() == "release"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(&workspace).args(["build", "-p", "baton-server", "--bin", "batond"]);
    if release {
        command.arg("--release");
    }
    eprintln!("baton-testkit: building batond ({})", if release { "release" } else { "dev" });
    command.status().is_ok_and(|status| status.success())
}
