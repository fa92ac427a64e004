//! The host and port inside a `ws://` server URL: enough to decide whether the server is local
//! (only a local server may be started by `baton`) and what `--listen` to give it.

use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddr {
    /// Host as written in the URL, without IPv6 brackets.
    pub host: String,
    pub port: u16,
}

impl ServerAddr {
    /// Parses `ws://HOST[:PORT][/path]` or `wss://...`.
    pub fn from_url(url: &str) -> Result<ServerAddr, String> {
        let (rest, default_port) = if let Some(rest) = url.strip_prefix("ws://") {
            (rest, 80)
        } else if let Some(rest) = url.strip_prefix("wss://") {
            (rest, 443)
        } else {
            return Err(format!("{url:?} is not a ws:// or wss:// URL"));
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        // Credentials before '@' are not part of the address.
        let host_port = authority.rsplit('@').next().unwrap_or_default();
        let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
            let (host, after) = bracketed.split_once(']').ok_or_else(|| format!("unclosed '[' in {url:?}"))?;
            (host, after.strip_prefix(':'))
        } else {
            match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            }
        };
        if host.is_empty() {
            return Err(format!("no host in {url:?}"));
        }
        let port = match port {
            Some(text) => text.parse::<u16>().map_err(|_| format!("bad port {text:?} in {url:?}"))?,
            None => default_port,
        };
        Ok(ServerAddr { host: host.to_string(), port })
    }

    /// True when the server can only be on this machine; `baton` starts a server only then.
    pub fn is_loopback(&self) -> bool {
        if self.host.eq_ignore_ascii_case("localhost") {
            return true;
        }
        self.host.parse::<IpAddr>().map(|ip| ip.is_loopback()).unwrap_or(false)
    }

    /// The `--listen` argument for a server that should answer at this address. `localhost` is
    /// spelled as an IP so the server does not have to resolve names.
    pub fn listen_arg(&self) -> String {
        if self.host.eq_ignore_ascii_case("localhost") {
            return format!("127.0.0.1:{}", self.port);
        }
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]:{}", self.port),
            _ => format!("{}:{}", self.host, self.port),
        }
    }
}

/// The same server's Baton URL when `url`'s path is not `/ws` (batond answers 404 on any other
/// path): `ws://127.0.0.1:7777` → `ws://127.0.0.1:7777/ws`. `None` when the path is `/ws` or
/// the URL is not a ws:// one.
pub fn ws_path_suggestion(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    (path != "/ws" && !authority.is_empty()).then(|| format!("{scheme}://{authority}/ws"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_host_port_and_path() {
        let addr = ServerAddr::from_url("ws://127.0.0.1:7777/ws").unwrap();
        assert_eq!(addr.host, "127.0.0.1");
        assert_eq!(addr.port, 7777);
        assert!(addr.is_loopback());
        assert_eq!(addr.listen_arg(), "127.0.0.1:7777");
    }

    #[test]
    fn localhost_and_ipv6_loopback_are_local() {
        let addr = ServerAddr::from_url("ws://localhost:9000/ws").unwrap();
        assert!(addr.is_loopback());
        assert_eq!(addr.listen_arg(), "127.0.0.1:9000");
        let addr = ServerAddr::from_url("ws://[::1]:9000/ws").unwrap();
        assert!(addr.is_loopback());
        assert_eq!(addr.listen_arg(), "[::1]:9000");
    }

    #[test]
    fn remote_hosts_are_not_local_and_ports_default() {
        let addr = ServerAddr::from_url("wss://baton.example.com/ws").unwrap();
        assert_eq!(addr.port, 443);
        assert!(!addr.is_loopback());
        let addr = ServerAddr::from_url("ws://10.0.0.2/ws").unwrap();
        assert_eq!(addr.port, 80);
        assert!(!addr.is_loopback());
    }

    #[test]
    fn a_path_other_than_ws_gets_the_ws_url_suggested() {
        assert_eq!(ws_path_suggestion("ws://127.0.0.1:7777").as_deref(), Some("ws://127.0.0.1:7777/ws"));
        assert_eq!(ws_path_suggestion("ws://127.0.0.1:7777/").as_deref(), Some("ws://127.0.0.1:7777/ws"));
        assert_eq!(ws_path_suggestion("wss://h.example/baton").as_deref(), Some("wss://h.example/ws"));
        assert_eq!(ws_path_suggestion("ws://127.0.0.1:7777/ws"), None);
        assert_eq!(ws_path_suggestion("ws://127.0.0.1:7777/ws?x=1"), None);
    }

    #[test]
    fn rejects_what_is_not_a_websocket_url() {
        assert!(ServerAddr::from_url("http://127.0.0.1:7777").is_err());
        assert!(ServerAddr::from_url("ws://:7777/ws").is_err());
        assert!(ServerAddr::from_url("ws://127.0.0.1:notaport/ws").is_err());
    }
}
