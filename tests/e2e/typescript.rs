//! The TypeScript declarations batond serves (`server/web/baton-client.d.ts` and the generated
//! `server/web/protocol.d.ts`) as a TypeScript project uses them: a program
//! (`tests/fixtures/ts_consumer.ts`) that narrows frames and events, handles kinds, notifications
//! and error codes a newer server adds, and calls the client, type-checks strict under the
//! module resolutions `nodenext`, `node16` and `bundler`. The compiler is npm's `typescript`,
//! installed once under target/; skipped, saying so, without `npm` (or offline).

use std::path::{Path, PathBuf};
use std::process::Command;

use baton_protocol::{protocol_schema, SessionEvent};
use serde_json::Value;

const TYPESCRIPT: &str = "typescript@5.9";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// `tsc` of an npm install under target/ (once); None, after saying why, where impossible.
fn tsc() -> Option<PathBuf> {
    static TSC: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    TSC.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("typescript");
        let tsc = dir.join("node_modules/.bin/tsc");
        let ready = dir.join(".installed");
        if std::fs::read_to_string(&ready).is_ok_and(|v| v == TYPESCRIPT) && tsc.is_file() {
            return Some(tsc);
        }
        std::fs::create_dir_all(&dir).ok()?;
        let install = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&dir)
            .arg(TYPESCRIPT)
            .output();
        match install {
            Ok(out) if out.status.success() && tsc.is_file() => {
                std::fs::write(&ready, TYPESCRIPT).ok()?;
                Some(tsc)
            }
            Ok(out) => {
                eprintln!(
                    "SKIPPED TypeScript test: npm install {TYPESCRIPT} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED TypeScript test: npm could not run: {e}");
                None
            }
        }
    })
    .clone()
}

/// A scratch project: the served declarations and module in `web/`, the consumer program, and
/// a package.json of an ES module project (what `nodenext` and `node16` read).
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("web")).expect("web dir");
    for file in ["baton-client.d.ts", "baton-client.js", "protocol.d.ts"] {
        std::fs::copy(repo("server/web").join(file), dir.path().join("web").join(file)).expect("copy");
    }
    std::fs::copy(repo("tests/fixtures/ts_consumer.ts"), dir.path().join("main.ts")).expect("copy");
    std::fs::write(dir.path().join("package.json"), r#"{"name": "consumer", "private": true, "type": "module"}"#)
        .expect("package.json");
    dir
}

fn check(tsc: &Path, dir: &Path, module: &str, resolution: &str) -> Result<(), String> {
    let out = Command::new(tsc)
        .current_dir(dir)
        .args(["--noEmit", "--strict", "--target", "es2022", "--lib", "es2022,dom"])
        .args(["--module", module, "--moduleResolution", resolution])
        .args(["--exactOptionalPropertyTypes", "--noUncheckedIndexedAccess", "main.ts"])
        .output()
        .expect("run tsc");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

#[test]
fn declarations_compile_strict_under_nodenext_node16_and_bundler() {
    let Some(tsc) = tsc() else { return };
    let dir = project();
    for (module, resolution) in [("nodenext", "nodenext"), ("node16", "node16"), ("esnext", "bundler")] {
        check(&tsc, dir.path(), module, resolution)
            .unwrap_or_else(|e| panic!("--module {module} --moduleResolution {resolution}:\n{e}"));
    }
}

/// What the consumer relies on is checked, not only accepted: a payload that did not narrow,
/// or an unknown kind that is not representable, fails to compile.
#[test]
fn the_checks_reject_a_program_that_misuses_the_declarations() {
    let Some(tsc) = tsc() else { return };
    let dir = project();
    let main = dir.path().join("main.ts");
    let text = std::fs::read_to_string(&main).expect("main.ts");
    let wrong = text.replace("return frame.payload.session.session_id;", "return frame.payload.sessions[0];");
    assert_ne!(wrong, text);
    std::fs::write(&main, wrong).expect("write");
    let error = check(&tsc, dir.path(), "nodenext", "nodenext").expect_err("a task.create answer has no sessions");
    assert!(error.contains("sessions"), "{error}");
}

/// The known event kinds and notifications baton-client.js tells apart (`isKnownEvent`,
/// `isKnownNotification`) are the protocol's.
#[test]
fn the_clients_known_kinds_and_notifications_are_the_protocols() {
    let script = format!(
        "import('{}').then(m => console.log(JSON.stringify([m.SESSION_EVENT_KINDS, m.NOTIFICATION_ACTIONS])))",
        repo("server/web/baton-client.js").display()
    );
    let out = match Command::new("node").args(["--input-type=module", "-e", &script]).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIPPED: node could not run: {e}");
            return;
        }
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lists: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let kinds: Vec<&str> = lists[0].as_array().expect("kinds").iter().filter_map(Value::as_str).collect();
    assert_eq!(kinds, SessionEvent::KINDS, "SESSION_EVENT_KINDS of server/web/baton-client.js");
    let mut notifications: Vec<&str> =
        lists[1].as_array().expect("notifications").iter().filter_map(Value::as_str).collect();
    notifications.sort_unstable();
    let schema = protocol_schema();
    let mut expected: Vec<&str> =
        schema["x-notifications"].as_object().expect("x-notifications").keys().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(notifications, expected, "NOTIFICATION_ACTIONS of server/web/baton-client.js");
}
