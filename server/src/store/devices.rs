//! Paired devices (`devices`, migration 0250): their names, rights and the SHA-256 of their
//! tokens (never the tokens).

use rusqlite::{params, Row};

use super::{Store, StoreError, StoreResult};

/// A device as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceRecord {
    pub id: String,
    pub name: String,
    /// SHA-256 of its token, 32 bytes.
    pub token_sha256: Vec<u8>,
    pub limited: bool,
    pub paired_at: String,
    pub last_seen_at: Option<String>,
    pub last_address: Option<String>,
}

fn device_from_row(row: &Row<'_>) -> rusqlite::Result<DeviceRecord> {
    let hex: String = row.get(2)?;
    let token_sha256 =
        (0..hex.len() / 2).filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect();
    Ok(DeviceRecord {
        id: row.get(0)?,
        name: row.get(1)?,
        token_sha256,
        limited: row.get::<_, i64>(3)? != 0,
        paired_at: row.get(4)?,
        last_seen_at: row.get(5)?,
        last_address: row.get(6)?,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Store {
    /// Records a newly paired device.
    pub async fn add_device(&self, device: DeviceRecord) -> StoreResult<()> {
        self.write(move |conn, _| {
            conn.execute(
                "INSERT INTO devices (id, name, token_sha256, limited, paired_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![device.id, device.name, hex(&device.token_sha256), device.limited as i64, device.paired_at],
            )?;
            Ok(())
        })
        .await
    }

    /// The devices not revoked, oldest first.
    pub async fn devices(&self) -> StoreResult<Vec<DeviceRecord>> {
        self.read(|conn| {
            let mut statement = conn.prepare_cached(
                "SELECT id, name, token_sha256, limited, paired_at, last_seen_at, last_address FROM devices
                 WHERE revoked_at IS NULL ORDER BY paired_at, id",
            )?;
            let rows = statement.query_map([], device_from_row)?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }

    /// Notes a connection of the device.
    pub async fn device_seen(&self, device_id: &str, at: &str, address: &str) -> StoreResult<()> {
        let (device_id, at, address) = (device_id.to_string(), at.to_string(), address.to_string());
        self.write(move |conn, _| {
            conn.execute(
                "UPDATE devices SET last_seen_at = ?2, last_address = ?3 WHERE id = ?1",
                params![device_id, at, address],
            )?;
            Ok(())
        })
        .await
    }

    /// Revokes a device (its row stays, marked) and forgets its push subscriptions.
    pub async fn revoke_device(&self, device_id: &str, at: &str) -> StoreResult<()> {
        let (device_id, at) = (device_id.to_string(), at.to_string());
        self.write(move |conn, _| {
            let changed = conn.execute(
                "UPDATE devices SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![device_id, at],
            )?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!("device {device_id}")));
            }
            // A revoked device hears nothing more.
            conn.execute("DELETE FROM push_subscriptions WHERE device_id = ?1", params![device_id])?;
            Ok(())
        })
        .await
    }
}
