//! Key chords as the model writes them (`ctrl+shift+t`, `Enter`, `alt+F4`), parsed once into
//! platform-neutral keys that each backend maps to its own codes.

use crate::DesktopError;

/// A key that is not a character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Named {
    Ctrl,
    Shift,
    Alt,
    Super,
    Enter,
    Tab,
    Escape,
    Backspace,
    Delete,
    Insert,
    Home,
    End,
    PageUp,
    PageDown,
    Up,
    Down,
    Left,
    Right,
    Space,
    Menu,
    /// F1 to F24.
    F(u8),
}

impl Named {
    /// Whether the key modifies the others of its chord (held while they are tapped).
    pub fn is_modifier(self) -> bool {
        matches!(self, Named::Ctrl | Named::Shift | Named::Alt | Named::Super)
    }
}

/// One key of a chord.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A named key.
    Named(Named),
    /// The key that types this character.
    Char(char),
}

/// Longest chord accepted: four modifiers and a key is already more than any real shortcut.
const MAX_KEYS: usize = 6;

fn named(word: &str) -> Option<Named> {
    let lower = word.to_ascii_lowercase();
    Some(match lower.as_str() {
        "ctrl" | "control" | "ctl" => Named::Ctrl,
        "shift" => Named::Shift,
        "alt" | "option" | "opt" => Named::Alt,
        "super" | "meta" | "win" | "windows" | "cmd" | "command" => Named::Super,
        "enter" | "return" => Named::Enter,
        "tab" => Named::Tab,
        "esc" | "escape" => Named::Escape,
        "backspace" | "back" => Named::Backspace,
        "delete" | "del" => Named::Delete,
        "insert" | "ins" => Named::Insert,
        "home" => Named::Home,
        "end" => Named::End,
        "pageup" | "page_up" | "pgup" => Named::PageUp,
        "pagedown" | "page_down" | "pgdn" => Named::PageDown,
        "up" | "arrowup" => Named::Up,
        "down" | "arrowdown" => Named::Down,
        "left" | "arrowleft" => Named::Left,
        "right" | "arrowright" => Named::Right,
        "space" => Named::Space,
        "menu" | "apps" => Named::Menu,
        f if f.len() >= 2 && f.starts_with('f') => {
            let n: u8 = f[1..].parse().ok()?;
            if (1..=24).contains(&n) {
                Named::F(n)
            } else {
                return None;
            }
        }
        _ => return None,
    })
}

/// Parses a chord: keys joined by `+`, modifiers first (`ctrl+shift+t`, `alt+F4`, `Enter`,
/// `ctrl++` for ctrl and plus). Names are case-insensitive; a single character stands for
/// its own key.
pub fn parse_chord(chord: &str) -> Result<Vec<Key>, DesktopError> {
    let bad = |why: &str| DesktopError::Input(format!("keys `{chord}`: {why}"));
    let trimmed = chord.trim();
    if trimmed.is_empty() {
        return Err(bad("empty"));
    }
    let mut parts: Vec<&str> = Vec::new();
    let mut rest = trimmed;
    // A `+` right after a separator (or alone) is the plus key itself.
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix('+') {
            parts.push("+");
            rest = tail.strip_prefix('+').unwrap_or(tail);
            continue;
        }
        match rest.find('+') {
            Some(i) => {
                parts.push(&rest[..i]);
                rest = &rest[i + 1..];
            }
            None => {
                parts.push(rest);
                rest = "";
            }
        }
    }
    if parts.len() > MAX_KEYS {
        return Err(bad(&format!("more than {MAX_KEYS} keys in one chord")));
    }
    let mut keys = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let part = part.trim();
        let mut chars = part.chars();
        let key = match (chars.next(), chars.next()) {
            (None, _) => return Err(bad("an empty key between two `+`")),
            (Some(' '), None) => Key::Named(Named::Space),
            (Some(c), None) if !c.is_control() => Key::Char(c),
            _ => Key::Named(named(part).ok_or_else(|| bad(&format!("unknown key `{part}`")))?),
        };
        let last = i + 1 == parts.len();
        if !last && !matches!(key, Key::Named(n) if n.is_modifier()) {
            return Err(bad(&format!(
                "`{part}` is not a modifier; only the last key of a chord may be one"
            )));
        }
        keys.push(key);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chords_parse_modifiers_first_and_case_insensitively() {
        assert_eq!(
            parse_chord("Ctrl+Shift+t").unwrap(),
            vec![
                Key::Named(Named::Ctrl),
                Key::Named(Named::Shift),
                Key::Char('t')
            ]
        );
        assert_eq!(
            parse_chord("alt+F4").unwrap(),
            vec![Key::Named(Named::Alt), Key::Named(Named::F(4))]
        );
        assert_eq!(
            parse_chord("Enter").unwrap(),
            vec![Key::Named(Named::Enter)]
        );
        assert_eq!(
            parse_chord("ctrl++").unwrap(),
            vec![Key::Named(Named::Ctrl), Key::Char('+')]
        );
        assert_eq!(parse_chord("é").unwrap(), vec![Key::Char('é')]);
    }

    #[test]
    fn bad_chords_name_the_key_at_fault() {
        let e = parse_chord("ctrl+bogus").unwrap_err().to_string();
        assert!(e.contains("unknown key `bogus`"), "{e}");
        let e = parse_chord("a+ctrl").unwrap_err().to_string();
        assert!(e.contains("`a` is not a modifier"), "{e}");
        assert!(parse_chord("  ").is_err());
        assert!(parse_chord("f25").is_err());
        assert!(parse_chord("ctrl+ctrl+ctrl+ctrl+ctrl+ctrl+x").is_err());
    }
}
