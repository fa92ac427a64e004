//! Who may connect (DESIGN.md §7): loopback by default, a token for anything else, and browser
//! pages only from local origins (a web page must not drive local agents).

use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;

#[derive(Debug, Clone, Default)]
pub struct SecurityPolicy {
    /// Required as `Authorization: Bearer <token>` or `?token=<token>` when set.
    pub token: Option<String>,
    /// Origins allowed besides local ones (e.g. `https://baton.example.com`).
    pub allowed_origins: Vec<String>,
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn is_local_origin(origin: &str) -> bool {
    let Some((_, rest)) = origin.split_once("://") else {
        return false;
    };
    let host = rest.split('/').next().unwrap_or("");
    let host = if host.starts_with('[') {
        host.split(']').next().map(|h| format!("{h}]")).unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or("").to_string()
    };
    matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

impl SecurityPolicy {
    /// Checks the HTTP upgrade request; the error is the status and reason to answer with.
    pub fn check(&self, request: &Request) -> Result<(), (StatusCode, String)> {
        if request.uri().path() != "/ws" {
            return Err((StatusCode::NOT_FOUND, "the Baton endpoint is /ws".into()));
        }
        if let Some(origin) = request.headers().get("origin").and_then(|o| o.to_str().ok()) {
            if !is_local_origin(origin) && !self.allowed_origins.iter().any(|a| a == origin) {
                return Err((StatusCode::FORBIDDEN, format!("origin {origin} is not allowed")));
            }
        }
        if let Some(token) = &self.token {
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
            let offered = bearer.or(query).unwrap_or_default();
            if !constant_time_eq(offered.as_bytes(), token.as_bytes()) {
                return Err((StatusCode::UNAUTHORIZED, "a valid token is required".into()));
            }
        }
        Ok(())
    }

    /// The handshake callback for tokio-tungstenite.
    #[allow(clippy::result_large_err)]
    pub fn callback(
        &self,
    ) -> impl FnOnce(
        &Request,
        Response,
    ) -> Result<Response, tokio_tungstenite::tungstenite::handshake::server::ErrorResponse>
           + '_ {
        move |request, response| match self.check(request) {
            Ok(()) => Ok(response),
            Err((status, reason)) => {
                let mut error = tokio_tungstenite::tungstenite::handshake::server::ErrorResponse::new(Some(reason));
                *error.status_mut() = status;
                Err(error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder().uri(uri);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn local_origins_pass_and_foreign_pages_do_not() {
        let policy = SecurityPolicy::default();
        assert!(policy.check(&request("/ws", &[])).is_ok(), "non-browser clients send no origin");
        assert!(policy.check(&request("/ws", &[("origin", "http://localhost:5173")])).is_ok());
        assert!(policy.check(&request("/ws", &[("origin", "http://[::1]:8080")])).is_ok());
        assert_eq!(
            policy.check(&request("/ws", &[("origin", "https://evil.example")])).unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            policy.check(&request("/ws", &[("origin", "http://localhost.evil.example")])).unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        let allowing = SecurityPolicy { allowed_origins: vec!["https://ok.example".into()], ..Default::default() };
        assert!(allowing.check(&request("/ws", &[("origin", "https://ok.example")])).is_ok());
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
