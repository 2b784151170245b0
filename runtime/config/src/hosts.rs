//! Which `Host` header values the HTTP boundary answers, and how a tunnel's public name is
//! written down.
//!
//! A browser on another site can make a name of its own resolve to 127.0.0.1 (DNS
//! rebinding); the `Host` it then sends is that name, so answering only known names stops it.
//! The loopback names are always known; a tunnel's public name is added with `--public-host`
//! or `--allowed-host`, exactly or as `*.suffix`.

/// One accepted `Host` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHost {
    /// This host name (lowercase, IPv6 without brackets), on any port or on this one.
    Exact {
        /// The name.
        host: String,
        /// The port it must carry, when one was given.
        port: Option<u16>,
    },
    /// Any name ending in `.<suffix>` with at least one label before it (`*.<suffix>`), on
    /// any port.
    Below(String),
}

/// Reads what a user gives as a host: `name`, `name:port`, or a URL
/// (`https://name[:port][/]`), as a tunnel prints it. Returns the authority (`name` or
/// `name:port`, lowercase) or why it is not one.
pub fn authority_of(input: &str) -> Result<String, String> {
    let trimmed = input.trim();
    let rest = match trimmed.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => rest,
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "`{trimmed}`: `{scheme}://` is not a web address; give a host name or an https:// URL"
            ));
        }
        None => trimmed,
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if !path.trim_end_matches('/').is_empty() {
        return Err(format!(
            "`{trimmed}`: give the host only (a path such as `{path}` is not part of it; gantry adds /<secret>/mcp itself)"
        ));
    }
    if authority.is_empty() || authority.contains(['@', '?', '#', ' ']) {
        return Err(format!("`{trimmed}` is not a host name"));
    }
    let parsed = http::uri::Authority::try_from(authority)
        .map_err(|_| format!("`{trimmed}` is not a host name"))?;
    Ok(parsed.as_str().to_ascii_lowercase())
}

impl AllowedHost {
    /// Parses one `--allowed-host` / `allowed_hosts` entry (a host, `host:port`, a URL, or
    /// `*.suffix`).
    pub fn parse(input: &str) -> Result<AllowedHost, String> {
        let trimmed = input.trim();
        if let Some(suffix) = trimmed.strip_prefix("*.") {
            let suffix = suffix.trim_end_matches('.').to_ascii_lowercase();
            let labels: Vec<&str> = suffix.split('.').collect();
            let valid = labels
                .iter()
                .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
            if !valid {
                return Err(format!(
                    "`{trimmed}`: a wildcard is `*.` followed by a host name, e.g. `*.trycloudflare.com`"
                ));
            }
            if labels.len() < 2 {
                return Err(format!(
                    "`{trimmed}` would accept every name under a top-level domain; name the tunnel's own domain, e.g. `*.trycloudflare.com`"
                ));
            }
            return Ok(AllowedHost::Below(suffix));
        }
        if trimmed.contains('*') {
            return Err(format!(
                "`{trimmed}`: `*` is allowed only as the first label (`*.example.com`); `*` alone would turn off the DNS-rebinding check"
            ));
        }
        let authority = authority_of(trimmed)?;
        let parsed = http::uri::Authority::try_from(authority.as_str())
            .map_err(|_| format!("`{trimmed}` is not a host name"))?;
        Ok(AllowedHost::Exact {
            host: bare(parsed.host()),
            port: parsed.port_u16(),
        })
    }

    /// Whether a request's `Host` (already split into name and port) is this one.
    fn admits(&self, host: &str, port: Option<u16>) -> bool {
        match self {
            AllowedHost::Exact { host: h, port: p } => {
                h == host && p.is_none_or(|p| Some(p) == port)
            }
            AllowedHost::Below(suffix) => host
                .strip_suffix(suffix.as_str())
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|head| !head.is_empty()),
        }
    }
}

fn bare(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// The `Host` values a server answers.
#[derive(Debug, Clone)]
pub struct HostRules(Vec<AllowedHost>);

impl HostRules {
    /// The loopback names, the listen address when it is a specific non-loopback one, and
    /// `extra` (entries already checked by [`AllowedHost::parse`]; a bad one is skipped).
    pub fn new(listen: &str, extra: &[String]) -> HostRules {
        let mut rules: Vec<AllowedHost> = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(|h| AllowedHost::Exact {
                host: h.into(),
                port: None,
            })
            .collect();
        if let Ok(ip) = listen.parse::<std::net::IpAddr>()
            && !ip.is_unspecified()
            && !ip.is_loopback()
        {
            rules.push(AllowedHost::Exact {
                host: ip.to_string(),
                port: None,
            });
        }
        rules.extend(extra.iter().filter_map(|e| AllowedHost::parse(e).ok()));
        HostRules(rules)
    }

    /// Whether a request with this `Host` header value is answered.
    pub fn admits(&self, header: &str) -> bool {
        // A Host never carries user information; `x@localhost` would parse as localhost.
        if header.contains('@') {
            return false;
        }
        let Ok(authority) = http::uri::Authority::try_from(header) else {
            return false;
        };
        let host = bare(authority.host());
        let port = authority.port_u16();
        self.0.iter().any(|rule| rule.admits(&host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_as_a_tunnel_prints_it_is_its_host() {
        assert_eq!(
            authority_of("https://x-y.trycloudflare.com/").as_deref(),
            Ok("x-y.trycloudflare.com")
        );
        assert_eq!(
            authority_of("Gantry.Example.com:8443").as_deref(),
            Ok("gantry.example.com:8443")
        );
        assert_eq!(
            authority_of("http://[::1]:3210").as_deref(),
            Ok("[::1]:3210")
        );
        assert!(authority_of("https://x.example.com/abc/mcp").is_err());
        assert!(authority_of("ftp://x.example.com").is_err());
        assert!(authority_of("user@x.example.com").is_err());
        assert!(authority_of("").is_err());
    }

    #[test]
    fn a_wildcard_admits_names_below_its_suffix_only() {
        let rules = HostRules::new("127.0.0.1", &["*.trycloudflare.com".into()]);
        assert!(rules.admits("abc-def.trycloudflare.com"));
        assert!(rules.admits("ABC.TRYCLOUDFLARE.COM:443"));
        assert!(rules.admits("a.b.trycloudflare.com"));
        assert!(!rules.admits("trycloudflare.com"));
        assert!(!rules.admits("eviltrycloudflare.com"));
        assert!(!rules.admits("trycloudflare.com.evil.net"));
        assert!(rules.admits("localhost:3210"));
        assert!(rules.admits("[::1]:3210"));
        assert!(!rules.admits("evil.example"));
        assert!(!rules.admits("evil@localhost"));
        assert!(!rules.admits("a.trycloudflare.com@evil.example"));
    }

    #[test]
    fn an_exact_entry_with_a_port_wants_that_port() {
        let rules = HostRules::new("127.0.0.1", &["https://g.example.com:8443/".into()]);
        assert!(rules.admits("g.example.com:8443"));
        assert!(!rules.admits("g.example.com:9000"));
        assert!(!rules.admits("g.example.com"));
        let any_port = HostRules::new("127.0.0.1", &["g.example.com".into()]);
        assert!(any_port.admits("g.example.com"));
        assert!(any_port.admits("g.example.com:443"));
    }

    #[test]
    fn wildcards_that_would_admit_too_much_are_refused() {
        for bad in [
            "*",
            "*.com",
            "*example.com",
            "a.*.example.com",
            "*.ex ample.com",
            "*.",
        ] {
            assert!(AllowedHost::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            AllowedHost::parse("*.TryCloudflare.com"),
            Ok(AllowedHost::Below("trycloudflare.com".into()))
        );
    }
}
