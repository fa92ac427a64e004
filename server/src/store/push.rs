//! Web Push subscriptions (`push_subscriptions`, migration 0251): where to send a device's
//! pushes, and the keys to encrypt them for.

use rusqlite::params;

use super::{Store, StoreResult};

/// A subscription as the store keeps it (keys in base64url, as the browser gives them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushSubscription {
    pub id: String,
    /// The paired device it belongs to; None for the server's own token.
    pub device_id: Option<String>,
    pub endpoint: String,
    pub p256dh: String,
    pub auth: String,
}

impl Store {
    /// Records a subscription; the same endpoint again replaces the old one. Returns its id.
    pub async fn add_push_subscription(&self, subscription: PushSubscription, at: &str) -> StoreResult<String> {
        let at = at.to_string();
        self.write(move |conn, _| {
            conn.execute(
                "INSERT INTO push_subscriptions (id, device_id, endpoint, p256dh, auth, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(endpoint) DO UPDATE SET device_id = ?2, p256dh = ?4, auth = ?5, created_at = ?6",
                params![
                    subscription.id,
                    subscription.device_id,
                    subscription.endpoint,
                    subscription.p256dh,
                    subscription.auth,
                    at
                ],
            )?;
            let id = conn.query_row(
                "SELECT id FROM push_subscriptions WHERE endpoint = ?1",
                params![subscription.endpoint],
                |row| row.get(0),
            )?;
            Ok(id)
        })
        .await
    }

    /// Every subscription, oldest first.
    pub async fn push_subscriptions(&self) -> StoreResult<Vec<PushSubscription>> {
        self.read(|conn| {
            let mut statement = conn.prepare_cached(
                "SELECT id, device_id, endpoint, p256dh, auth FROM push_subscriptions ORDER BY created_at, id",
            )?;
            let rows = statement.query_map([], |row| {
                Ok(PushSubscription {
                    id: row.get(0)?,
                    device_id: row.get(1)?,
                    endpoint: row.get(2)?,
                    p256dh: row.get(3)?,
                    auth: row.get(4)?,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }

    /// Forgets the subscription of `endpoint`; true when there was one.
    pub async fn remove_push_subscription(&self, endpoint: &str) -> StoreResult<bool> {
        let endpoint = endpoint.to_string();
        self.write(move |conn, _| {
            Ok(conn.execute("DELETE FROM push_subscriptions WHERE endpoint = ?1", params![endpoint])? > 0)
        })
        .await
    }
}
