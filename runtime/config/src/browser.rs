//! `[browser]`: the command the Shell connector's `browser.open` starts, and the hosts it may
//! open.

use serde::Deserialize;

use tool_api::Platform;

/// What stands for the address in `[browser] command`.
pub const URL_PLACEHOLDER: &str = "{url}";

/// `[browser]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrowserConfig {
    /// The program and its arguments, no shell; `{url}` stands for the address (appended
    /// when no argument holds it). Empty: the platform's opener.
    #[serde(default)]
    pub command: Vec<String>,
    /// The hosts `browser.open` may open: exact names, or `*.domain` for every name below
    /// it. Empty: any host.
    #[serde(default)]
    pub hosts: Vec<String>,
}

impl BrowserConfig {
    /// The argv that opens `url`: the configured command (or the platform's opener) with
    /// `{url}` replaced, or `url` appended.
    pub fn command_line(&self, url: &str) -> Vec<String> {
        let template: Vec<String> = if self.command.is_empty() {
            let opener: &[&str] = match Platform::current() {
                Platform::Windows => &["rundll32.exe", "url.dll,FileProtocolHandler"],
                Platform::Macos => &["open"],
                Platform::Linux => &["xdg-open"],
            };
            opener.iter().map(|s| (*s).to_string()).collect()
        } else {
            self.command.clone()
        };
        let mut argv: Vec<String> = template
            .iter()
            .map(|a| a.replace(URL_PLACEHOLDER, url))
            .collect();
        if !template.iter().any(|a| a.contains(URL_PLACEHOLDER)) {
            argv.push(url.to_string());
        }
        argv
    }

    /// Whether `host` (lower case) may be opened.
    pub fn allows_host(&self, host: &str) -> bool {
        self.hosts.is_empty()
            || self.hosts.iter().any(|entry| {
                let entry = entry.trim().to_lowercase();
                match entry.strip_prefix("*.") {
                    Some(domain) => host
                        .strip_suffix(domain)
                        .is_some_and(|label| label.len() > 1 && label.ends_with('.')),
                    None => host == entry,
                }
            })
    }

    /// What is wrong with it, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.command.first().is_some_and(|p| p.trim().is_empty()) {
            out.push("[browser] command: the program is empty".to_string());
        }
        for h in &self.hosts {
            if h.contains("://") || h.contains('/') || h.trim().is_empty() {
                out.push(format!(
                    "[browser] hosts: `{h}` is not a host name (write `example.com` or `*.example.com`)"
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_takes_its_placeholder_or_comes_last() {
        let b = BrowserConfig {
            command: vec!["firefox".into(), "--new-tab".into()],
            hosts: Vec::new(),
        };
        assert_eq!(
            b.command_line("https://a.test/"),
            ["firefox", "--new-tab", "https://a.test/"]
        );
        let b = BrowserConfig {
            command: vec!["b".into(), "{url}".into(), "--x".into()],
            hosts: Vec::new(),
        };
        assert_eq!(
            b.command_line("https://a.test/"),
            ["b", "https://a.test/", "--x"]
        );
    }

    #[test]
    fn hosts_match_exactly_or_below_a_wildcard() {
        let b = BrowserConfig {
            command: Vec::new(),
            hosts: vec!["example.com".into(), "*.docs.rs".into()],
        };
        assert!(b.allows_host("example.com"));
        assert!(!b.allows_host("www.example.com"));
        assert!(b.allows_host("serde.docs.rs"));
        assert!(!b.allows_host("docs.rs"));
        assert!(!b.allows_host("evildocs.rs"));
        assert!(BrowserConfig::default().allows_host("anything.test"));
    }
}
