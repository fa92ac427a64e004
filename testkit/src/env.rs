//! A test's data dir and working directory.

use std::path::PathBuf;

use baton_protocol::TaskCreateParams;

use crate::{Server, ServerBuilder};

/// A temporary data dir and working directory that outlive server restarts (removed when
/// dropped).
pub struct TestEnv {
    _dir: tempfile::TempDir,
    pub data_dir: PathBuf,
    pub workdir: PathBuf,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("tempdir");
        let data_dir = dir.path().join("data");
        let workdir = dir.path().join("work");
        std::fs::create_dir_all(&data_dir).expect("create the data dir");
        std::fs::create_dir_all(&workdir).expect("create the workdir");
        TestEnv { _dir: dir, data_dir, workdir }
    }

    /// Writes `agents.toml` (the agents the server offers, read at startup).
    pub fn agents_config(&self, toml: &str) {
        std::fs::write(self.data_dir.join("agents.toml"), toml).expect("write agents.toml");
    }

    /// A builder for a batond on this data dir (flags, listen address, environment).
    pub fn server(&self) -> ServerBuilder {
        ServerBuilder::new(&self.data_dir)
    }

    pub async fn start(&self) -> Server {
        self.server().start().await
    }

    pub async fn start_with(&self, args: &[&str]) -> Server {
        self.server().args(args).start().await
    }

    /// `task.create` parameters with the agent `agent`, working in this env's workdir.
    pub fn task(&self, title: &str, description: &str, agent: &str, start: bool) -> TaskCreateParams {
        let mut params = TaskCreateParams::new(title, description, agent);
        params.workdir = Some(self.workdir.to_string_lossy().into_owned());
        params.start = start;
        params
    }
}
