//! Who may connect (docs/PROTOCOL.md §1, 'Handshake checks'): whoever presents the token
//! (required on every connection unless batond runs with `--no-token`), and browser pages only
//! from the server's own origin or an origin allowed with `--allow-origin` (a page on any other
//! site, or on another local port, must not drive local agents).

use hyper::{Request, StatusCode};

use crate::secret::constant_time_eq;

#[derive(Debug, Clone, Default)]
pub struct SecurityPolicy {
    /// Required as `Authorization: Bearer <token>` or `?token=<token>` when set.
    pub token: Option<String>,
    /// Origins allowed besides the server's own (e.g. `https://baton.example.com`).
    pub allowed_origins: Vec<String>,
}

/// The host part of a `Host` header value (`127.0.0.1:7777` → `127.0.0.1`, `[::1]:80` → `[::1]`).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        host.split_inclusive(']').next().unwrap_or(host)
    } else {
        host.split(':').next().unwrap_or(host)
    }
}

/// A name no DNS answer can point elsewhere: an IP literal or `localhost`.
fn is_literal_host(name: &str) -> bool {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost") || bare.parse::<std::net::IpAddr>().is_ok()
}

impl SecurityPolicy {
    /// A page loaded from this server (`http://` or `https://` + the request's `Host`). Without a
    /// token, only when that host is an IP literal or `localhost`: a DNS name could be rebound
    /// to this machine by another site's page.
    fn same_origin<B>(&self, request: &Request<B>, origin: &str) -> bool {
        let Some(host) = request.headers().get("host").and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let matches = ["http://", "https://"].iter().any(|scheme| {
            origin.len() == scheme.len() + host.len()
                && origin[..scheme.len()].eq_ignore_ascii_case(scheme)
                && origin[scheme.len()..].eq_ignore_ascii_case(host)
        });
        matches && (self.token.is_some() || is_literal_host(host_name(host)))
    }

    /// Refuses a request from a browser page of an origin that is not allowed (a request with
    /// no `Origin` comes from no page).
    pub fn check_origin<B>(&self, request: &Request<B>) -> Result<(), (StatusCode, String)> {
        if let Some(origin) = request.headers().get("origin") {
            let origin = origin.to_str().unwrap_or("");
            if !self.same_origin(request, origin) && !self.allowed_origins.iter().any(|a| a == origin) {
                return Err((StatusCode::FORBIDDEN, format!("origin {origin} is not allowed")));
            }
        }
        Ok(())
    }

    /// Checks the HTTP upgrade request; the error is the status and reason to answer with.
    pub fn check<B>(&self, request: &Request<B>) -> Result<(), (StatusCode, String)> {
        if request.uri().path() != "/ws" {
            return Err((StatusCode::NOT_FOUND, "the Baton endpoint is /ws".into()));
        }
        self.check_origin(request)?;
        if let Some(token) = &self.token {
            let offered = offered_token(request);
            if !constant_time_eq(offered.as_bytes(), token.as_bytes()) {
                return Err((StatusCode::UNAUTHORIZED, "a valid token is required".into()));
            }
        }
        Ok(())
    }
}

/// The token a request offers: `Authorization: Bearer <token>`, else `?token=<token>`; empty
/// when none.
pub(super) fn offered_token<B>(request: &Request<B>) -> String {
    let bearer = request
        .headers()
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::to_owned);
    let query = request
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=").map(str::to_owned)));
    bearer.or(query).unwrap_or_default()
}

/// What a client may say about itself in its upgrade request, as headers
/// (`Baton-Protocol-Version: N`, `Baton-Client: NAME`) or, for browsers, in the query
/// (`protocol_version=N`, `client=NAME`): the protocol it speaks and its name.
/// Both optional; logged with the connection. A `protocol_version` that is not a number is
/// refused with 400. The server speaks its own version whatever the client says: `server.hello`
/// tells the client, which decides whether it can go on.
pub(super) fn client_version<B>(request: &Request<B>) -> Result<(), (StatusCode, String)> {
    let query = request.uri().query().unwrap_or("");
    let in_query = |name: &str| query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='));
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    let field = |name: &str| match name {
        "protocol_version" => header("baton-protocol-version").or_else(|| in_query(name)),
        _ => header("baton-client").or_else(|| in_query(name)),
    };
    let version = match field("protocol_version") {
        Some(text) => match text.parse::<u32>() {
            Ok(version) => Some(version),
            Err(_) => {
                return Err((StatusCode::BAD_REQUEST, format!("protocol_version must be a number, not {text:?}")));
            }
        },
        None => None,
    };
    let client: String = field("client").unwrap_or("").chars().take(64).filter(|c| !c.is_control()).collect();
    if version.is_some() || !client.is_empty() {
        tracing::info!(client = %client, protocol_version = ?version, "client says who it is");
        if version.is_some_and(|v| v > baton_protocol::PROTOCOL_VERSION) {
            tracing::info!(client = %client, "the client speaks a newer protocol; server.hello tells it ours");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder().uri(uri);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn only_the_servers_own_origin_and_allowed_ones_pass() {
        let policy = SecurityPolicy::default();
        let host = ("host", "127.0.0.1:7777");
        assert!(policy.check(&request("/ws", &[host])).is_ok(), "non-browser clients send no origin");
        assert!(policy.check(&request("/ws", &[host, ("origin", "http://127.0.0.1:7777")])).is_ok());
        assert!(policy.check(&request("/ws", &[("host", "[::1]:80"), ("origin", "http://[::1]:80")])).is_ok());
        assert!(policy
            .check(&request("/ws", &[("host", "localhost:7777"), ("origin", "http://localhost:7777")]))
            .is_ok());
        for refused in [
            "http://127.0.0.1:5173",
            "http://localhost:7777",
            "https://evil.example",
            "http://127.0.0.1:7777.evil.example",
            "null",
        ] {
            assert_eq!(
                policy.check(&request("/ws", &[host, ("origin", refused)])).unwrap_err().0,
                StatusCode::FORBIDDEN,
                "{refused}"
            );
        }
        // A DNS name is same-origin only with a token: another site could rebind it to here.
        let rebound = [("host", "evil.example:7777"), ("origin", "http://evil.example:7777")];
        assert_eq!(policy.check(&request("/ws", &rebound)).unwrap_err().0, StatusCode::FORBIDDEN);
        let with_token = SecurityPolicy { token: Some("s3cret".into()), ..Default::default() };
        assert!(with_token.check(&request("/ws?token=s3cret", &rebound)).is_ok());
        let allowing = SecurityPolicy { allowed_origins: vec!["https://ok.example".into()], ..Default::default() };
        assert!(allowing.check(&request("/ws", &[host, ("origin", "https://ok.example")])).is_ok());
        assert_eq!(policy.check(&request("/other", &[])).unwrap_err().0, StatusCode::NOT_FOUND);
    }

    #[test]
    fn tokens_are_required_when_set() {
        let policy = SecurityPolicy { token: Some("s3cret".into()), ..Default::default() };
        assert_eq!(policy.check(&request("/ws", &[])).unwrap_err().0, StatusCode::UNAUTHORIZED);
        assert!(policy.check(&request("/ws", &[("authorization", "Bearer s3cret")])).is_ok());
        assert!(policy.check(&request("/ws?token=s3cret", &[])).is_ok());
        assert!(policy.check(&request("/ws?token=wrong", &[])).is_err());
    }
}
