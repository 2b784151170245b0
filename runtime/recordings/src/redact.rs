//! Redaction: known token shapes, the user's own patterns, and literal secrets (gantry's
//! connector tokens) are replaced by `[redacted]` before text is stored or shown.

use regex::Regex;

/// Shapes of credentials common enough in transcripts (pasted keys, env dumps) to hide
/// whatever the user configured.
const KNOWN: &[&str] = &[
    // OpenAI, Anthropic and similar `sk-` keys.
    r"\bsk-[A-Za-z0-9_-]{20,}",
    // GitHub tokens.
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",
    r"\bgithub_pat_[A-Za-z0-9_]{30,}",
    // GitLab, Slack, Google, AWS access key ids.
    r"\bglpat-[A-Za-z0-9_-]{20,}",
    r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    r"\bAIza[0-9A-Za-z_-]{35}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    // JSON Web Tokens.
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    // Authorization headers.
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*",
    // PEM private keys, whole.
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
];

/// What [`Redactor::new`] refused.
#[derive(Debug, thiserror::Error)]
#[error("redaction pattern {index} ({pattern:?}): {message}")]
pub struct PatternError {
    /// 0-based position in the list given.
    pub index: usize,
    /// The pattern.
    pub pattern: String,
    /// Why it is not a pattern.
    pub message: String,
}

/// Replaces secrets in text.
#[derive(Debug, Clone)]
pub struct Redactor {
    known: Regex,
    custom: Option<Regex>,
    /// Shared by every clone: secrets learnt later (tokens made after start) reach them all.
    literals: std::sync::Arc<std::sync::RwLock<Vec<String>>>,
}

/// What a secret is replaced by.
pub const REDACTED: &str = "[redacted]";

impl Redactor {
    /// The known shapes plus `patterns` (regular expressions) and `literals` (exact strings).
    pub fn new(patterns: &[String], literals: Vec<String>) -> Result<Redactor, PatternError> {
        let known = Regex::new(&KNOWN.join("|")).map_err(|e| PatternError {
            index: 0,
            pattern: "built-in".into(),
            message: e.to_string(),
        })?;
        for (index, p) in patterns.iter().enumerate() {
            Regex::new(p).map_err(|e| PatternError {
                index,
                pattern: p.clone(),
                message: e.to_string(),
            })?;
        }
        let custom = if patterns.is_empty() {
            None
        } else {
            let joined = patterns
                .iter()
                .map(|p| format!("(?:{p})"))
                .collect::<Vec<_>>()
                .join("|");
            Some(Regex::new(&joined).map_err(|e| PatternError {
                index: 0,
                pattern: joined.clone(),
                message: e.to_string(),
            })?)
        };
        let r = Redactor {
            known,
            custom,
            literals: std::sync::Arc::default(),
        };
        r.add_literals(literals);
        Ok(r)
    }

    /// Hides `literals` too, from now on, in this redactor and every clone of it (strings
    /// under 8 characters are too common to be secrets worth hiding).
    pub fn add_literals(&self, literals: Vec<String>) {
        let mut l = match self.literals.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for s in literals {
            if s.len() >= 8 && !l.contains(&s) {
                l.push(s);
            }
        }
    }

    /// `text` with every secret replaced.
    pub fn apply(&self, text: &str) -> String {
        let mut out = self.known.replace_all(text, REDACTED).into_owned();
        if let Some(c) = &self.custom {
            out = c.replace_all(&out, REDACTED).into_owned();
        }
        let literals = match self.literals.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for l in literals.iter() {
            if out.contains(l.as_str()) {
                out = out.replace(l.as_str(), REDACTED);
            }
        }
        out
    }
}

/// Base64 images inline in text (data URLs) become `[image]`: indexing them would fill the
/// store with noise, and a model cannot use them as text.
pub fn strip_images(text: &str) -> std::borrow::Cow<'_, str> {
    static DATA_URL: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    match DATA_URL
        .get_or_init(|| Regex::new(r"data:image/[A-Za-z0-9.+-]+;base64,[A-Za-z0-9+/=_-]{16,}").ok())
    {
        Some(re) => re.replace_all(text, "[image]"),
        None => std::borrow::Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_shapes_custom_patterns_and_literals_are_hidden() {
        let r = Redactor::new(&["hunter[0-9]+".into()], vec!["tok-0123456789".into()]).unwrap();
        let text = "key sk-abcdefghijklmnopqrstuvwxyz012345 gh ghp_abcdefghijklmnopqrstuvwxyz0123456789 pw hunter22 t tok-0123456789 AKIAABCDEFGHIJKLMNOP ok";
        assert_eq!(
            r.apply(text),
            "key [redacted] gh [redacted] pw [redacted] t [redacted] [redacted] ok"
        );
        let pem = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\nxyz\n-----END RSA PRIVATE KEY-----\nb";
        assert_eq!(r.apply(pem), "a\n[redacted]\nb");
        assert_eq!(r.apply("nothing here"), "nothing here");
    }

    #[test]
    fn a_bad_pattern_is_named() {
        let e = Redactor::new(&["ok".into(), "(".into()], Vec::new()).unwrap_err();
        assert_eq!(e.index, 1);
        assert!(
            e.to_string().starts_with("redaction pattern 1 (\"(\")"),
            "{e}"
        );
    }

    #[test]
    fn inline_images_become_a_placeholder() {
        assert_eq!(
            strip_images("see data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAE= here"),
            "see [image] here"
        );
    }
}
