//! Why a connection attempt failed, in words for the status bar, and whether trying again can
//! help. The protocol client reports handshake failures as text (tungstenite's "HTTP error:
//! 401 Unauthorized", "expected server.hello, got …"), so this reads that text; a reason it does
//! not recognise is shown as is and retried.

use baton_protocol::{ClientError, ErrorCode};

use crate::server_url::ws_path_suggestion;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectProblem {
    /// The server refused us (401/403): the same token will be refused again, so stop.
    Refused(String),
    /// Something answers at the address, but not as a Baton server does. Retrying is still
    /// right: the other program may go away and batond take the port.
    NotBaton(String),
    /// Nobody answers (yet): what a restarting server looks like.
    Unreachable(String),
}

impl ConnectProblem {
    pub fn text(&self) -> &str {
        match self {
            ConnectProblem::Refused(text) | ConnectProblem::NotBaton(text) | ConnectProblem::Unreachable(text) => text,
        }
    }
}

/// Classifies a failed attempt to connect to `url`. `token_given` tells a missing token from a
/// wrong one.
pub fn classify(error: &ClientError, url: &str, token_given: bool) -> ConnectProblem {
    let refused_token = || {
        let hint = if token_given {
            "check --token / BATON_TOKEN, or the token file of the server's data dir"
        } else {
            "give one with --token or BATON_TOKEN, or point --data-dir at the server's data dir (its token file)"
        };
        ConnectProblem::Refused(format!("the server at {url} refused the token (401 Unauthorized): {hint}"))
    };
    let forbidden = || ConnectProblem::Refused(format!("the server at {url} refused this client (403 Forbidden)"));
    let detail = match error {
        ClientError::Server(payload) => match payload.code {
            ErrorCode::Unauthorized => return refused_token(),
            ErrorCode::Forbidden => return forbidden(),
            _ => return ConnectProblem::NotBaton(format!("the server at {url} answered: {payload}")),
        },
        ClientError::Connect(detail) => detail.as_str(),
        ClientError::Decode(detail) => return ConnectProblem::NotBaton(not_baton(url, detail)),
        other => return ConnectProblem::Unreachable(other.to_string()),
    };
    if let Some(status) = detail.strip_prefix("HTTP error: ") {
        return match status.split(' ').next() {
            Some("401") => refused_token(),
            Some("403") => forbidden(),
            Some("404") => {
                let detail = format!("it answered HTTP {status}");
                let hint = match ws_path_suggestion(url) {
                    // batond serves only /ws: the likeliest mistake is a URL without it.
                    Some(ws) => format!("; batond answers on /ws: try --server {ws}"),
                    None => String::new(),
                };
                ConnectProblem::NotBaton(format!("{}{hint}", not_baton(url, &detail)))
            }
            _ => ConnectProblem::NotBaton(not_baton(url, &format!("it answered HTTP {status}"))),
        };
    }
    // No server.hello, a first frame that is not one, or an answer that is not HTTP at all.
    const FOREIGN: [&str; 5] = ["server.hello", "protocol error", "httparse", "Handshake", "expected value"];
    if FOREIGN.iter().any(|sign| detail.contains(sign)) {
        return ConnectProblem::NotBaton(not_baton(url, detail));
    }
    if detail.contains("Connection refused") {
        return ConnectProblem::Unreachable(format!("no server answers at {url}"));
    }
    ConnectProblem::Unreachable(format!("cannot reach {url}: {detail}"))
}

fn not_baton(url: &str, detail: &str) -> String {
    format!("not a Baton server at {url} ({detail})")
}

#[cfg(test)]
mod tests {
    use baton_protocol::ErrorPayload;

    use super::*;

    const URL: &str = "ws://127.0.0.1:9000/ws";

    fn connect(detail: &str) -> ClientError {
        ClientError::Connect(detail.into())
    }

    #[test]
    fn refusals_stop_and_say_which_token_problem() {
        let missing = classify(&connect("HTTP error: 401 Unauthorized"), URL, false);
        assert!(
            matches!(&missing, ConnectProblem::Refused(t) if t.contains("refused the token (401") && t.contains("give one"))
        );
        let wrong = classify(&connect("HTTP error: 401 Unauthorized"), URL, true);
        assert!(matches!(&wrong, ConnectProblem::Refused(t) if t.contains("check --token")));
        let forbidden = classify(&connect("HTTP error: 403 Forbidden"), URL, false);
        assert!(matches!(forbidden, ConnectProblem::Refused(_)));
        let in_envelope = ClientError::Server(ErrorPayload::new(ErrorCode::Unauthorized, "bad token"));
        assert!(matches!(classify(&in_envelope, URL, true), ConnectProblem::Refused(_)));
    }

    #[test]
    fn other_programs_are_named_as_such_and_silence_is_unreachable() {
        let web = classify(&connect("HTTP error: 404 Not Found"), URL, false);
        assert_eq!(
            web,
            ConnectProblem::NotBaton(format!("not a Baton server at {URL} (it answered HTTP 404 Not Found)"))
        );
        let no_path = classify(&connect("HTTP error: 404 Not Found"), "ws://127.0.0.1:9000", false);
        assert_eq!(
            no_path.text(),
            "not a Baton server at ws://127.0.0.1:9000 (it answered HTTP 404 Not Found); \
             batond answers on /ws: try --server ws://127.0.0.1:9000/ws"
        );
        let other_ws = classify(&connect("expected server.hello, got chat.message"), URL, false);
        assert!(matches!(other_ws, ConnectProblem::NotBaton(_)));
        let refused = classify(&connect("IO error: Connection refused (os error 111)"), URL, false);
        assert_eq!(refused, ConnectProblem::Unreachable(format!("no server answers at {URL}")));
    }
}
