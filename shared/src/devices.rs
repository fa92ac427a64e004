//! Paired devices (a phone, a tablet): `device.pair` makes a one-time pairing code, which the
//! page exchanges for a device token of its own (`POST /login`); `device.list` and
//! `device.revoke` manage them. Only a connection with the server's main token may use these
//! actions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default life of a pairing code, in seconds.
pub const DEFAULT_PAIRING_SECS: u32 = 300;
/// Longest life of a pairing code, in seconds.
pub const MAX_PAIRING_SECS: u32 = 3600;

/// `device.pair`: a one-time pairing code for a new device.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DevicePairParams {
    /// The device's name, as `device.list` shows it (default `device`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Give the device the main token's rights; by default it may only watch and answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub full: bool,
    /// Seconds the code stays valid (1 to 3600, default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_secs: Option<u32>,
}

/// The answer to `device.pair`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DevicePairResult {
    /// The one-time code: the page's address with `?login=CODE` pairs the browser that opens it.
    pub code: String,
    /// When the code stops working (RFC 3339).
    pub expires_at: String,
    /// The name the device gets.
    pub name: String,
    /// Whether the device may only watch and answer.
    pub limited: bool,
}

/// `device.list`: the paired devices that are not revoked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceListParams {}

/// A paired device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceInfo {
    /// `dev-<12 hex>`.
    pub device_id: String,
    /// Its name.
    pub name: String,
    /// May only watch and answer (no new tasks or sessions, no configuration).
    pub limited: bool,
    /// When it was paired (RFC 3339).
    pub paired_at: String,
    /// When it last connected, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
    /// The address it last connected from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_address: Option<String>,
    /// Its connections open now.
    pub connections: u32,
}

/// The answer to `device.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceListResult {
    /// Oldest first.
    pub devices: Vec<DeviceInfo>,
}

/// `device.revoke`: the device's token stops working and its open connections are closed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceRevokeParams {
    /// The device.
    pub device_id: String,
}

/// The answer to `device.revoke`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceRevokeResult {
    /// The device revoked.
    pub device_id: String,
    /// How many of its connections were closed.
    pub closed_connections: u32,
}

/// `push.key`: the server's VAPID public key (RFC 8292), the `applicationServerKey` a page
/// subscribes with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PushKeyParams {}

/// The answer to `push.key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PushKeyResult {
    /// The uncompressed P-256 public key, base64url without padding.
    pub public_key: String,
}

/// `push.subscribe`: a Web Push subscription (RFC 8030) of this connection's device (or of the
/// server's own token), sent a push when a session starts needing the user. The same endpoint
/// again replaces the keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PushSubscribeParams {
    /// The push service's URL for this subscription (`PushSubscription.endpoint`), https (or
    /// http on loopback).
    pub endpoint: String,
    /// The subscription's P-256 public key (`keys.p256dh`), base64url.
    pub p256dh: String,
    /// Its authentication secret (`keys.auth`), base64url, 16 bytes.
    pub auth: String,
}

/// The answer to `push.subscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PushSubscribeResult {
    /// `push-<12 hex>`.
    pub subscription_id: String,
}

/// `push.unsubscribe`: forget a subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PushUnsubscribeParams {
    /// The endpoint given to `push.subscribe`.
    pub endpoint: String,
}

/// The answer to `push.unsubscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PushUnsubscribeResult {
    /// Whether a subscription was forgotten.
    pub removed: bool,
}
