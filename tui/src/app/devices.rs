//! Paired devices (`p`): the list `device.list` gives (name, rights, last seen, address, open
//! connections); `n` asks `device.pair` for a one-time code and shows the page's address with
//! it as a QR code for a phone's camera and as text; `x` revokes the device under the cursor
//! (asks first): the server closes its connections at once.

use std::net::{IpAddr, Ipv4Addr, UdpSocket};

use baton_protocol::{DeviceInfo, DevicePairResult, DeviceRevokeResult};

use super::{App, Confirmation, Overlay};
use crate::action::Action;
use crate::command::Request;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct DevicesView {
    /// None until `device.list` answers.
    pub devices: Option<Vec<DeviceInfo>>,
    pub selected: usize,
    /// The pairing code shown, if one was asked for.
    pub pairing: Option<Pairing>,
}

/// A pairing code as shown: the page's address with it, and that address's QR code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    pub address: String,
    /// Rows of Unicode half blocks.
    pub qr: Vec<String>,
    pub name: String,
    pub limited: bool,
    pub expires_at: String,
    /// What the user should know about the address (a guessed host, no TLS...).
    pub notes: Vec<String>,
}

impl Pairing {
    /// The pairing as shown for `result`, the server being at `server_url` (`ws[s]://HOST:PORT/ws`).
    pub fn new(server_url: &str, result: DevicePairResult) -> Result<Pairing, String> {
        let (page, mut notes) = pairing_page(server_url, guess_network_address())?;
        let address = format!("{page}/?login={}", result.code);
        let qr = qr_rows(&address)?;
        if address.starts_with("http://") {
            notes.push(
                "No TLS: the phone's token would cross the network in the clear (batond --tls self-signed).".into(),
            );
        }
        Ok(Pairing { address, qr, name: result.name, limited: result.limited, expires_at: result.expires_at, notes })
    }
}

/// The page's address (`http[s]://HOST:PORT`) for the server at `server_url`, and notes. A
/// loopback or unspecified host is replaced by `network` (this machine's address on its
/// network), since a phone cannot reach this machine's loopback.
pub fn pairing_page(server_url: &str, network: Option<IpAddr>) -> Result<(String, Vec<String>), String> {
    let (scheme, rest) = match server_url.split_once("://") {
        Some(("wss", rest)) => ("https", rest),
        Some(("ws", rest)) => ("http", rest),
        _ => return Err(format!("{server_url} is not a ws:// or wss:// address")),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, tail)) => (host, tail.strip_prefix(':')),
            None => return Err(format!("{server_url} has no closing ] in its host")),
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let local = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified());
    let port = port.map(|p| format!(":{p}")).unwrap_or_default();
    let bracket = |host: &str| if host.contains(':') { format!("[{host}]") } else { host.to_string() };
    let mut notes = Vec::new();
    let host = match (local, network) {
        (false, _) => bracket(host),
        (true, Some(ip)) => {
            notes.push(format!(
                "{ip}: this machine's address on its network; batond must listen on it (--listen 0.0.0.0{port})."
            ));
            bracket(&ip.to_string())
        }
        (true, None) => {
            notes.push(
                "This is a loopback address: run batond pair --host ADDRESS for the address a phone reaches."
                    .to_string(),
            );
            bracket(host)
        }
    };
    Ok((format!("{scheme}://{host}{port}"), notes))
}

/// This machine's address on its network: the one a UDP socket "connected" toward a
/// documentation address (RFC 5737, no packet is sent) is bound to. None without a route.
fn guess_network_address() -> Option<IpAddr> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect((Ipv4Addr::new(192, 0, 2, 1), 9)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Light modules around the code: fewer than the standard four, so that the code fits a
/// 30-row terminal; phone cameras read it, since the margin is drawn light, not left to the
/// terminal's background.
const MARGIN: usize = 2;

/// The QR code of `text` in Unicode half blocks (two rows of modules per row of text), light
/// modules drawn as blocks (to be shown in white on black) and dark ones as spaces.
pub fn qr_rows(text: &str) -> Result<Vec<String>, String> {
    let code = qrcode::QrCode::new(text.as_bytes()).map_err(|e| format!("no QR code for the address: {e}"))?;
    let (width, colors) = (code.width(), code.to_colors());
    let size = width + 2 * MARGIN;
    let light = |x: usize, y: usize| {
        let inside = (MARGIN..MARGIN + width).contains(&x) && (MARGIN..MARGIN + width).contains(&y);
        !inside || colors[(y - MARGIN) * width + (x - MARGIN)] == qrcode::Color::Light
    };
    Ok((0..size)
        .step_by(2)
        .map(|y| {
            (0..size)
                .map(|x| match (light(x, y), y + 1 >= size || light(x, y + 1)) {
                    (true, true) => '█',
                    (true, false) => '▀',
                    (false, true) => '▄',
                    (false, false) => ' ',
                })
                .collect()
        })
        .collect())
}

impl App {
    /// `p`: the paired devices.
    pub(super) fn open_devices(&mut self) {
        self.overlay = Some(Overlay::Devices(DevicesView::default()));
        self.send(Request::ListDevices);
    }

    /// Keys while the list is open; false for the ones it leaves alone.
    pub(super) fn devices_action(&mut self, action: &Action) -> bool {
        let Some(Overlay::Devices(view)) = &mut self.overlay else { return false };
        let count = view.devices.as_ref().map_or(0, Vec::len);
        let selected = view.selected.min(count.saturating_sub(1));
        match action {
            // Esc over a pairing code goes back to the list (refreshed: the device may be
            // paired by now); over the list it closes it.
            Action::CloseOverlay if view.pairing.is_some() => {
                view.pairing = None;
                self.send(Request::ListDevices);
            }
            Action::MoveUp => view.selected = selected.saturating_sub(1),
            Action::MoveDown => view.selected = (selected + 1).min(count.saturating_sub(1)),
            Action::PairDevice => {
                let server_url = self.server_url.clone();
                self.flash("asking the server for a pairing code…", false);
                self.send(Request::PairDevice { server_url });
            }
            Action::RevokeDevice => match view.devices.as_ref().and_then(|d| d.get(selected)) {
                Some(device) if view.pairing.is_none() => {
                    let confirmation =
                        Confirmation::RevokeDevice { device_id: device.device_id.clone(), label: device.name.clone() };
                    self.overlay = Some(Overlay::Confirm(confirmation));
                }
                _ => self.flash("no device to revoke", true),
            },
            _ => return false,
        }
        self.dirty = true;
        true
    }

    /// The revocation was confirmed: sent, and the list shown again.
    pub(super) fn revoke_confirmed(&mut self, device_id: String) {
        self.overlay = Some(Overlay::Devices(DevicesView::default()));
        self.send(Request::RevokeDevice { device_id });
    }

    pub(super) fn devices_listed(&mut self, devices: Vec<DeviceInfo>) {
        if let Some(Overlay::Devices(view)) = &mut self.overlay {
            view.selected = view.selected.min(devices.len().saturating_sub(1));
            view.devices = Some(devices);
            self.dirty = true;
        }
    }

    pub(super) fn device_paired(&mut self, pairing: Pairing) {
        self.flash(format!("pairing code for {:?}: open the address on the device", pairing.name), false);
        if let Some(Overlay::Devices(view)) = &mut self.overlay {
            view.pairing = Some(pairing);
        }
        self.dirty = true;
    }

    pub(super) fn device_revoked(&mut self, result: DeviceRevokeResult) {
        self.flash(
            format!("revoked {}: {} open connection(s) closed", result.device_id, result.closed_connections),
            false,
        );
        if matches!(self.overlay, Some(Overlay::Devices(_))) {
            self.send(Request::ListDevices);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_address_is_made_from_the_servers() {
        let lan: IpAddr = "192.168.1.20".parse().unwrap();
        let (page, notes) = pairing_page("wss://127.0.0.1:7777/ws", Some(lan)).unwrap();
        assert_eq!(page, "https://192.168.1.20:7777");
        assert!(notes[0].contains("batond must listen on it (--listen 0.0.0.0:7777)"), "{notes:?}");
        let (page, notes) = pairing_page("wss://box.lan:8443/ws", Some(lan)).unwrap();
        assert_eq!((page.as_str(), notes.len()), ("https://box.lan:8443", 0));
        let (page, _) = pairing_page("ws://[::1]:7777/ws", None).unwrap();
        assert_eq!(page, "http://[::1]:7777");
        let (page, _) = pairing_page("ws://[fe80::2]:7777/ws", Some(lan)).unwrap();
        assert_eq!(page, "http://[fe80::2]:7777");
        let (page, _) = pairing_page("ws://0.0.0.0:7777/ws", Some("fd00::5".parse().unwrap())).unwrap();
        assert_eq!(page, "http://[fd00::5]:7777");
        assert!(pairing_page("http://x/ws", None).is_err());
    }

    #[test]
    fn the_qr_code_is_half_blocks_of_one_width() {
        let rows = qr_rows("https://192.168.1.20:7777/?login=pair-0123456789abcdef0123456789abcdef").unwrap();
        assert!(rows.len() > 15 && rows.iter().all(|r| r.chars().count() == rows[0].chars().count()));
        assert!(rows.iter().all(|r| r.chars().all(|c| matches!(c, ' ' | '█' | '▀' | '▄'))));
    }
}
