//! Writing an export (`x`) to a file on this machine, the one the user sits at: the server may
//! run elsewhere, so it sends the transcript (`session.export`) and the client writes it.

use std::io::Write;
use std::path::{Path, PathBuf};

use baton_protocol::{Client, ClientError, SessionExportParams};

use crate::command::Reply;

/// Asks for every page of the export and writes them to `path`. The pages are joined in
/// memory first: a server failure half-way leaves no half-written file behind, and a
/// transcript is at most a few megabytes.
pub async fn export(
    client: &Client,
    params: SessionExportParams,
    path: &Path,
    overwrite: bool,
    timeout: std::time::Duration,
) -> Result<Reply, ClientError> {
    let mut content = String::new();
    let mut params = params;
    loop {
        let page = client.request_with_timeout(params.clone(), timeout).await?;
        content.push_str(&page.content);
        match page.next_cursor {
            Some(next) => params.cursor = Some(next),
            None => break,
        }
    }
    let path = path.to_path_buf();
    let bytes = content.len();
    // Blocking file I/O off the runtime's worker threads.
    let written = tokio::task::spawn_blocking(move || write_new(&path, content.as_bytes(), overwrite).map(|_| path))
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|result| result);
    Ok(match written {
        Ok(path) => Reply::Exported { path: std::path::absolute(&path).unwrap_or(path), bytes },
        Err(error) => Reply::ExportNotWritten {
            exists: error.kind() == std::io::ErrorKind::AlreadyExists,
            reason: error.to_string(),
        },
    })
}

/// Writes `content` to `path`, creating it; an existing file is replaced only when `overwrite`
/// says so (else `AlreadyExists`, and the file is untouched).
pub fn write_new(path: &Path, content: &[u8], overwrite: bool) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if overwrite {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path)?;
    file.write_all(content)?;
    file.sync_all()
}

/// `~/x` is `$HOME/x`, as a shell would read it; any other path is taken as typed (relative
/// to the directory `baton` runs in).
pub fn expand_home(typed: &str) -> PathBuf {
    match (typed.strip_prefix("~/"), dirs::home_dir()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(typed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_file_is_kept_unless_overwrite_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.md");
        write_new(&path, b"first", false).unwrap();
        let error = write_new(&path, b"second", false).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first");
        write_new(&path, b"second", true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let error = write_new(&dir.path().join("no/such/t.md"), b"x", false).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn a_tilde_is_the_home_directory() {
        let home = dirs::home_dir().unwrap();
        assert_eq!(expand_home("~/t.md"), home.join("t.md"));
        assert_eq!(expand_home("./t.md"), PathBuf::from("./t.md"));
    }
}
