//! `batond pair`: asks the running server of a data dir (with its main token) for a one-time
//! pairing code and prints the page's address with it, as a QR code for a phone's camera and
//! as text.

use std::path::Path;

use anyhow::{bail, Context};
use baton_protocol::{Client, ClientOptions, DevicePairParams, DevicePairResult};
use qrcode::render::unicode::Dense1x2;
use qrcode::QrCode;

use crate::control::running_server;

/// The page's address for a pairing code, from the server's WebSocket URL
/// (`wss://HOST:PORT/ws` → `https://HOST:PORT/?login=CODE`), with `host` in place of the URL's
/// host when given (a server listening on 0.0.0.0 is reached by the machine's address).
pub fn pairing_url(ws_url: &str, host: Option<&str>, code: &str) -> anyhow::Result<String> {
    let (scheme, rest) = match ws_url.split_once("://") {
        Some(("wss", rest)) => ("https", rest),
        Some(("ws", rest)) => ("http", rest),
        _ => bail!("{ws_url:?} is not a ws:// or wss:// URL"),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let port = authority.rsplit_once(':').map(|(_, port)| port).filter(|p| p.bytes().all(|b| b.is_ascii_digit()));
    let authority = match (host, port) {
        (Some(host), _)
            if host.contains(':') && !host.starts_with('[') && host.parse::<std::net::Ipv6Addr>().is_ok() =>
        {
            format!("[{host}]{}", port.map(|p| format!(":{p}")).unwrap_or_default())
        }
        (Some(host), _) if host.contains(':') => host.to_string(),
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => authority.to_string(),
    };
    Ok(format!("{scheme}://{authority}/?login={code}"))
}

/// The QR code of `text` in Unicode half blocks (two rows of modules per line of text), dark
/// modules drawn as spaces on a light background so that it scans on dark terminals too.
pub fn qr_text(text: &str) -> anyhow::Result<String> {
    let code = QrCode::new(text.as_bytes()).context("cannot make a QR code of the address")?;
    Ok(code.render::<Dense1x2>().dark_color(Dense1x2::Light).light_color(Dense1x2::Dark).quiet_zone(true).build())
}

/// Pairs a device with the server running on `data_dir`: what `batond pair` prints.
pub async fn pair(data_dir: &Path, params: DevicePairParams, host: Option<&str>) -> anyhow::Result<String> {
    let Some(server) = running_server(data_dir)? else {
        bail!("no batond is running on {}: start it first (with --tls self-signed for a phone)", data_dir.display());
    };
    let Some(url) = server.url else { bail!("the batond of {} did not write its address", data_dir.display()) };
    let fingerprint = std::fs::read_to_string(data_dir.join(crate::tls::FINGERPRINT_FILE))
        .ok()
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty());
    // The server may listen on every address: the client connects through loopback.
    let local = url.replace("0.0.0.0", "127.0.0.1").replace("[::]", "[::1]");
    let options = ClientOptions { fingerprint: fingerprint.clone(), ..ClientOptions::for_data_dir(data_dir) };
    let (client, _notes) =
        Client::connect_with(&local, options).await.with_context(|| format!("cannot connect to {local}"))?;
    let DevicePairResult { code, expires_at, name, limited } =
        client.request(params).await.context("the server refused to make a pairing code")?;
    client.close();
    let address = pairing_url(&url, host, &code)?;
    let mut out = qr_text(&address)?;
    out.push_str(&format!("\n{address}\n\n"));
    out.push_str(&format!(
        "Open it on the device to pair it as {name:?} ({}); it works once, until {expires_at}.\n",
        if limited { "it may watch and answer" } else { "full rights" }
    ));
    if host.is_none() && (url.contains("0.0.0.0") || url.contains("[::]")) {
        out.push_str("The server listens on every address: give the one the device reaches with --host.\n");
    }
    if url.starts_with("ws://") {
        out.push_str(
            "Warning: the server runs without TLS, so the device's token would cross the network in the clear.\n",
        );
    }
    if let Some(fingerprint) = fingerprint {
        out.push_str(&format!("The server's certificate (check it in the browser): SHA-256 {fingerprint}\n"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pairing_address_is_the_pages_with_the_code() {
        let url = |ws: &str, host: Option<&str>| pairing_url(ws, host, "pair-1").unwrap();
        assert_eq!(url("wss://0.0.0.0:7777/ws", Some("192.168.1.20")), "https://192.168.1.20:7777/?login=pair-1");
        assert_eq!(url("ws://127.0.0.1:7777/ws", None), "http://127.0.0.1:7777/?login=pair-1");
        assert_eq!(url("wss://[::]:7777/ws", Some("fe80::1")), "https://[fe80::1]:7777/?login=pair-1");
        assert_eq!(url("wss://0.0.0.0:7777/ws", Some("box.lan:8443")), "https://box.lan:8443/?login=pair-1");
        assert!(pairing_url("http://x/ws", None, "c").is_err());
    }

    #[test]
    fn the_qr_code_is_drawn_in_half_blocks() {
        let qr = qr_text("https://192.168.1.20:7777/?login=pair-0123456789abcdef0123456789abcdef").unwrap();
        let lines: Vec<&str> = qr.lines().collect();
        assert!(lines.len() > 15, "{qr}");
        assert!(qr.chars().all(|c| matches!(c, ' ' | '█' | '▀' | '▄' | '\n')), "{qr}");
        assert!(lines.iter().all(|line| line.chars().count() == lines[0].chars().count()));
    }
}
