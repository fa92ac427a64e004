//! The agent's file-system requests (ACP `fs/read_text_file`, `fs/write_text_file`): paths must
//! be absolute, beneath the session's working directory as the kernel resolves them (a symlink
//! out of it is not followed, dangling or not), and never in the data dir (see `sandbox`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::agent::acp::{outgoing, RpcError};
use crate::orchestrator::agent_requests::sandbox::{Refusal, Sandbox, WorkdirPin};

/// Largest file an agent may read through fs/read_text_file.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

fn requested_path(params: &Value) -> Result<PathBuf, RpcError> {
    params
        .get("path")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .ok_or_else(|| RpcError::invalid_params("missing path"))
}

/// A refused request as the agent sees it: invalid params for a path it may not use, the file
/// system's error otherwise.
fn refusal_error(refusal: Refusal) -> RpcError {
    match refusal {
        Refusal::Invalid(message) => RpcError::invalid_params(message),
        Refusal::Io(message) => RpcError::new(-32002, message),
    }
}

/// The session's working directory: its path and which directory it was at launch.
#[derive(Debug, Clone, Copy)]
pub struct Workdir<'a> {
    pub path: &'a Path,
    pub pin: Option<WorkdirPin>,
}

/// Runs `f` on the sandbox of `workdir` on a blocking thread (file I/O).
async fn in_sandbox<T: Send + 'static>(
    workdir: Workdir<'_>,
    data_dir: &Path,
    f: impl FnOnce(Sandbox) -> Result<T, Refusal> + Send + 'static,
) -> Result<T, RpcError> {
    let sandbox = Sandbox::new(workdir.path, workdir.pin, data_dir).map_err(refusal_error)?;
    tokio::task::spawn_blocking(move || f(sandbox))
        .await
        .map_err(|e| RpcError::internal(format!("file request: {e}")))?
        .map_err(refusal_error)
}

/// fs/read_text_file: the file's text, or `limit` lines from line `line` (1-based).
pub async fn read_text_file(workdir: Workdir<'_>, data_dir: &Path, params: &Value) -> Result<Value, RpcError> {
    let path = requested_path(params)?;
    let text = in_sandbox(workdir, data_dir, move |sandbox| sandbox.read(&path, MAX_READ_BYTES)).await?;
    let line = params.get("line").and_then(Value::as_u64).unwrap_or(1).max(1) as usize;
    let limit = params.get("limit").and_then(Value::as_u64).map(|l| l as usize);
    let content = if line == 1 && limit.is_none() {
        text
    } else {
        let lines = text.split_inclusive('\n').skip(line - 1);
        match limit {
            Some(limit) => lines.take(limit).collect(),
            None => lines.collect(),
        }
    };
    Ok(outgoing::read_text_file_result(content))
}

/// fs/write_text_file: writes `content` to the file (created if missing, replaced otherwise).
pub async fn write_text_file(workdir: Workdir<'_>, data_dir: &Path, params: &Value) -> Result<Value, RpcError> {
    let path = requested_path(params)?;
    let content = params
        .get("content")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("missing content"))?
        .to_string();
    in_sandbox(workdir, data_dir, move |sandbox| sandbox.write(&path, &content)).await?;
    Ok(outgoing::write_text_file_result())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn paths_outside_the_workdir_or_relative_are_refused_and_inside_ones_work() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let workdir = Workdir { path: &work, pin: WorkdirPin::of(&work).ok() };
        let data_dir = dir.path().join("data");
        std::fs::create_dir_all(&data_dir).unwrap();
        let inside = work.join("notes.txt");
        let written = write_text_file(workdir, &data_dir, &json!({"path": inside, "content": "a\nb\nc\n"})).await;
        assert!(written.is_ok(), "{written:?}");
        let read = read_text_file(workdir, &data_dir, &json!({"path": inside, "line": 2, "limit": 1})).await.unwrap();
        assert_eq!(read["content"], "b\n");

        let outside = dir.path().join("secret.txt");
        std::fs::write(&outside, "secret").unwrap();
        assert!(read_text_file(workdir, &data_dir, &json!({"path": outside})).await.is_err());
        std::os::unix::fs::symlink(&outside, work.join("link")).unwrap();
        assert!(
            read_text_file(workdir, &data_dir, &json!({"path": work.join("link")})).await.is_err(),
            "a symlink out"
        );
        assert!(
            write_text_file(workdir, &data_dir, &json!({"path": "notes.txt", "content": "x"})).await.is_err(),
            "relative"
        );
        assert!(read_text_file(workdir, &data_dir, &json!({})).await.is_err(), "no path");
    }
}
