//! The agent's file-system requests (ACP `fs/read_text_file`, `fs/write_text_file`): paths must
//! be absolute and inside the session's working directory once symlinks are resolved.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::agent::acp::RpcError;

/// Largest file an agent may read through fs/read_text_file.
const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// Resolves the request's `path`: absolute, and inside `workdir` after symlinks are resolved.
fn contained_path(workdir: &Path, params: &Value) -> Result<PathBuf, RpcError> {
    let path = params.get("path").and_then(Value::as_str).ok_or_else(|| RpcError::invalid_params("missing path"))?;
    let path = Path::new(path);
    if !path.is_absolute() {
        return Err(RpcError::invalid_params(format!("path must be absolute: {}", path.display())));
    }
    let root = workdir.canonicalize().map_err(|e| RpcError::internal(format!("working directory: {e}")))?;
    let resolved = match path.canonicalize() {
        Ok(resolved) => resolved,
        Err(_) => {
            let parent = path.parent().ok_or_else(|| RpcError::invalid_params("path has no parent"))?;
            let name = path.file_name().ok_or_else(|| RpcError::invalid_params("path has no file name"))?;
            let parent =
                parent.canonicalize().map_err(|e| RpcError::invalid_params(format!("{}: {e}", parent.display())))?;
            parent.join(name)
        }
    };
    if !resolved.starts_with(&root) {
        return Err(RpcError::invalid_params(format!(
            "{} is outside the session's working directory {}",
            path.display(),
            root.display()
        )));
    }
    Ok(resolved)
}

/// fs/read_text_file: the file's text, or `limit` lines from line `line` (1-based).
pub async fn read_text_file(workdir: &Path, params: &Value) -> Result<Value, RpcError> {
    let path = contained_path(workdir, params)?;
    let size = tokio::fs::metadata(&path).await.map(|m| m.len()).unwrap_or(0);
    if size > MAX_READ_BYTES {
        return Err(RpcError::invalid_params(format!(
            "{} is {size} bytes; at most {MAX_READ_BYTES} are read",
            path.display()
        )));
    }
    let text = tokio::fs::read_to_string(&path)
        .await
        .map_err(|e| RpcError::new(-32002, format!("cannot read {}: {e}", path.display())))?;
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
    Ok(json!({"content": content}))
}

/// fs/write_text_file: writes `content` to the file.
pub async fn write_text_file(workdir: &Path, params: &Value) -> Result<Value, RpcError> {
    let path = contained_path(workdir, params)?;
    let content =
        params.get("content").and_then(Value::as_str).ok_or_else(|| RpcError::invalid_params("missing content"))?;
    tokio::fs::write(&path, content)
        .await
        .map_err(|e| RpcError::internal(format!("cannot write {}: {e}", path.display())))?;
    Ok(json!({}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn paths_outside_the_workdir_or_relative_are_refused_and_inside_ones_work() {
        let dir = tempfile::tempdir().unwrap();
        let workdir = dir.path().join("work");
        std::fs::create_dir_all(&workdir).unwrap();
        let inside = workdir.join("notes.txt");
        let written = write_text_file(&workdir, &json!({"path": inside, "content": "a\nb\nc\n"})).await;
        assert!(written.is_ok(), "{written:?}");
        let read = read_text_file(&workdir, &json!({"path": inside, "line": 2, "limit": 1})).await.unwrap();
        assert_eq!(read["content"], "b\n");

        let outside = dir.path().join("secret.txt");
        std::fs::write(&outside, "secret").unwrap();
        assert!(read_text_file(&workdir, &json!({"path": outside})).await.is_err());
        std::os::unix::fs::symlink(&outside, workdir.join("link")).unwrap();
        assert!(read_text_file(&workdir, &json!({"path": workdir.join("link")})).await.is_err(), "a symlink out");
        assert!(write_text_file(&workdir, &json!({"path": "notes.txt", "content": "x"})).await.is_err(), "relative");
        assert!(read_text_file(&workdir, &json!({})).await.is_err(), "no path");
    }
}
