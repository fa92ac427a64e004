//! SQLite persistence: one writer thread with group commit, a small pool of readers.
//!
//! Every write runs on the writer thread inside a savepoint of a batch transaction; the batch is
//! committed once for all the writes that queued up meanwhile, so streaming does not pay one
//! fsync per chunk. Notifications a write produces (journal events, state changes) are published
//! only after the commit, in commit order: an event is durable when it is broadcast.

mod attention;
mod devices;
pub use devices::DeviceRecord;
mod push;
pub use push::PushSubscription;
mod export;
mod fork;
mod hosted;
mod journal;
mod migrate;
mod options;
pub use options::Choice;
mod queue;
mod records;
mod rules;
pub use rules::ToolMatch;
mod search;
/// What a client is told when the store fails: a missing row is NOT_FOUND, a refused value a
/// VALIDATION_ERROR, anything else INTERNAL (and logged, since the client cannot act on it).
impl From<StoreError> for baton_protocol::ErrorPayload {
    fn from(error: StoreError) -> Self {
        use baton_protocol::ErrorPayload;
        match error {
            StoreError::NotFound(what) => ErrorPayload::not_found(format!("{what} not found")),
            StoreError::Invalid(message) => ErrorPayload::validation(message),
            other => {
                tracing::error!("store error: {other}");
                ErrorPayload::internal(other.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests;
mod usage;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::hub::{Hub, Published};
use baton_protocol::{Notification, StorageChanged};

pub use attention::{AttentionInput, AttentionUpdate};
pub use export::{exported_session, visit_exported_events, visit_exported_messages, ExportedSession};
pub use fork::Forked;
pub use hosted::HostedRecord;
pub use journal::EventsPage;
pub use migrate::{apply_migrations, schema_version, MIGRATIONS};
pub use records::*;
pub use search::{fts_query, search_page, SearchPage};
pub use usage::ReportedTokens;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0} not found")]
    NotFound(String),
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
    #[error("the store is closed")]
    Closed,
    /// The batch holding this write did not commit (e.g. the disk is full); SQLite's reason.
    #[error("the database could not commit this write: {0}")]
    CommitFailed(String),
    /// The disk had no room for this write (SQLite's SQLITE_FULL), or it is an agent update
    /// held behind one that had none; nothing of it was saved. Written again once there is
    /// room, it succeeds (see `Store::release_held`).
    #[error("the disk is full; the database could not save this write: {0}")]
    DiskFull(String),
    #[error("cannot open the database: {0}")]
    Open(String),
    /// What a client asked for cannot be read as asked (a forged cursor, a query of no word).
    #[error("{0}")]
    Invalid(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    /// Whether the write failed for want of disk space (and can be made again once there is).
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::DiskFull(_) => true,
            StoreError::Sqlite(e) => is_disk_full(e),
            _ => false,
        }
    }
}

/// Whether SQLite failed for want of disk space.
fn is_disk_full(error: &rusqlite::Error) -> bool {
    error.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}

/// Why a batch did not commit.
#[derive(Debug, Clone)]
struct CommitError {
    reason: String,
    disk_full: bool,
}

impl CommitError {
    fn of(error: &rusqlite::Error) -> CommitError {
        CommitError { reason: error.to_string(), disk_full: is_disk_full(error) }
    }

    fn of_store(error: &StoreError) -> CommitError {
        CommitError { reason: error.to_string(), disk_full: error.is_disk_full() }
    }
}

impl From<CommitError> for StoreError {
    fn from(error: CommitError) -> StoreError {
        if error.disk_full {
            StoreError::DiskFull(error.reason)
        } else {
            StoreError::CommitFailed(error.reason)
        }
    }
}

/// Notifications produced by a write, published after its batch commits.
pub type Outbox = Vec<Published>;

/// Told whether the batch committed (`Err` with the reason when it did not).
type Completion = Box<dyn FnOnce(Result<(), CommitError>) + Send>;
type RunJob = Box<dyn FnOnce(&Connection, &mut Outbox) -> (bool, Completion) + Send>;

/// What the writer thread is asked to do.
// Not boxed: an append is nearly every job on the streaming path; a box would be one more
// allocation per event.
#[allow(clippy::large_enum_variant)]
enum Job {
    /// Any write, as a closure.
    Run(RunJob),
    /// An agent update (the streaming path), as data: no closure, and its session's journal
    /// cursor kept between the updates of a batch (`journal::Streak`).
    /// With when it was queued: the window it may be held in counts from then.
    Append(journal::Append, oneshot::Sender<StoreResult<u64>>, std::time::Instant),
    /// The session's updates are taken again (see [`Store::release_held`]).
    Release(String),
}

/// How a job of a batch learns the batch's outcome.
enum Done {
    Run(Completion),
    Append(oneshot::Sender<StoreResult<u64>>, StoreResult<u64>),
}

impl Done {
    fn tell(self, committed: &Result<(), CommitError>) {
        match self {
            Done::Run(done) => done(committed.clone()),
            Done::Append(tx, result) => {
                let result = match (result, committed) {
                    (Ok(seq), Ok(())) => Ok(seq),
                    (Ok(_), Err(error)) => Err(error.clone().into()),
                    (Err(e), _) => Err(e),
                };
                let _ = tx.send(result);
            }
        }
    }
}

/// Reader connections open at once, at most: a burst of reads waits for one instead of opening
/// one each (each holds descriptors on the database and its write-ahead log, and one closed while
/// another connection of the process holds a lock keeps its descriptor until that lock goes).
const MAX_READERS: usize = 8;
/// A reader unused this long is closed.
const READER_IDLE: std::time::Duration = std::time::Duration::from_secs(30);

/// A reader connection kept for the next read, and since when it has been unused.
struct IdleReader {
    conn: Connection,
    since: std::time::Instant,
}

struct Inner {
    path: PathBuf,
    writer: Mutex<Option<std_mpsc::Sender<Job>>>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The writer, to wake from the window it holds agent updates in when a request comes.
    writer_waker: std::thread::Thread,
    /// Idle readers, the most recently used last.
    readers: Mutex<Vec<IdleReader>>,
    /// One permit per reader that may be open ([`MAX_READERS`]).
    reader_slots: Arc<tokio::sync::Semaphore>,
    /// How long an unused reader is kept ([`READER_IDLE`] unless a test says otherwise).
    reader_idle: std::time::Duration,
    /// Whether the task that closes idle readers runs.
    reaper_started: AtomicBool,
    /// Set by the writer from before it publishes a write that left messages to be joined
    /// (`journal::fold_due`) until it has joined them.
    folding: Arc<AtomicBool>,
    /// The database's reason while the disk is full (see [`Store::storage_full`]).
    storage_full: Arc<Mutex<Option<String>>>,
}

/// A submitted write; `wait` returns once its batch committed.
pub struct PendingWrite<T> {
    rx: oneshot::Receiver<StoreResult<T>>,
}

impl<T> PendingWrite<T> {
    pub async fn wait(self) -> StoreResult<T> {
        self.rx.await.map_err(|_| StoreError::Closed)?
    }
}

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

/// Largest number of writes committed together.
const MAX_BATCH: usize = 512;
/// Agent updates that trickle in (many agents at a steady rate, each sending now and then) are
/// held this long for more to share their commit: one fsync for many updates instead of one
/// each. Bounded well under the latency an update may take to reach a client.
const GROUP_WINDOW: std::time::Duration = std::time::Duration::from_millis(1);
/// A batch this large commits at once: enough updates share its fsync already.
const GROUP_ENOUGH: usize = 64;

fn open_connection(path: &Path) -> StoreResult<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    // FULL makes each batch durable on commit; group commit keeps that affordable.
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")?;
    // Room for every statement of the streaming path and the common reads together (the
    // default, 16, made them evict one another).
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Opens the database at `path` for reading only, without migrating it: what `batond export`
/// reads, whether or not a server runs on the file (WAL lets it read while the server writes).
pub fn open_read_only(path: &Path) -> StoreResult<Connection> {
    if !path.exists() {
        return Err(StoreError::Open(format!("{}: no such database", path.display())));
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let open = |path: &Path, flags| {
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| StoreError::Open(format!("{}: {e}", path.display())))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        // Opening is lazy: the first read tells whether the file can be read.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
            .map_err(|e| StoreError::Open(format!("{}: {e}", path.display())))?;
        Ok::<_, StoreError>(conn)
    };
    match open(path, flags) {
        Ok(conn) => Ok(conn),
        // A database in WAL mode whose directory cannot be written (a read-only copy or mount)
        // cannot have the shared-memory file a reader needs. With no write-ahead log next to it
        // (a server that stopped cleanly leaves none) the file alone is the whole database, and
        // it can be read as immutable: without that file and without locks.
        Err(error) if !wal_has_content(path) => {
            use std::os::unix::ffi::{OsStrExt, OsStringExt};
            // The path as a URI's: the characters that would end it or escape, escaped.
            let mut uri = b"file:".to_vec();
            for &byte in path.as_os_str().as_bytes() {
                match byte {
                    b'%' | b'?' | b'#' => uri.extend(format!("%{byte:02X}").bytes()),
                    byte => uri.push(byte),
                }
            }
            uri.extend(b"?immutable=1");
            let uri = std::ffi::OsString::from_vec(uri);
            let immutable = open(Path::new(&uri), flags | rusqlite::OpenFlags::SQLITE_OPEN_URI);
            immutable.map_err(|_| error)
        }
        Err(error) => Err(error),
    }
}

/// Whether the database at `path` has a write-ahead log with something in it.
fn wal_has_content(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(Path::new(&wal)).is_ok_and(|m| m.len() > 0)
}

impl Store {
    /// One page of `message.search` hits (see `store::search`).
    pub async fn search(
        &self,
        query: String,
        session_id: Option<String>,
        limit: usize,
        cursor: Option<String>,
    ) -> StoreResult<SearchPage> {
        // A client that saw a turn end finds its answer: the search waits for the writer to have
        // joined the parts of what it published (the one write queued behind the join).
        if self.inner.folding.load(Ordering::SeqCst) {
            self.write(|_, _| Ok(())).await?;
        }
        let budget = std::time::Duration::from_millis(baton_protocol::MAX_SEARCH_MILLIS);
        self.read(move |conn| search_page(conn, &query, session_id.as_deref(), limit, cursor.as_deref(), budget)).await
    }

    /// Opens (creating if needed) the database at `path`, applies pending migrations, and starts
    /// the writer thread, which publishes committed notifications to `hub`.
    pub fn open(path: &Path, hub: Hub) -> StoreResult<Store> {
        Store::open_with_reader_idle(path, hub, READER_IDLE)
    }

    /// [`Store::open`], closing readers unused for `reader_idle`.
    pub(crate) fn open_with_reader_idle(path: &Path, hub: Hub, reader_idle: std::time::Duration) -> StoreResult<Store> {
        let mut conn = open_connection(path).map_err(|e| StoreError::Open(format!("{}: {e}", path.display())))?;
        apply_migrations(&mut conn, MIGRATIONS)?;
        let (tx, rx) = std_mpsc::channel::<Job>();
        // What a server that stopped after a turn's end and before joining its answer left is
        // joined first; a search meanwhile waits for it.
        let folding = Arc::new(AtomicBool::new(journal::folds_due(&conn)?));
        let writer_folding = folding.clone();
        let storage_full = Arc::new(Mutex::new(None));
        let storage = Storage { full: storage_full.clone() };
        let thread = std::thread::Builder::new()
            .name("baton-store-writer".into())
            .spawn(move || writer_loop(conn, rx, hub, &writer_folding, storage))
            .map_err(|e| StoreError::Open(e.to_string()))?;
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writer: Mutex::new(Some(tx)),
                writer_waker: thread.thread().clone(),
                writer_thread: Mutex::new(Some(thread)),
                readers: Mutex::new(Vec::new()),
                reader_slots: Arc::new(tokio::sync::Semaphore::new(MAX_READERS)),
                reader_idle,
                reaper_started: AtomicBool::new(false),
                folding,
                storage_full,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on the writer thread, inside the next batch. Returns once the batch committed.
    async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &mut Outbox) -> StoreResult<T> + Send + 'static,
    {
        self.submit(f)?.wait().await
    }

    /// Queues `f` for the writer thread now, without waiting. Writes run and commit in the
    /// order they were submitted, so waiting for the last one waits for all before it.
    fn submit<T, F>(&self, f: F) -> StoreResult<PendingWrite<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &mut Outbox) -> StoreResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<StoreResult<T>>();
        let job: RunJob = Box::new(move |conn, outbox| match f(conn, outbox) {
            Ok(value) => {
                let done: Completion = Box::new(move |committed| {
                    let _ = tx.send(committed.map(|()| value).map_err(StoreError::from));
                });
                (true, done)
            }
            Err(e) => {
                let done: Completion = Box::new(move |_| {
                    let _ = tx.send(Err(e));
                });
                (false, done)
            }
        });
        self.send(Job::Run(job))?;
        Ok(PendingWrite { rx })
    }

    /// Queues an agent update now, like [`Store::submit`].
    fn submit_job(&self, append: journal::Append) -> StoreResult<PendingWrite<u64>> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Append(append, tx, std::time::Instant::now()))?;
        Ok(PendingWrite { rx })
    }

    /// Takes `session_id`'s agent updates again after one of them failed for want of space:
    /// until then every later update of the session fails too (with [`StoreError::DiskFull`])
    /// without being tried, so that none is saved ahead of the one that failed. Its caller
    /// writes the failed updates again, in order, right after this.
    pub fn release_held(&self, session_id: &str) -> StoreResult<()> {
        self.send(Job::Release(session_id.to_string()))
    }

    fn send(&self, job: Job) -> StoreResult<()> {
        let update = matches!(job, Job::Append(..));
        let writer = self.inner.writer.lock().map_err(|_| StoreError::Closed)?;
        writer.as_ref().ok_or(StoreError::Closed)?.send(job).map_err(|_| StoreError::Closed)?;
        if !update {
            // A request does not wait out the window agent updates are held in.
            self.inner.writer_waker.unpark();
        }
        Ok(())
    }

    /// Runs `f` on a reader connection (WAL readers do not block the writer). At most
    /// [`MAX_READERS`] run at once; the others wait for one to finish.
    pub async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let slot = self.inner.reader_slots.clone().acquire_owned().await.map_err(|_| StoreError::Closed)?;
        self.start_reaper();
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let pooled = inner.readers.lock().ok().and_then(|mut r| r.pop());
            let conn = match pooled {
                Some(idle) => idle.conn,
                None => open_connection(&inner.path)?,
            };
            let result = f(&conn);
            if let Ok(mut readers) = inner.readers.lock() {
                readers.push(IdleReader { conn, since: std::time::Instant::now() });
            }
            result
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }

    /// Starts, once, the task that closes readers unused for `reader_idle`. It holds the store
    /// weakly and ends with it.
    fn start_reaper(&self) {
        if self.inner.reaper_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let store = Arc::downgrade(&self.inner);
        let every = self.inner.reader_idle / 2;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(std::time::Duration::from_millis(10)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = store.upgrade() else { return };
                let idle = inner.reader_idle;
                let closing: Vec<IdleReader> = match inner.readers.lock() {
                    Ok(mut readers) => {
                        // The least recently used come first.
                        let stale = readers.iter().take_while(|r| r.since.elapsed() >= idle).count();
                        readers.drain(..stale).collect()
                    }
                    Err(_) => return,
                };
                drop(inner);
                if !closing.is_empty() {
                    // Closing a connection can wait on the file system: not on this thread.
                    let _ = tokio::task::spawn_blocking(move || drop(closing)).await;
                }
            }
        });
    }

    /// The database's reason while the last write met a full disk (None while it takes writes).
    pub fn storage_full(&self) -> Option<String> {
        self.inner.storage_full.lock().ok().and_then(|full| full.clone())
    }

    /// Reader connections open now (idle ones and those reading).
    pub fn readers_open(&self) -> usize {
        let idle = self.inner.readers.lock().map(|r| r.len()).unwrap_or(0);
        idle + (MAX_READERS - self.inner.reader_slots.available_permits())
    }

    /// Stops the writer after the writes already queued, and waits for it.
    pub fn close(&self) {
        if let Ok(mut writer) = self.inner.writer.lock() {
            writer.take();
        }
        let thread = self.inner.writer_thread.lock().ok().and_then(|mut t| t.take());
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// Whether the database takes writes, as the writer last found it: told to every client when
/// it changes (`storage.changed`), and to each client that connects while the disk is full.
struct Storage {
    /// The reason the last batch could not be saved, while the disk is full.
    full: Arc<Mutex<Option<String>>>,
}

impl Storage {
    /// A batch met a full disk: every client hears it, the first time. Set before it is
    /// published: a client that connects meanwhile (it listens to the hub first) hears it too.
    fn became_full(&mut self, reason: &str, hub: &Hub) {
        let before = self.full.lock().ok().and_then(|mut full| full.replace(reason.to_string()));
        if before.is_none() {
            tracing::error!("the disk is full ({reason}); agents' output is held until there is room");
            hub.publish_all(vec![Published::new(Notification::StorageChanged(StorageChanged {
                writable: false,
                reason: reason.to_string(),
            }))]);
        }
    }

    /// A batch committed: if the disk was full, every client hears it has room again.
    fn committed(&mut self, hub: &Hub) {
        let before = self.full.lock().ok().and_then(|mut full| full.take());
        if let Some(reason) = before {
            tracing::info!("the database takes writes again (it had failed with: {reason})");
            let reason = "the database takes writes again".to_string();
            hub.publish_all(vec![Published::new(Notification::StorageChanged(StorageChanged {
                writable: true,
                reason,
            }))]);
        }
    }
}

fn writer_loop(conn: Connection, jobs: std_mpsc::Receiver<Job>, hub: Hub, folding: &AtomicBool, mut storage: Storage) {
    // The savepoint around each job, prepared once for the writer's life (not looked up in the
    // statement cache twice per job).
    let mut savepoint_statement = conn.prepare("SAVEPOINT job").ok();
    let mut release_statement = conn.prepare("RELEASE job").ok();
    let mut savepoint = || savepoint_statement.as_mut().is_some_and(|s| s.execute([]).is_ok());
    let mut release = || release_statement.as_mut().is_some_and(|s| s.execute([]).is_ok());
    // The statement every streamed event runs, likewise.
    let mut insert_event = conn.prepare(journal::INSERT_EVENT).ok();
    if folding.load(Ordering::SeqCst) {
        folding.store(!fold(&conn), Ordering::SeqCst);
    }
    // Sessions one of whose updates the disk had no room for: their later updates fail untried
    // until `Job::Release`, so that none is saved ahead of the one being written again.
    let mut held: std::collections::HashSet<String> = std::collections::HashSet::new();
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // A few agent updates alone: wait a moment for the next ones to share the commit (a
        // request of a client, alone, commits at once).
        if batch.len() < GROUP_ENOUGH && batch.iter().all(|job| matches!(job, Job::Append(..))) {
            // Slept through rather than woken by each update that comes (a wake-up per update
            // was most of the writer's cost at steady rates); a request unparks it (`send`).
            // The window counts from when the oldest update was queued: one that waited while
            // the previous batch committed has spent that much of it already.
            let oldest = match &batch[0] {
                Job::Append(_, _, queued) => *queued,
                _ => std::time::Instant::now(),
            };
            let deadline = oldest + GROUP_WINDOW;
            'window: loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::park_timeout(left);
                while batch.len() < GROUP_ENOUGH {
                    let Ok(job) = jobs.try_recv() else { break };
                    let request = !matches!(job, Job::Append(..));
                    batch.push(job);
                    if request {
                        break 'window;
                    }
                }
                if batch.len() >= GROUP_ENOUGH {
                    break;
                }
            }
        }
        let begin = conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| CommitError::of(&e));
        let began = begin.is_ok();
        let mut completions = Vec::with_capacity(batch.len());
        let mut published = Vec::new();
        // The session whose updates are being appended, its cursor not yet written back.
        let mut streak = None;
        // A cursor that could not be written back fails the whole batch.
        let mut broken: Option<CommitError> = None;
        // Sessions with an update in this batch: held if the batch meets a full disk.
        let mut appended: Vec<String> = Vec::new();
        for job in batch {
            if let Job::Release(session_id) = &job {
                held.remove(session_id);
                continue;
            }
            if let Job::Append(append, _, _) = &job {
                if held.contains(&append.session_id) {
                    let Job::Append(_, tx, _) = job else { continue };
                    let reason = "an earlier update of this session is waiting for room on the disk";
                    let _ = tx.send(Err(StoreError::DiskFull(reason.to_string())));
                    continue;
                }
                if !appended.contains(&append.session_id) {
                    appended.push(append.session_id.clone());
                }
            }
            if !began {
                completions.push(match job {
                    Job::Run(job) => Done::Run(job(&conn, &mut Vec::new()).1),
                    Job::Append(_, tx, _) => {
                        let error =
                            begin.clone().err().unwrap_or(CommitError { reason: String::new(), disk_full: false });
                        Done::Append(tx, Err(error.into()))
                    }
                    Job::Release(_) => continue,
                });
                continue;
            }
            match job {
                Job::Release(_) => {}
                Job::Run(job) => {
                    let mut outbox = Vec::new();
                    // Whatever the job reads or writes sees the appended updates' cursor.
                    if let Err(e) = journal::Streak::flush(&mut streak, &conn) {
                        broken.get_or_insert(CommitError::of_store(&e));
                    }
                    let saved = savepoint();
                    let (ok, done) = job(&conn, &mut outbox);
                    if saved {
                        if ok {
                            release();
                            published.append(&mut outbox);
                        } else {
                            let _ = conn.execute_batch("ROLLBACK TO job; RELEASE job");
                        }
                    }
                    completions.push(Done::Run(done));
                }
                Job::Append(append, tx, _) => {
                    if streak.as_ref().is_some_and(|s| s.session_id != append.session_id) {
                        // The previous session's cursor and pending text go first; if they
                        // cannot be written, the batch cannot commit.
                        if let Err(e) = journal::Streak::flush(&mut streak, &conn) {
                            broken.get_or_insert(CommitError::of_store(&e));
                        }
                    }
                    // No savepoint per update: one makes SQLite copy every page an update
                    // touches into a statement journal, which was a fifth of the writer's time
                    // per chunk. An update that cannot start (its session is gone) writes
                    // nothing and fails alone; one that fails once it has written fails the
                    // batch (such a failure is the disk's or the database's, which the commit
                    // would meet anyway).
                    let result = match journal::Streak::ensure(&mut streak, &conn, &append.session_id) {
                        Err(e) => Err(e),
                        Ok(current) => {
                            // Its notification goes straight to the batch's: an update that
                            // fails fails the batch, which then publishes nothing.
                            let result =
                                journal::append_in(&conn, insert_event.as_mut(), &mut published, current, append);
                            if let Err(e) = &result {
                                broken.get_or_insert(CommitError {
                                    reason: format!("an agent update could not be recorded: {e}"),
                                    disk_full: e.is_disk_full(),
                                });
                                // Its batch is rolled back: nothing of the streak holds.
                                streak = None;
                            }
                            result
                        }
                    };
                    completions.push(Done::Append(tx, result));
                }
            }
        }
        if completions.is_empty() {
            // Only releases: nothing to commit.
            if began {
                let _ = conn.execute_batch("ROLLBACK");
            }
            continue;
        }
        if began {
            if let Err(e) = journal::Streak::flush(&mut streak, &conn) {
                broken.get_or_insert(CommitError::of_store(&e));
            }
        }
        let begin = match broken {
            Some(error) => Err(error),
            None => begin,
        };
        // Checked inside the batch, before its commit: a client that sees the batch (its
        // notifications, or a read right after the commit) sees the flag set, or the join done.
        let fold_now = begin.is_ok() && journal::folds_due(&conn).unwrap_or(false);
        if fold_now {
            folding.store(true, Ordering::SeqCst);
        }
        let committed = begin.and_then(|()| conn.execute_batch("COMMIT").map_err(|e| CommitError::of(&e)));
        if let (true, Err(error)) = (began, &committed) {
            tracing::error!("store batch failed to commit ({}); rolling back", error.reason);
            let _ = conn.execute_batch("ROLLBACK");
        }
        match &committed {
            Ok(()) => {
                storage.committed(&hub);
                hub.publish_all(published);
            }
            Err(error) if error.disk_full => {
                storage.became_full(&error.reason, &hub);
                held.extend(appended);
            }
            Err(_) => {}
        }
        for done in completions {
            done.tell(&committed);
        }
        if fold_now {
            // Still set while anything is left due (a join that failed is tried again after
            // the next write, which a search waiting for it makes).
            folding.store(!fold(&conn), Ordering::SeqCst);
        }
    }
}

/// Joins the parts of the messages closed by what was just committed, in a write of its own
/// ([`journal::fold_due`]); true when nothing is left due. On failure nothing is lost: readers
/// keep joining the parts, and the join is tried again after the next write.
fn fold(conn: &Connection) -> bool {
    let joined = conn.execute_batch("BEGIN IMMEDIATE").map_err(StoreError::from).and_then(|()| {
        let (left, bytes) = journal::fold_due(conn)?;
        conn.execute_batch("COMMIT").map_err(StoreError::from)?;
        // Indexing a long message for search used many times its size, freed now; the pages
        // SQLite cached for it go first.
        if bytes >= crate::memory::LARGE {
            let _ = conn.execute_batch("PRAGMA shrink_memory");
        }
        crate::memory::give_back_after(bytes, "joining a message's parts");
        Ok(left)
    });
    match joined {
        Ok(0) => true,
        Ok(left) => {
            tracing::error!(
                "{left} closed message(s) could not be joined into their text; they stay readable from their parts"
            );
            false
        }
        Err(e) => {
            tracing::error!("cannot join the parts of closed messages into their text: {e}");
            let _ = conn.execute_batch("ROLLBACK");
            false
        }
    }
}
