//! Logs go to a file: the terminal belongs to the TUI, and a stray line would tear the screen.

use std::path::Path;

use anyhow::{Context, Result};
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

pub const LOG_FILE: &str = "baton-tui.log";

/// Sends `tracing` output to `dir/baton-tui.log` (level from `RUST_LOG`, default info). Keep the
/// guard alive until exit: dropping it flushes the last lines.
pub fn init(dir: &Path) -> Result<WorkerGuard> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create the data directory {}", dir.display()))?;
    let appender = tracing_appender::rolling::never(dir, LOG_FILE);
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .try_init()
        .map_err(|e| anyhow::anyhow!("could not set up logging: {e}"))?;
    Ok(guard)
}
