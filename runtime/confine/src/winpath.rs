//! Windows path forms, as pure string functions so they are tested on every platform, under
//! Wine for the Windows target, and used at run time on Windows. Windows accepts spellings that alias other files or devices:
//! reserved device names (`NUL`, `COM1.txt`), alternate data streams (`a.txt:secret`),
//! trailing dots and spaces (`a.txt.` is `a.txt`), the device namespace (`\\.\`), and it
//! compares names without regard to case. Each of these is refused or normalised here.

/// Why a Windows path is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A component names a device (`CON`, `NUL`, `COM1`...), whatever its extension.
    ReservedName(String),
    /// A component addresses an alternate data stream (`name:stream`).
    AlternateStream(String),
    /// A component ends in a dot or a space, which Windows silently drops.
    TrailingDotOrSpace(String),
    /// `\\.\` or `\\?\GLOBALROOT`: the device namespace.
    DeviceNamespace,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::ReservedName(c) => write!(f, "`{c}` is a reserved device name on Windows"),
            Refusal::AlternateStream(c) => write!(f, "`{c}` addresses an alternate data stream"),
            Refusal::TrailingDotOrSpace(c) => {
                write!(f, "`{c}` ends in a dot or space, which Windows drops")
            }
            Refusal::DeviceNamespace => write!(
                f,
                "device-namespace paths (\\\\.\\, \\\\?\\GLOBALROOT) are not files"
            ),
        }
    }
}

const RESERVED: &[&str] = &[
    "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "COM1", "COM2", "COM3", "COM4", "COM5",
    "COM6", "COM7", "COM8", "COM9", "COM¹", "COM²", "COM³", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5",
    "LPT6", "LPT7", "LPT8", "LPT9", "LPT¹", "LPT²", "LPT³",
];

/// Splits off a verbatim (`\\?\`), drive (`C:`) or UNC (`\\server\share`) prefix; returns the
/// prefix (normalised: `\\?\C:\` becomes `C:\`, `\\?\UNC\s\h` becomes `\\s\h`) and the rest.
pub fn split_prefix(path: &str) -> Result<(String, &str), Refusal> {
    let p = path;
    if p.starts_with(r"\\.\")
        || p.starts_with("//./")
        || p.to_ascii_uppercase().starts_with(r"\\?\GLOBALROOT")
    {
        return Err(Refusal::DeviceNamespace);
    }
    if let Some(rest) = p.strip_prefix(r"\\?\") {
        if let Some(unc) = rest.strip_prefix("UNC\\") {
            let (server_share, tail) = unc_parts(unc);
            return Ok((format!(r"\\{server_share}"), tail));
        }
        return split_prefix(rest);
    }
    if let Some(unc) = p.strip_prefix(r"\\").or_else(|| p.strip_prefix("//")) {
        let (server_share, tail) = unc_parts(unc);
        return Ok((format!(r"\\{server_share}"), tail));
    }
    let bytes = p.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Ok((
            format!("{}:", (bytes[0] as char).to_ascii_uppercase()),
            &p[2..],
        ));
    }
    Ok((String::new(), p))
}

fn unc_parts(unc: &str) -> (String, &str) {
    let mut seps = unc.match_indices(['\\', '/']).map(|(i, _)| i);
    let _server_end = seps.next();
    match seps.next() {
        Some(share_end) => (unc[..share_end].replace('/', "\\"), &unc[share_end..]),
        None => (unc.replace('/', "\\"), ""),
    }
}

/// Checks every component of `path` (after its prefix) for the spellings Windows aliases.
pub fn check(path: &str) -> Result<(), Refusal> {
    let (_, rest) = split_prefix(path)?;
    for component in rest
        .split(['\\', '/'])
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
    {
        if component.contains(':') {
            return Err(Refusal::AlternateStream(component.to_string()));
        }
        if component.ends_with('.') || component.ends_with(' ') {
            return Err(Refusal::TrailingDotOrSpace(component.to_string()));
        }
        let stem = component
            .split('.')
            .next()
            .unwrap_or("")
            .trim_end()
            .to_uppercase();
        if RESERVED.contains(&stem.as_str()) {
            return Err(Refusal::ReservedName(component.to_string()));
        }
    }
    Ok(())
}

/// Whether `path` lies inside `root`, comparing components without regard to case and with
/// either separator, as Windows does.
pub fn contains(root: &str, path: &str) -> bool {
    let norm = |s: &str| -> Option<(String, Vec<String>)> {
        let (prefix, rest) = split_prefix(s).ok()?;
        let parts = rest
            .split(['\\', '/'])
            .filter(|c| !c.is_empty())
            .map(str::to_lowercase)
            .collect();
        Some((prefix.to_lowercase(), parts))
    };
    match (norm(root), norm(path)) {
        (Some((rp, rparts)), Some((pp, pparts))) => {
            rp == pp
                && pparts.len() >= rparts.len()
                && rparts.iter().zip(&pparts).all(|(a, b)| a == b)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under Wine (or on Windows) the standard library parses prefixes the OS's way: the pure
    /// functions must agree with it.
    #[cfg(windows)]
    #[test]
    fn agrees_with_the_platform_on_prefixes() {
        use std::path::{Component, Path, Prefix};
        for (path, ours) in [
            (r"C:\Users\me", "C:"),
            (r"\\?\C:\Users\me", "C:"),
            (r"\\server\share\dir", r"\\server\share"),
            (r"\\?\UNC\server\share\f", r"\\server\share"),
        ] {
            let Some(Component::Prefix(p)) = Path::new(path).components().next() else {
                panic!("{path}: no prefix")
            };
            let std_form = match p.kind() {
                Prefix::Disk(d) | Prefix::VerbatimDisk(d) => {
                    format!("{}:", (d as char).to_ascii_uppercase())
                }
                Prefix::UNC(s, h) | Prefix::VerbatimUNC(s, h) => {
                    format!(r"\\{}\{}", s.to_string_lossy(), h.to_string_lossy())
                }
                other => panic!("{path}: unexpected {other:?}"),
            };
            assert_eq!(std_form, ours, "{path}");
            assert_eq!(
                split_prefix(path).map(|(p, _)| p),
                Ok(ours.to_string()),
                "{path}"
            );
        }
        assert!(Path::new(r"C:\x").is_absolute() && !Path::new(r"C:x").is_absolute());
    }

    #[test]
    fn prefixes_are_split_and_normalised() {
        assert_eq!(
            split_prefix(r"c:\Users\me"),
            Ok(("C:".to_string(), r"\Users\me"))
        );
        assert_eq!(
            split_prefix(r"\\?\C:\Users\me"),
            Ok(("C:".to_string(), r"\Users\me"))
        );
        assert_eq!(
            split_prefix(r"\\server\share\dir\f.txt"),
            Ok((r"\\server\share".to_string(), r"\dir\f.txt"))
        );
        assert_eq!(
            split_prefix(r"\\?\UNC\server\share\f"),
            Ok((r"\\server\share".to_string(), r"\f"))
        );
        assert_eq!(
            split_prefix(r"relative\path"),
            Ok((String::new(), r"relative\path"))
        );
        assert_eq!(
            split_prefix(r"\\.\PhysicalDrive0"),
            Err(Refusal::DeviceNamespace)
        );
        assert_eq!(
            split_prefix(r"\\?\GLOBALROOT\Device\HarddiskVolume1"),
            Err(Refusal::DeviceNamespace)
        );
    }

    #[test]
    fn reserved_names_are_refused_with_any_extension_or_case() {
        for bad in [
            r"C:\work\CON",
            r"C:\work\nul.txt",
            r"C:\work\Com1.log",
            r"work\lpt9",
            r"C:\a\AUX .txt",
            r"C:\x\COM¹",
        ] {
            assert!(matches!(check(bad), Err(Refusal::ReservedName(_))), "{bad}");
        }
        for ok in [
            r"C:\work\console.txt",
            r"C:\work\nullable",
            r"C:\work\com10",
            r"C:\CONFIG\x",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn streams_and_trailing_dots_are_refused() {
        assert!(matches!(
            check(r"C:\work\a.txt:secret"),
            Err(Refusal::AlternateStream(_))
        ));
        assert!(matches!(
            check(r"C:\work\a.txt::$DATA"),
            Err(Refusal::AlternateStream(_))
        ));
        assert!(matches!(
            check(r"C:\work\a.txt."),
            Err(Refusal::TrailingDotOrSpace(_))
        ));
        assert!(matches!(
            check(r"C:\work\dir \a"),
            Err(Refusal::TrailingDotOrSpace(_))
        ));
        assert_eq!(check(r"C:\work\..\x"), Ok(()));
    }

    #[test]
    fn containment_ignores_case_and_separators() {
        assert!(contains(
            r"C:\Users\Me\Project",
            r"c:\users\me\project\src\main.rs"
        ));
        assert!(contains(r"C:\Users\Me\Project", r"\\?\C:\Users\Me\Project"));
        assert!(contains(r"\\srv\share\proj", r"\\SRV\Share\proj\a.txt"));
        assert!(!contains(
            r"C:\Users\Me\Project",
            r"C:\Users\Me\Project2\a.txt"
        ));
        assert!(!contains(
            r"C:\Users\Me\Project",
            r"D:\Users\Me\Project\a.txt"
        ));
        assert!(!contains(r"C:\a", r"\\.\C:\a"));
    }
}
