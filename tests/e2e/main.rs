//! The end-to-end tests: one binary, a module per area. Each starts the real `batond` on an
//! ephemeral loopback port with a temporary data dir (the testkit), runs real agent processes
//! and drives them through the typed client over real WebSockets; the Docker and ssh modules
//! use a real Docker daemon and a real `sshd`. Shared helpers live in `common`.

mod common;

mod agent_compat;
mod agent_stderr;
mod agentctl_stdio;
mod agents;
mod approvals;
mod attention;
mod batond_cli;
mod changes;
mod docker_runtime;
mod docker_stdio;
mod export;
mod faults;
mod fork;
mod foundation;
mod hosted;
mod hostile_agent;
mod hostile_client;
mod interop;
mod js_client;
mod lifecycle;
mod mcp;
mod options;
mod pairing;
mod protocol;
mod queue;
mod real_agents;
mod replay_agent;
mod resume;
mod runtime_figures;
mod runtimes;
mod search;
mod session_list;
mod ssh_runtime;
mod store_upgrade;
mod terminals;
mod testkit_use;
mod tls;
mod typescript;
mod usage;
mod web_approvals;
mod web_push;
mod web_tools;
mod web_ui;
mod webhooks;

/// Every file of this directory is one of the modules above: a new file that is not declared is
/// an error here, not a test that silently never runs.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("main.rs");
    for entry in std::fs::read_dir(&dir).expect("tests/e2e") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        let Some(module) = name.strip_suffix(".rs").filter(|m| *m != "main") else { continue };
        assert!(main.contains(&format!("\nmod {module};\n")), "tests/e2e/{name} is not declared in main.rs");
    }
}
