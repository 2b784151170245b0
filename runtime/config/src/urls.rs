//! Where a connector is reached: the URLs `serve` prints, client setups name and the control
//! page shows, from the settings, the listening address and the connector's token.

use std::net::{IpAddr, SocketAddr};

use crate::Settings;

/// The URLs of `connector` for a server started with `settings`, as `serve` prints them:
/// the loopback one, then the public one when a public host is set. A port of 0 (chosen at
/// start) is shown as `<port>`.
pub fn urls_of(settings: &Settings, connector: &str, token: &str) -> Vec<(String, String)> {
    let host = match settings.host.parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => settings.host.clone(),
    };
    let port = if settings.port == 0 {
        "<port>".to_string()
    } else {
        settings.port.to_string()
    };
    let mut urls = vec![(
        connector.to_string(),
        format!("http://{host}:{port}/{token}/mcp"),
    )];
    if let Some(public) = &settings.public_host {
        urls.push((format!("{connector}@public"), public_url(public, token)));
    }
    urls
}

/// The URL a client reaches a connector at through the tunnel named `public_host`.
pub fn public_url(public_host: &str, token: &str) -> String {
    format!("https://{public_host}/{token}/mcp")
}

/// The URL a client uses for `connector` (the secret is part of it).
pub fn connector_url(addr: SocketAddr, token: &str) -> String {
    let host = match addr.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{host}:{}/{token}/mcp", addr.port())
}
