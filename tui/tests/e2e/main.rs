//! The terminal client's integration tests: one binary, a module per area. Most drive the
//! app with scripted server data (`common`); the live modules run the real `batond` and the
//! client over a real WebSocket (`common::live`), and the tmux modules run the real `baton`
//! binary in a terminal (`common::tmux`). Screens are compared with insta snapshots
//! (`snapshots/`).

mod app_flow;
mod approvals_view;
mod archived_view;
mod auto_resume_flow;
mod changes_view;
mod common;
mod config_file;
mod connection_flow;
mod copy_keys;
mod error_details;
mod filter_and_history;
mod live_clients;
mod live_screens;
mod module_layers;
mod mouse;
mod narrow_screens;
mod needs_you;
mod older_history;
mod permission_keys;
mod prompt_flow;
mod resume_failure;
mod rich_content;
mod screens;
mod scroll_flow;
mod search_export_fork;
mod session_keys;
mod stop_server;
mod tmux_changes;
mod tmux_e2e;
mod tmux_mouse;
mod tmux_reading;
mod transcript_focus;
mod wrapped_items;

/// Every file of this directory is one of the modules above: a new file that is not declared is
/// an error here, not a test that silently never runs.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("main.rs");
    for entry in std::fs::read_dir(&dir).expect("tui/tests/e2e") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "main") else { continue };
        assert!(main.contains(&format!("\nmod {module};\n")), "tui/tests/e2e/{name} is not declared in main.rs");
    }
}
