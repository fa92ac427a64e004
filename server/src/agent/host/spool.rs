//! The agent host's spool: each agent's output lines not yet acknowledged, on disk, so that a
//! server that was away long (or a ring that dropped lines) is caught up from the file.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A spool is rewritten without its acknowledged lines once it grows past this.
pub(super) const SPOOL_COMPACT_BYTES: u64 = 8 * 1024 * 1024;

/// Bytes between two entries of a spool's index.
const SPOOL_INDEX_EVERY: u64 = 64 * 1024;
/// An agent's output lines not yet acknowledged, as `SEQ\tLINE\n` records. Catch-up after a
/// long absence reads it in batches: each batch starts from the index (never from the file's
/// start), and compaction rewrites the file only once the acknowledged part is at least half
/// of it, so replaying a backlog costs time linear in its size.
pub(super) struct Spool {
    pub(super) path: PathBuf,
    /// Buffered: flushed at the end of each burst of output, and before the file is read.
    file: std::io::BufWriter<std::fs::File>,
    /// The file's length: every record appended so far.
    pub(super) bytes: u64,
    /// `(seq, offset)` of records at most [`SPOOL_INDEX_EVERY`] bytes apart, ascending.
    index: Vec<(u64, u64)>,
    /// False after a failed write: offsets are unknown from there, reads scan from the start.
    exact: bool,
    /// Bytes copied by compactions so far (their cost, for tests).
    pub(super) rewritten: u64,
}

impl Spool {
    pub(super) fn create(path: PathBuf) -> std::io::Result<Spool> {
        use std::os::unix::fs::OpenOptionsExt;
        // What the agent said is for the data dir's owner only.
        let file = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&path)?;
        Ok(Spool {
            path,
            file: std::io::BufWriter::with_capacity(256 * 1024, file),
            bytes: 0,
            index: Vec::new(),
            exact: true,
            rewritten: 0,
        })
    }

    pub(super) fn append(&mut self, seq: u64, line: &str) {
        if self.index.last().is_none_or(|(_, offset)| self.bytes - offset >= SPOOL_INDEX_EVERY) {
            self.index.push((seq, self.bytes));
        }
        match writeln!(self.file, "{seq}\t{line}") {
            Ok(()) => self.bytes += (seq.to_string().len() + line.len() + 2) as u64,
            Err(e) => {
                // Once: a full disk (or the container's bounded tmpfs) fails every line after.
                if std::mem::replace(&mut self.exact, false) {
                    tracing::error!(path = %self.path.display(), "cannot write the spool: {e}");
                }
            }
        }
    }

    pub(super) fn flush(&mut self) {
        if let Err(e) = self.file.flush() {
            if std::mem::replace(&mut self.exact, false) {
                tracing::error!(path = %self.path.display(), "cannot write the spool: {e}");
            }
        }
    }

    /// Where a read of the lines after `after` starts: the last indexed record at or before
    /// line `after + 1`. Flushes first, so the file holds every line.
    pub(super) fn start_after(&mut self, after: u64) -> u64 {
        self.flush();
        if !self.exact {
            return 0;
        }
        let at = self.index.partition_point(|(seq, _)| *seq <= after + 1);
        at.checked_sub(1).map(|i| self.index[i].1).unwrap_or(0)
    }

    /// Lines with `seq > after`, at most `limit`, reading the file from `offset` (a record's
    /// start, from [`Spool::start_after`]). Also returns the bytes read.
    pub(super) fn read_after(path: &Path, offset: u64, after: u64, limit: usize) -> (Vec<(u64, Arc<str>)>, u64) {
        let mut lines = Vec::new();
        let mut scanned = 0;
        let _ = Spool::scan(path, offset, after, |seq, line, length| {
            scanned += length;
            if seq > after {
                lines.push((seq, Arc::from(line)));
            }
            lines.len() < limit
        });
        (lines, scanned)
    }

    /// Calls `each(seq, line, record_length)` for the records from `offset` on, while it
    /// returns true. Records that cannot be read are passed over.
    fn scan(path: &Path, offset: u64, after: u64, mut each: impl FnMut(u64, &str, u64) -> bool) -> std::io::Result<()> {
        use std::io::Seek;
        let mut file = std::fs::File::open(path)?;
        file.seek(std::io::SeekFrom::Start(offset))?;
        let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
        let mut record = Vec::new();
        loop {
            record.clear();
            let length = reader.read_until(b'\n', &mut record)? as u64;
            if length == 0 {
                return Ok(());
            }
            let text = String::from_utf8_lossy(&record);
            let Some((seq, line)) = text.trim_end_matches('\n').split_once('\t') else { continue };
            let Ok(seq) = seq.parse::<u64>() else { continue };
            // Records before the wanted ones are only counted, not copied.
            let line = if seq > after { line } else { "" };
            if !each(seq, line, length) {
                return Ok(());
            }
        }
    }

    /// Called with each acknowledgement: drops the acknowledged lines from the file once the
    /// file is big and they are at least half of it (each byte is then copied at most once
    /// for every byte dropped: compaction stays linear however long the backlog).
    pub(super) fn acknowledged(&mut self, acked: u64) {
        if self.bytes <= SPOOL_COMPACT_BYTES {
            return;
        }
        let dropped = self.start_after(acked);
        if self.exact && dropped * 2 < self.bytes {
            return;
        }
        self.compact(acked);
    }

    /// Rewrites the spool keeping only lines after `acked`.
    fn compact(&mut self, acked: u64) {
        let tmp = self.path.with_extension("spool.tmp");
        let from = self.start_after(acked);
        let written = (|| -> std::io::Result<Spool> {
            let mut fresh = Spool::create(tmp.clone())?;
            Spool::scan(&self.path, from, acked, |seq, line, _| {
                if seq > acked {
                    fresh.append(seq, line);
                }
                true
            })?;
            fresh.file.flush()?;
            if !fresh.exact {
                return Err(std::io::Error::other("a write failed"));
            }
            std::fs::rename(&tmp, &self.path)?;
            fresh.path = self.path.clone();
            fresh.rewritten = self.rewritten + fresh.bytes;
            Ok(fresh)
        })();
        match written {
            Ok(fresh) => *self = fresh,
            Err(e) => tracing::warn!(path = %self.path.display(), "cannot compact the spool: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::host::agentctl::SEND_BATCH;

    fn spool_with(dir: &Path, lines: u64, width: usize) -> Spool {
        let mut spool = Spool::create(dir.join("a.spool")).unwrap();
        let text = "x".repeat(width);
        for seq in 1..=lines {
            spool.append(seq, &format!("{seq}:{text}"));
        }
        spool.flush();
        spool
    }

    #[test]
    fn replaying_a_backlog_in_batches_reads_each_byte_about_once() {
        let dir = tempfile::tempdir().unwrap();
        let lines = 40_000;
        let mut spool = spool_with(dir.path(), lines, 100);
        assert_eq!(spool.bytes, std::fs::metadata(&spool.path).unwrap().len(), "the length is exact");
        let (mut after, mut scanned, mut batches) = (0, 0, 0);
        while after < lines {
            let start = spool.start_after(after);
            let (got, read) = Spool::read_after(&spool.path, start, after, SEND_BATCH);
            assert_eq!(got.first().map(|(seq, _)| *seq), Some(after + 1), "in order, none lost");
            assert!(got.iter().all(|(seq, line)| line.starts_with(&format!("{seq}:"))));
            after = got.last().unwrap().0;
            scanned += read;
            batches += 1;
        }
        // Every batch starts at most one index step before its first line (reading from the
        // start each time would be ~ batches * bytes / 2, here ~ 80 times more).
        let bound = spool.bytes + batches * (SPOOL_INDEX_EVERY + 200);
        assert!(scanned <= bound, "read {scanned} bytes for a {} byte spool", spool.bytes);
    }

    #[test]
    fn compaction_copies_each_byte_a_bounded_number_of_times() {
        let dir = tempfile::tempdir().unwrap();
        // Well past the compaction threshold, acknowledged batch by batch as a catching-up
        // server does.
        let lines = 200_000;
        let mut spool = spool_with(dir.path(), lines, 100);
        let total = spool.bytes;
        assert!(total > 2 * SPOOL_COMPACT_BYTES);
        for acked in (SEND_BATCH as u64..=lines).step_by(SEND_BATCH) {
            spool.acknowledged(acked);
        }
        // Compacting on every acknowledgement would copy ~ acks * bytes / 2 (gigabytes).
        assert!(spool.rewritten <= total, "copied {} bytes for a {total} byte spool", spool.rewritten);
        assert!(spool.bytes <= SPOOL_COMPACT_BYTES, "acknowledged lines were dropped: {}", spool.bytes);
        // What is left is exactly the unacknowledged tail, still readable through the index.
        let acked = lines / SEND_BATCH as u64 * SEND_BATCH as u64;
        let start = spool.start_after(acked);
        let (rest, _) = Spool::read_after(&spool.path, start, acked, usize::MAX);
        let seqs: Vec<u64> = rest.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, (acked + 1..=lines).collect::<Vec<_>>());
        let start = spool.start_after(0);
        let (first, _) = Spool::read_after(&spool.path, start, 0, 1);
        assert!(first[0].0 > 1, "the compacted file starts after what was dropped");
    }
}
