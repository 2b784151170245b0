//! Where a connector is reached: the URLs `serve` prints, client setups name and the control
//! page shows, from the settings, the listening address and the connector's token.

use std::net::{IpAddr, SocketAddr};

use crate::Settings;

/// The URLs of `connector` for a server started with `settings`, as `serve` prints them:
/// the loopback one, then the public one when a public host is set; a connector that signs
/// in with OAuth is reached by its name, never its secret. A port of 0 (chosen at start) is
/// shown as `<port>`.
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
    let oauth = settings.public_host.is_some() && settings.auth_of(connector).oauth();
    let key = if oauth { connector } else { token };
    let mut urls = vec![(
        connector.to_string(),
        format!("http://{host}:{port}/{key}/mcp"),
    )];
    if let Some(public) = &settings.public_host {
        let url = if oauth {
            oauth_url(public, connector)
        } else {
            public_url(public, token)
        };
        urls.push((format!("{connector}@public"), url));
    }
    urls
}

/// The URL a client reaches a connector at through the tunnel named `public_host`.
pub fn public_url(public_host: &str, token: &str) -> String {
    format!("{}/{token}/mcp", public_origin(public_host))
}

/// `https://` and the public host; `http://` when the host is this machine (a tunnel's
/// https ends before gantry, a loopback name has none).
pub fn public_origin(public_host: &str) -> String {
    let scheme = if is_loopback_name(public_host) {
        "http"
    } else {
        "https"
    };
    format!("{scheme}://{public_host}")
}

/// Whether `authority` (a host, or `host:port`, IPv6 in brackets) names this machine's
/// loopback: `localhost` or a loopback address.
pub fn is_loopback_name(authority: &str) -> bool {
    let name = authority
        .rsplit_once(':')
        .filter(|(name, port)| !name.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        .filter(|(name, _)| !name.contains(':') || name.ends_with(']'))
        .map_or(authority, |(name, _)| name);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The URL of `connector` for OAuth clients: no secret in it, the sign-in is the key.
pub fn oauth_url(public_host: &str, connector: &str) -> String {
    format!("{}/{connector}/mcp", public_origin(public_host))
}

/// The loopback URL of `connector` when it signs in with OAuth: no secret in it.
pub fn connector_url_without_secret(addr: SocketAddr, connector: &str) -> String {
    connector_url(addr, connector)
}

/// The URL a client uses for `connector` (the secret is part of it).
pub fn connector_url(addr: SocketAddr, token: &str) -> String {
    let host = match addr.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{host}:{}/{token}/mcp", addr.port())
}
