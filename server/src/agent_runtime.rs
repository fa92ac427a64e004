//! How an agent process is run: the one name that agents.toml, `--agent-runtime` and the
//! store's executor records share. A leaf: it names no other module of the server, so the
//! store and the agents can both use it without one calling into the other.

baton_protocol::string_enum! {
    /// How an agent process is run.
    #[derive(Default, clap::ValueEnum)]
    AgentRuntime {
        /// A child of the server; it dies with the server and is resumed after a restart.
        #[default]
        Standalone => "standalone",
        /// Run by the agent host (`batond agentctl`); it outlives the server and is reattached.
        Hosted => "hosted",
        /// In a container of its own, run by an agent host inside it (`[agents.NAME.docker]`);
        /// it outlives the server and is reattached.
        Docker => "docker",
        /// On another machine, run by an agent host there reached over `ssh`
        /// (`[agents.NAME.ssh]`); it outlives the server and the connection, and is reattached.
        Ssh => "ssh",
    }
}
