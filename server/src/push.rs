//! Web Push: a push to every subscribed browser (`push.subscribe`) when a session starts
//! needing the user (the transitions of [`crate::notify::Transitions`], once each), encrypted
//! for the subscription (RFC 8291, `aes128gcm`) and signed for the push service (RFC 8292
//! VAPID, ES256), with ring (already rustls's provider).
//!
//! Why not the `web-push` crate: its encryption goes through `ece`, whose default backend is
//! OpenSSL (which batond does not link), and it brings an HTTP client of its own. The
//! cryptography here is ring's (ECDH P-256, HKDF-SHA256, AES-128-GCM, ECDSA P-256); what is
//! written by hand is only the record layout of RFC 8291 §4 and the JWT of RFC 8292, checked
//! against RFC 8291's worked example in the unit tests.
//!
//! The VAPID key is made once and kept in `DATA_DIR/push-vapid.key` (PKCS#8, mode 0600). A
//! permission request's push carries Allow and Reject actions and a capability: a random code
//! bound to that one request, which `POST /push/answer` takes once (the service worker sends
//! it, with no token) to answer the request with the agent's "allow once" or "reject once"
//! option. A code is stored only as its SHA-256 and expires with [`CAPABILITY_LIFE`].
//!
//! Each push is sent on its own task, bounded by [`SEND_TIMEOUT`]; a subscription the push
//! service says is gone (404, 410) is forgotten.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use baton_protocol::{Attention, Notification, PermissionListParams, PermissionRespondParams};
use bytes::Bytes;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use ring::{aead, agreement, hkdf};
use sha2::{Digest, Sha256};
use tokio::sync::broadcast::error::RecvError;

use crate::hub::Hub;
use crate::notify::Transitions;
use crate::orchestrator::Orchestrator;
use crate::store::PushSubscription;

/// The VAPID key's file in the data dir.
pub const VAPID_KEY_FILE: &str = "push-vapid.key";
/// How long an Allow / Reject action of a push stays good.
pub const CAPABILITY_LIFE: Duration = Duration::from_secs(3600);
/// Bound on one push's delivery to its push service.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a push service keeps a push for a device that is offline (the `TTL` header).
const TTL_SECS: u32 = 3600;
/// The `sub` claim of the VAPID token: how a push service may reach the sender's operator.
const CONTACT: &str = "mailto:baton@localhost";

/// The server's VAPID key pair.
pub struct Vapid {
    key: EcdsaKeyPair,
}

impl Vapid {
    /// The key of `data_dir`, made on first use.
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Vapid> {
        let path = data_dir.join(VAPID_KEY_FILE);
        let rng = SystemRandom::new();
        let pkcs8 = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let document = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                    .map_err(|_| anyhow::anyhow!("cannot make a VAPID key"))?;
                write_private(&path, document.as_ref())?;
                tracing::info!(path = %path.display(), "made the Web Push (VAPID) key");
                document.as_ref().to_vec()
            }
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng)
            .map_err(|e| anyhow::anyhow!("{} is not a P-256 key: {e}", path.display()))?;
        Ok(Vapid { key })
    }

    /// The public key, base64url (the page's `applicationServerKey`).
    pub fn public_key(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.key.public_key().as_ref())
    }

    /// The `Authorization` header for a push to `endpoint`: `vapid t=JWT, k=KEY`.
    fn authorization(&self, endpoint: &str, now_secs: u64) -> anyhow::Result<String> {
        let uri: hyper::Uri = endpoint.parse().context("not a URL")?;
        let audience = format!(
            "{}://{}",
            uri.scheme_str().context("no scheme")?,
            uri.authority().context("no host")?.as_str().rsplit('@').next().unwrap_or_default()
        );
        let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({ "aud": audience, "exp": now_secs + 12 * 3600, "sub": CONTACT });
        let signing_input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature = self
            .key
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .map_err(|_| anyhow::anyhow!("cannot sign the VAPID token"))?;
        Ok(format!("vapid t={signing_input}.{}, k={}", URL_SAFE_NO_PAD.encode(signature.as_ref()), self.public_key()))
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path).with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// An HKDF output length for ring.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn hkdf_expand(prk: &hkdf::Prk, info: &[u8], len: usize) -> anyhow::Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    prk.expand(&[info], Len(len))
        .and_then(|okm| okm.fill(&mut out))
        .map_err(|_| anyhow::anyhow!("HKDF expansion failed"))?;
    Ok(out)
}

/// `payload` encrypted for a subscription's public key (65 bytes, uncompressed) and
/// authentication secret: the `aes128gcm` body of RFC 8291 (one record).
pub fn encrypt(payload: &[u8], ua_public: &[u8], auth_secret: &[u8]) -> anyhow::Result<Vec<u8>> {
    if ua_public.len() != 65 || ua_public[0] != 4 {
        bail!("the subscription's key is not an uncompressed P-256 point");
    }
    if payload.len() > 3990 {
        bail!("the payload is too long for one record");
    }
    let rng = SystemRandom::new();
    let private = agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &rng)
        .map_err(|_| anyhow::anyhow!("cannot make an ECDH key"))?;
    let as_public = private.compute_public_key().map_err(|_| anyhow::anyhow!("cannot derive the ECDH key"))?;
    let as_public = as_public.as_ref().to_vec();
    let peer = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, ua_public);
    let ecdh_secret = agreement::agree_ephemeral(private, &peer, |secret| secret.to_vec())
        .map_err(|_| anyhow::anyhow!("the subscription's key is not on the curve"))?;
    let mut salt = [0u8; 16];
    rng.fill(&mut salt).map_err(|_| anyhow::anyhow!("no randomness"))?;
    seal(&ecdh_secret, ua_public, &as_public, auth_secret, &salt, payload)
}

/// The encryption itself, from the ECDH secret and the salt (RFC 8291 §3.3 and §3.4, RFC 8188
/// §2): the body, its header holding the salt, the record size and the sender's public key.
fn seal(
    ecdh_secret: &[u8],
    ua_public: &[u8],
    as_public: &[u8],
    auth_secret: &[u8],
    salt: &[u8; 16],
    payload: &[u8],
) -> anyhow::Result<Vec<u8>> {
    let prk_key = hkdf::Salt::new(hkdf::HKDF_SHA256, auth_secret).extract(ecdh_secret);
    let mut key_info = b"WebPush: info\0".to_vec();
    key_info.extend_from_slice(ua_public);
    key_info.extend_from_slice(as_public);
    let ikm = hkdf_expand(&prk_key, &key_info, 32)?;
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(&ikm);
    let cek = hkdf_expand(&prk, b"Content-Encoding: aes128gcm\0", 16)?;
    let nonce = hkdf_expand(&prk, b"Content-Encoding: nonce\0", 12)?;
    let key = aead::LessSafeKey::new(
        aead::UnboundKey::new(&aead::AES_128_GCM, &cek).map_err(|_| anyhow::anyhow!("bad key length"))?,
    );
    let mut record = payload.to_vec();
    record.push(2); // the last record's delimiter, no padding
    let nonce = aead::Nonce::try_assume_unique_for_key(&nonce).map_err(|_| anyhow::anyhow!("bad nonce length"))?;
    key.seal_in_place_append_tag(nonce, aead::Aad::empty(), &mut record)
        .map_err(|_| anyhow::anyhow!("encryption failed"))?;
    let mut body = Vec::with_capacity(16 + 4 + 1 + as_public.len() + record.len());
    body.extend_from_slice(salt);
    body.extend_from_slice(&4096u32.to_be_bytes());
    body.push(as_public.len() as u8);
    body.extend_from_slice(as_public);
    body.extend_from_slice(&record);
    Ok(body)
}

/// What an Allow / Reject action answers: one permission request, with the options to give.
#[derive(Debug, Clone)]
struct Capability {
    session_id: String,
    request_id: String,
    allow: Option<String>,
    reject: Option<String>,
    expires: Instant,
}

/// Why `POST /push/answer` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerRefused {
    /// Unknown, used already or expired.
    Unknown,
    /// Not `allow` or `reject`, or the request has no such option.
    NoSuchAnswer,
    /// The server refused the answer (the request was answered elsewhere, the agent is gone).
    Refused(String),
}

/// Web Push as the server runs it: the key, and the capabilities handed out.
pub struct Push {
    vapid: Vapid,
    /// SHA-256 of each capability code → what it answers.
    capabilities: Mutex<HashMap<[u8; 32], Capability>>,
}

fn digest(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

impl Push {
    pub fn new(vapid: Vapid) -> Arc<Push> {
        Arc::new(Push { vapid, capabilities: Mutex::new(HashMap::new()) })
    }

    pub fn public_key(&self) -> String {
        self.vapid.public_key()
    }

    /// A new capability for one permission request.
    fn grant(&self, capability: Capability) -> anyhow::Result<String> {
        let mut random = [0u8; 16];
        SystemRandom::new().fill(&mut random).map_err(|_| anyhow::anyhow!("no randomness"))?;
        let code = format!("cap-{}", random.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let mut map = self.capabilities.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        map.retain(|_, c| c.expires > now);
        map.insert(digest(&code), capability);
        Ok(code)
    }

    /// `POST /push/answer`: answers the request bound to `code` with `answer` (`allow` or
    /// `reject`); the code is used up whatever the outcome, so it answers at most once.
    pub async fn answer(&self, orchestrator: &Orchestrator, code: &str, answer: &str) -> Result<String, AnswerRefused> {
        let capability = {
            let mut map = self.capabilities.lock().unwrap_or_else(|e| e.into_inner());
            map.remove(&digest(code)).filter(|c| c.expires > Instant::now()).ok_or(AnswerRefused::Unknown)?
        };
        let option_id = match answer {
            "allow" => capability.allow,
            "reject" => capability.reject,
            _ => None,
        }
        .ok_or(AnswerRefused::NoSuchAnswer)?;
        let params = PermissionRespondParams {
            session_id: capability.session_id.clone(),
            request_id: capability.request_id.clone(),
            option_id: option_id.clone(),
        };
        match orchestrator.permission_respond(params).await {
            Ok(_) => {
                tracing::info!(
                    session_id = %capability.session_id,
                    request_id = %capability.request_id,
                    option_id,
                    "answered a permission request from a push notification"
                );
                Ok(option_id)
            }
            Err(error) => Err(AnswerRefused::Refused(error.message)),
        }
    }

    /// The push's payload (JSON, which the page's service worker shows) for a transition.
    async fn payload(&self, orchestrator: &Orchestrator, notice: &crate::notify::Notice) -> serde_json::Value {
        let mut payload = serde_json::json!({
            "title": "Baton",
            "body": notice.message(),
            "session_id": notice.session_id,
            "attention": notice.attention.as_str(),
            "url": format!("/?session={}", notice.session_id),
        });
        if notice.attention != Attention::Permission {
            return payload;
        }
        let pending = orchestrator.permission_list(PermissionListParams::default()).await;
        let asked =
            pending.ok().and_then(|list| list.requests.into_iter().rev().find(|r| r.session_id == notice.session_id));
        let Some(asked) = asked else { return payload };
        let pick = |kinds: &[&str]| {
            kinds
                .iter()
                .find_map(|kind| asked.options.iter().find(|o| o.kind.as_str() == *kind))
                .map(|o| o.option_id.clone())
        };
        let capability = Capability {
            session_id: asked.session_id.clone(),
            request_id: asked.request_id.clone(),
            allow: pick(&["allow_once", "allow_always"]),
            reject: pick(&["reject_once", "reject_always"]),
            expires: Instant::now() + CAPABILITY_LIFE,
        };
        let (tool_kind, tool_title) = baton_protocol::tool_of(&asked.tool_call);
        payload["body"] = serde_json::Value::String(format!("{}: {tool_kind} {tool_title}", notice.message()));
        payload["request_id"] = serde_json::Value::String(asked.request_id.clone());
        match self.grant(capability) {
            Ok(code) => {
                payload["capability"] = serde_json::Value::String(code);
                payload["actions"] = serde_json::json!([{ "action": "allow", "title": "Allow" }, { "action": "reject", "title": "Reject" }]);
            }
            Err(e) => tracing::warn!("a push goes without its answers: {e:#}"),
        }
        payload
    }

    /// Sends one payload to one subscription; Ok(false) when the push service says it is gone.
    async fn send(&self, subscription: &PushSubscription, payload: &[u8]) -> anyhow::Result<bool> {
        let ua_public = URL_SAFE_NO_PAD.decode(subscription.p256dh.trim_end_matches('=')).context("p256dh")?;
        let auth = URL_SAFE_NO_PAD.decode(subscription.auth.trim_end_matches('=')).context("auth")?;
        let body = encrypt(payload, &ua_public, &auth)?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let headers = vec![
            ("Authorization".to_string(), self.vapid.authorization(&subscription.endpoint, now)?),
            ("Content-Encoding".to_string(), "aes128gcm".to_string()),
            ("Content-Type".to_string(), "application/octet-stream".to_string()),
            ("TTL".to_string(), TTL_SECS.to_string()),
            ("Urgency".to_string(), "high".to_string()),
        ];
        let status = tokio::time::timeout(
            SEND_TIMEOUT,
            crate::webhook::http_post(&subscription.endpoint, &headers, Bytes::from(body)),
        )
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {SEND_TIMEOUT:?}"))??;
        match status {
            200..=299 => Ok(true),
            404 | 410 => Ok(false),
            status => bail!("the push service answered {status}"),
        }
    }
}

/// Sends a push to every subscription when a session starts needing the user, until the hub
/// closes.
pub fn spawn(hub: &Hub, push: Arc<Push>, orchestrator: Arc<Orchestrator>) -> tokio::task::JoinHandle<()> {
    let mut receiver = hub.subscribe();
    tokio::spawn(async move {
        let mut transitions = Transitions::default();
        loop {
            let published = match receiver.recv().await {
                Ok(published) => published,
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "Web Push missed notifications (the server was too busy)");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let change = match &published.notification {
                Notification::StateChanged(change) => change,
                Notification::TaskDeleted(deleted) => {
                    transitions.forget(&deleted.session_ids);
                    continue;
                }
                _ => continue,
            };
            let Some(notice) = transitions.notice(change) else { continue };
            let subscriptions = match orchestrator.store().push_subscriptions().await {
                Ok(subscriptions) if subscriptions.is_empty() => continue,
                Ok(subscriptions) => subscriptions,
                Err(e) => {
                    tracing::warn!("cannot read the push subscriptions: {e}");
                    continue;
                }
            };
            let payload = push.payload(&orchestrator, &notice).await.to_string();
            for subscription in subscriptions {
                let (push, orchestrator, payload) = (push.clone(), orchestrator.clone(), payload.clone());
                tokio::spawn(async move {
                    let host = crate::webhook::redact(&subscription.endpoint);
                    match push.send(&subscription, payload.as_bytes()).await {
                        Ok(true) => tracing::debug!(push_service = %host, "sent a push"),
                        Ok(false) => {
                            tracing::info!(push_service = %host, "the push service says a subscription is gone: forgotten");
                            if let Err(e) = orchestrator.store().remove_push_subscription(&subscription.endpoint).await
                            {
                                tracing::warn!("cannot forget the subscription: {e}");
                            }
                        }
                        Err(e) => tracing::warn!(push_service = %host, "a push failed: {e:#}"),
                    }
                });
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vapid_key_is_made_once_private_and_signs_a_verifiable_token() {
        let dir = tempfile::tempdir().unwrap();
        let vapid = Vapid::load_or_create(dir.path()).unwrap();
        let again = Vapid::load_or_create(dir.path()).unwrap();
        assert_eq!(vapid.public_key(), again.public_key(), "kept across starts");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(VAPID_KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let header = vapid.authorization("https://push.example.net:8443/send/abc?x=1", 1_000).unwrap();
        let (token, key) = header.strip_prefix("vapid t=").unwrap().split_once(", k=").unwrap();
        assert_eq!(key, vapid.public_key());
        let (signed, signature) = token.rsplit_once('.').unwrap();
        let public = URL_SAFE_NO_PAD.decode(key).unwrap();
        ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, &public)
            .verify(signed.as_bytes(), &URL_SAFE_NO_PAD.decode(signature).unwrap())
            .unwrap();
        let claims = URL_SAFE_NO_PAD.decode(signed.split_once('.').unwrap().1).unwrap();
        let claims: serde_json::Value = serde_json::from_slice(&claims).unwrap();
        assert_eq!(claims["aud"], "https://push.example.net:8443");
        assert_eq!(claims["exp"], 1_000 + 12 * 3600);
    }

    /// RFC 8291 Appendix A: from its ECDH secret, keys, auth secret and salt, the body it gives.
    #[test]
    fn the_encryption_gives_the_rfc_8291_example() {
        let b64 = |text: &str| URL_SAFE_NO_PAD.decode(text).unwrap();
        let salt: [u8; 16] = b64("DGv6ra1nlYgDCS1FRnbzlw").try_into().unwrap();
        let body = seal(
            &b64("kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"),
            &b64("BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"),
            &b64("BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"),
            &b64("BTBZMqHH6r4Tts7J_aSIgg"),
            &salt,
            b"When I grow up, I want to be a watermelon",
        )
        .unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.encode(body),
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3\
             jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        );
    }

    #[test]
    fn bad_subscription_keys_are_refused() {
        assert!(encrypt(b"x", &[4u8; 10], &[0u8; 16]).is_err());
        assert!(encrypt(b"x", &[4u8; 65], &[0u8; 16]).is_err(), "not a point on the curve");
    }
}
