//! Paired devices: one-time pairing codes (`device.pair`), exchanged at `POST /login` for a
//! device token of the device's own; the tokens of paired devices, checked at the WebSocket
//! handshake besides the server's main token; revocation, which closes the device's open
//! connections at once.
//!
//! Tokens are kept only as their SHA-256 (in memory and in the store) and compared in constant
//! time. Codes are used once, expire, and failed exchanges are rate limited (for login codes
//! too: they share `POST /login`).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use baton_protocol::{DeviceInfo, DevicePairParams, DevicePairResult, ErrorCode, ErrorPayload, DEFAULT_PAIRING_SECS};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::secret::constant_time_eq;
use crate::store::{DeviceRecord, Store};

/// Failed code exchanges allowed within [`FAILURE_WINDOW`]; beyond them every exchange is
/// refused (429) until the window has moved on.
pub const MAX_FAILURES: usize = 10;
/// The window of [`MAX_FAILURES`].
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// Who a connection acts for.
#[derive(Debug, Clone)]
pub enum Principal {
    /// The server's main token (or no token, with `--no-token`).
    Owner,
    /// A paired device.
    Device { id: String, limited: bool },
}

/// Becomes true when the device is revoked. Each connection of a device holds one: their count
/// is the device's open connections.
pub type Revocation = watch::Receiver<bool>;

impl Principal {
    /// Refuses what a device limited to watching and answering may not do.
    pub fn may(&self, action: &str) -> Result<(), ErrorPayload> {
        let Principal::Device { limited: true, .. } = self else { return Ok(()) };
        if LIMITED_ACTIONS.contains(&action) {
            return Ok(());
        }
        Err(ErrorPayload::new(
            ErrorCode::Forbidden,
            format!(
                "this device may only watch and answer, not {action}: use the server's own token, or pair a device \
                 with full rights (batond pair --full)"
            ),
        ))
    }
}

/// What a limited device may do: read, follow sessions, answer permission requests and
/// waiting agents (the messages queued while a turn runs included), cancel a turn and resume a
/// session, and review a task's changes. Not: new tasks or sessions, working directories, agent
/// configuration, deleting, committing, merging, shells, devices.
const LIMITED_ACTIONS: &[&str] = &[
    "agent.list",
    "task.list",
    "task.session.list",
    "task.changes",
    "task.diff",
    "task.session.status",
    "task.session.resume",
    "task.session.cancel",
    "message.add",
    "message.list",
    "message.text",
    "message.search",
    "queue.list",
    "queue.edit",
    "queue.remove",
    "queue.release",
    "push.key",
    "push.subscribe",
    "push.unsubscribe",
    "session.subscribe",
    "session.unsubscribe",
    "session.export",
    "session.options",
    "permission.respond",
    "permission.list",
    "permission.rule.list",
    "usage.get",
    "ping",
];

struct PairingCode {
    code: String,
    name: String,
    limited: bool,
    expires: Instant,
}

struct Known {
    record: DeviceRecord,
    /// Each connection of the device holds a receiver: their count is its open connections.
    revoked: watch::Sender<bool>,
}

#[derive(Default)]
struct Inner {
    devices: Vec<Known>,
    codes: Vec<PairingCode>,
    failures: VecDeque<Instant>,
}

/// Why a code was not exchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// Too many failed exchanges lately: the wait until the oldest of them leaves the window
    /// (when an exchange can be admitted again).
    TooMany(Duration),
    /// Not a code given, used already, or expired.
    Unknown,
}

pub struct Devices {
    store: Store,
    inner: Mutex<Inner>,
}

fn sha256(text: &str) -> Vec<u8> {
    Sha256::digest(text.as_bytes()).to_vec()
}

impl Devices {
    /// The devices the store knows.
    pub async fn load(store: Store) -> anyhow::Result<Devices> {
        let records = store.devices().await?;
        let devices = records.into_iter().map(|record| Known { record, revoked: watch::Sender::new(false) }).collect();
        Ok(Devices { store, inner: Mutex::new(Inner { devices, ..Inner::default() }) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new pairing code.
    pub fn pair(&self, params: &DevicePairParams) -> DevicePairResult {
        let secs = params.expires_in_secs.unwrap_or(DEFAULT_PAIRING_SECS);
        let name = params.name.as_deref().map(str::trim).unwrap_or("device").to_string();
        let code = format!("pair-{}", uuid::Uuid::new_v4().simple());
        let now = Instant::now();
        let mut inner = self.lock();
        inner.codes.retain(|c| c.expires > now);
        inner.codes.push(PairingCode {
            code: code.clone(),
            name: name.clone(),
            limited: !params.full,
            expires: now + Duration::from_secs(secs.into()),
        });
        let expires_at = (chrono::Utc::now() + chrono::Duration::seconds(secs.into()))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        DevicePairResult { code, expires_at, name, limited: !params.full }
    }

    /// Counts a failed exchange; refuses when too many failed lately (checked first, so that a
    /// guesser learns nothing once over the bound).
    pub fn admit_exchange(&self, now: Instant) -> Result<(), Refused> {
        let mut inner = self.lock();
        while inner.failures.front().is_some_and(|at| now.duration_since(*at) > FAILURE_WINDOW) {
            inner.failures.pop_front();
        }
        if inner.failures.len() >= MAX_FAILURES {
            let oldest = inner.failures.front().map_or(Duration::ZERO, |at| now.duration_since(*at));
            return Err(Refused::TooMany(FAILURE_WINDOW.saturating_sub(oldest)));
        }
        Ok(())
    }

    /// Notes a failed exchange (a login or pairing code that was not one).
    pub fn failed_exchange(&self, now: Instant) {
        self.lock().failures.push_back(now);
    }

    /// Takes a pairing code (used once): the new device's name and rights, or None when it is
    /// not one given, used already or expired.
    fn take_code(&self, offered: &str, now: Instant) -> Option<(String, bool)> {
        let mut inner = self.lock();
        inner.codes.retain(|c| c.expires > now);
        let at = inner.codes.iter().position(|c| constant_time_eq(c.code.as_bytes(), offered.as_bytes()))?;
        let code = inner.codes.swap_remove(at);
        Some((code.name, code.limited))
    }

    /// Exchanges a pairing code for a new device's token.
    pub async fn redeem(&self, offered: &str) -> Result<String, Refused> {
        let now = Instant::now();
        self.admit_exchange(now)?;
        let Some((name, limited)) = self.take_code(offered, now) else {
            self.failed_exchange(now);
            return Err(Refused::Unknown);
        };
        // Two v4 UUIDs: 244 random bits from the operating system's generator.
        let token = format!("device-{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let record = DeviceRecord {
            id: format!("dev-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
            name,
            token_sha256: sha256(&token),
            limited,
            paired_at: baton_protocol::now_timestamp(),
            last_seen_at: None,
            last_address: None,
        };
        if let Err(e) = self.store.add_device(record.clone()).await {
            tracing::error!("cannot record a paired device: {e}");
            return Err(Refused::Unknown);
        }
        tracing::info!(device_id = %record.id, name = %record.name, limited, "paired a device");
        self.lock().devices.push(Known { record, revoked: watch::Sender::new(false) });
        Ok(token)
    }

    /// The device whose token this is, if any (constant-time comparison of the hashes, every
    /// device compared).
    pub fn authenticate(&self, offered: &str) -> Option<(Principal, Revocation)> {
        if offered.is_empty() {
            return None;
        }
        let hash = sha256(offered);
        let inner = self.lock();
        let mut found = None;
        for known in &inner.devices {
            if constant_time_eq(&known.record.token_sha256, &hash) {
                found = Some((
                    Principal::Device { id: known.record.id.clone(), limited: known.record.limited },
                    known.revoked.subscribe(),
                ));
            }
        }
        found
    }

    /// Notes that a device connected now from `address`.
    pub async fn seen(&self, device_id: &str, address: &str) {
        let at = baton_protocol::now_timestamp();
        {
            let mut inner = self.lock();
            if let Some(known) = inner.devices.iter_mut().find(|d| d.record.id == device_id) {
                known.record.last_seen_at = Some(at.clone());
                known.record.last_address = Some(address.to_string());
            }
        }
        if let Err(e) = self.store.device_seen(device_id, &at, address).await {
            tracing::warn!(device_id, "cannot record when the device was seen: {e}");
        }
    }

    /// The devices not revoked, oldest first.
    pub fn list(&self) -> Vec<DeviceInfo> {
        self.lock()
            .devices
            .iter()
            .map(|known| DeviceInfo {
                device_id: known.record.id.clone(),
                name: known.record.name.clone(),
                limited: known.record.limited,
                paired_at: known.record.paired_at.clone(),
                last_seen_at: known.record.last_seen_at.clone(),
                last_address: known.record.last_address.clone(),
                connections: known.revoked.receiver_count() as u32,
            })
            .collect()
    }

    /// Revokes a device: its token stops working now and its open connections are closed.
    /// Returns how many were open.
    pub async fn revoke(&self, device_id: &str) -> Result<u32, ErrorPayload> {
        if !self.lock().devices.iter().any(|d| d.record.id == device_id) {
            return Err(ErrorPayload::not_found(format!("device {device_id} not found")));
        }
        self.store
            .revoke_device(device_id, &baton_protocol::now_timestamp())
            .await
            .map_err(|e| ErrorPayload::internal(format!("cannot revoke device {device_id}: {e}")))?;
        let known = {
            let mut inner = self.lock();
            let at = inner.devices.iter().position(|d| d.record.id == device_id);
            at.map(|at| inner.devices.remove(at))
        };
        let Some(known) = known else { return Ok(0) };
        let open = known.revoked.receiver_count() as u32;
        known.revoked.send_replace(true);
        tracing::info!(device_id, closed_connections = open, "revoked a device");
        Ok(open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn devices() -> (tempfile::TempDir, Devices) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("baton.db"), crate::hub::Hub::new()).unwrap();
        let devices = Devices::load(store).await.unwrap();
        (dir, devices)
    }

    #[tokio::test]
    async fn a_code_works_once_and_not_after_it_expired() {
        let (_dir, devices) = devices().await;
        let code = devices.pair(&DevicePairParams { name: Some("phone".into()), ..Default::default() }).code;
        let token = devices.redeem(&code).await.expect("the code works");
        assert!(matches!(devices.authenticate(&token), Some((Principal::Device { limited: true, .. }, _))));
        assert_eq!(devices.redeem(&code).await, Err(Refused::Unknown), "used once");
        assert!(devices.authenticate("device-nope").is_none());
        assert!(devices.authenticate("").is_none());

        let code = devices.pair(&DevicePairParams { expires_in_secs: Some(60), ..Default::default() }).code;
        let later = Instant::now() + Duration::from_secs(61);
        assert_eq!(devices.take_code(&code, later), None, "expired");
    }

    #[tokio::test]
    async fn failed_exchanges_are_rate_limited() {
        let (_dir, devices) = devices().await;
        for _ in 0..MAX_FAILURES {
            assert_eq!(devices.redeem("pair-guess").await, Err(Refused::Unknown));
        }
        let code = devices.pair(&DevicePairParams::default()).code;
        assert!(
            matches!(devices.redeem(&code).await, Err(Refused::TooMany(wait)) if wait <= FAILURE_WINDOW),
            "even a good code, while over the bound"
        );
        // The wait is until the oldest failure leaves the window.
        let oldest = *devices.lock().failures.front().expect("failures counted");
        let wait = devices.admit_exchange(oldest + Duration::from_secs(20));
        assert_eq!(wait, Err(Refused::TooMany(FAILURE_WINDOW - Duration::from_secs(20))));
        let later = Instant::now() + FAILURE_WINDOW + Duration::from_secs(1);
        assert_eq!(devices.admit_exchange(later), Ok(()), "the window moves on");
    }

    #[test]
    fn a_limited_device_may_watch_and_answer_only() {
        let limited = Principal::Device { id: "dev-1".into(), limited: true };
        assert!(limited.may("permission.respond").is_ok() && limited.may("message.add").is_ok());
        for refused in ["task.create", "task.session.start", "session.set_option", "device.pair", "task.delete"] {
            let error = limited.may(refused).unwrap_err();
            assert_eq!(error.code, ErrorCode::Forbidden);
            assert!(error.message.contains("may only watch and answer"), "{}", error.message);
        }
        assert!(Principal::Owner.may("task.create").is_ok());
    }
}
