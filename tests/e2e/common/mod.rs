//! Test harness: the testkit (a real `batond` on an ephemeral loopback port with a temporary
//! data dir, driven through the typed client over a real WebSocket), and what only these tests
//! need.

pub use baton_testkit::*;

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
