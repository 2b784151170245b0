//! `GANTRY_LOG`, a tracing filter in which `gantry` names all of gantry's own code.

/// The crates that were once the one `gantry` crate: each logs under its own name, and a
/// filter's `gantry` stands for them all, as it did (the mechanisms below them, `terminal`,
/// `confine`, `desktop`..., always had names of their own).
const OWN_CRATES: &[&str] = &[
    "gantry",
    "server",
    "transport",
    "agents",
    "admin",
    "config",
    "audit",
    "state_dir",
    "upstream",
];

/// `filter` with each directive for the target `gantry` (`gantry=debug`, or bare `gantry`)
/// repeated for every crate of [`OWN_CRATES`]; every other directive as written.
pub fn log_filter(filter: &str) -> String {
    filter
        .split(',')
        .map(|directive| {
            let level = match directive.trim().strip_prefix("gantry") {
                Some("") => "",
                Some(rest) if rest.starts_with('=') => rest,
                _ => return directive.to_string(),
            };
            OWN_CRATES
                .iter()
                .map(|c| format!("{c}{level}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gantry_names_every_crate_of_gantry_and_nothing_else_changes() {
        let f = log_filter("warn,gantry=debug,rmcp=info");
        assert!(
            f.starts_with("warn,gantry=debug,server=debug,transport=debug"),
            "{f}"
        );
        assert!(f.ends_with("upstream=debug,rmcp=info"), "{f}");
        assert!(!f.contains("terminal"), "{f}");
        assert_eq!(log_filter("debug"), "debug");
        assert_eq!(log_filter("gantryx=debug"), "gantryx=debug");
        assert!(log_filter("gantry").contains(",transport,"));
    }
}
