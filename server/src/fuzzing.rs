//! What the fuzz targets (`fuzz/`, run with `cargo +nightly fuzz`) feed their input to: the
//! client envelope decoder, the ACP line decoder and the history JSONL reader. The unit tests
//! below run every file of the committed seed corpus (`fuzz/corpus/<target>/`) through the same
//! functions, so `cargo test` exercises the corpus too.
//!
//! Each function panics only when an invariant of the decoder is broken.

use std::sync::OnceLock;

use baton_protocol::{ClientRequest, Envelope, Notification};

use crate::agent::acp::{parse_incoming, read_line_bounded};
use crate::agent::history::{parse_history, render_resume_context, truncate_chars};

/// A client frame, as the gateway decodes it; also decoded the way clients decode server frames.
pub fn envelope(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Envelope::decode_request(text) {
        Ok(frame) => {
            assert!(!frame.id.is_empty(), "a request decodes only with an id");
            if let Ok(request) = ClientRequest::parse(&frame.action, frame.payload) {
                assert_eq!(request.action(), frame.action);
                if request.validate().is_ok() {
                    let again = ClientRequest::parse(request.action(), request.payload());
                    assert_eq!(again.as_ref(), Ok(&request), "a request survives a round trip");
                }
            }
        }
        Err(error) => assert!(error.error.message.len() < 4096, "errors stay short"),
    }
    if let Ok(envelope) = serde_json::from_str::<Envelope>(text) {
        let _ = Notification::from_envelope(&envelope);
        let json = envelope.to_json();
        assert!(serde_json::from_str::<Envelope>(&json).is_ok(), "an envelope re-encodes to a valid one");
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime without I/O")
    })
}

/// An agent's stdout: split into bounded lines as the reader does, each line decoded.
pub fn acp_line(data: &[u8]) {
    const MAX: usize = 64;
    for line in data.split(|b| *b == b'\n') {
        let _ = parse_incoming(line);
    }
    runtime().block_on(async {
        let mut reader = tokio::io::BufReader::with_capacity(16, data);
        let mut consumed = 0usize;
        while let Ok(Some(line)) = read_line_bounded(&mut reader, MAX).await {
            match line {
                Ok(line) => {
                    assert!(line.len() <= MAX && !line.contains(&b'\n'), "a kept line is bounded and whole");
                    let _ = parse_incoming(&line);
                    consumed += line.len();
                }
                Err(dropped) => {
                    assert!(dropped > MAX, "only over-long lines are dropped");
                    consumed += dropped;
                }
            }
            assert!(consumed <= data.len(), "no byte is read twice");
        }
    });
}

/// A history file: decoded, then rendered into a resume context.
pub fn history(data: &[u8]) {
    let (entries, skipped) = parse_history(data);
    let lines = data.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).count();
    assert_eq!(entries.len() + skipped, lines, "every non-blank line is an entry or skipped");
    let context = render_resume_context(&entries, "continue");
    assert!(context.ends_with('\n') || context == "continue");
    for entry in &entries {
        let cut = truncate_chars(&entry.content, 10);
        assert!(cut.chars().count() <= 10 + "... [truncated]".len());
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target);
        let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .map(|path| {
                let bytes = std::fs::read(&path).unwrap();
                (path, bytes)
            })
            .collect();
        files.sort();
        assert!(files.len() >= 3, "the seed corpus of {target} is committed");
        files
    }

    #[test]
    fn the_envelope_corpus_decodes_without_panic() {
        for (path, bytes) in corpus("envelope") {
            eprintln!("{}", path.display());
            super::envelope(&bytes);
        }
    }

    #[test]
    fn the_acp_line_corpus_decodes_without_panic() {
        for (path, bytes) in corpus("acp_line") {
            eprintln!("{}", path.display());
            super::acp_line(&bytes);
        }
    }

    #[test]
    fn the_history_corpus_decodes_without_panic() {
        for (path, bytes) in corpus("history") {
            eprintln!("{}", path.display());
            super::history(&bytes);
        }
    }
}
