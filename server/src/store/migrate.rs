//! Numbered `.sql` migrations, embedded at build time, applied in order and recorded in
//! `schema_migrations`, so an old database upgrades in place.

use rusqlite::Connection;

use super::StoreResult;

pub struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub sql: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// Applies every migration the database has not recorded yet, each in its own transaction.
/// Migrations are numbered in ranges reserved per line of work, so a database may have a
/// higher number applied before a lower one lands: a missing version is applied even when a
/// newer one is recorded.
pub fn apply_migrations(conn: &mut Connection, migrations: &[Migration]) -> StoreResult<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    INTEGER PRIMARY KEY,
            name       TEXT NOT NULL,
            applied_at TEXT NOT NULL
        )",
    )?;
    let applied: std::collections::HashSet<u32> = {
        let mut statement = conn.prepare("SELECT version FROM schema_migrations")?;
        let versions = statement.query_map([], |r| r.get(0))?;
        versions.collect::<Result<_, _>>()?
    };
    let pending: Vec<&Migration> = migrations.iter().filter(|m| !applied.contains(&m.version)).collect();
    // An existing database (a new one has nothing to upgrade).
    let upgrading = !pending.is_empty() && !applied.is_empty();
    if upgrading {
        // Said before the work: a large journal takes seconds to rewrite, and batond answers
        // only after it. `baton`'s launcher reads these words and waits on.
        let (words, count) = (baton_protocol::UPGRADING_DATABASE, pending.len());
        tracing::warn!("{words}: {count} change(s) to apply first; a large database takes a while");
    }
    for migration in pending {
        let tx = conn.transaction()?;
        tx.execute_batch(migration.sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![migration.version, migration.name, baton_protocol::now_timestamp()],
        )?;
        tx.commit()?;
        tracing::info!(version = migration.version, name = migration.name, "applied migration");
    }
    if upgrading {
        // An upgrade may have rewritten a whole table (the journal, migration 260): the
        // write-ahead log grew by its size, and would keep that size on disk. Copied into the
        // database and cut back now, while no other connection is open.
        if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::warn!("the write-ahead log could not be cut back after the upgrade: {e}");
        }
    }
    Ok(())
}

/// The newest migration recorded in the database (0 for a new one).
pub fn schema_version(conn: &Connection) -> StoreResult<u32> {
    let version: Option<u32> = conn.query_row("SELECT MAX(version) FROM schema_migrations", [], |r| r.get(0))?;
    Ok(version.unwrap_or(0))
}
