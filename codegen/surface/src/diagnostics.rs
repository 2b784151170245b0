//! Problems found in `surface.toml`, each pinned to a `file:line:column`.

use std::fmt;
use std::ops::Range;

/// One problem in the surface file, with where it is and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// Every problem found in one pass, so a user fixes them all at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// Turns byte spans of one source text into line and column numbers.
pub(crate) struct SourceMap<'a> {
    file: &'a str,
    text: &'a str,
}

impl<'a> SourceMap<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str) -> Self {
        Self { file, text }
    }

    pub(crate) fn diagnostic(
        &self,
        span: Range<usize>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> Diagnostic {
        let start = span.start.min(self.text.len());
        let before = self.text.get(..start).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = self
            .text
            .get(line_start..start)
            .map_or(1, |s| s.chars().count() + 1);
        Diagnostic {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
            hint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_become_lines_and_columns() {
        let map = SourceMap::new("s.toml", "a = 1\nbé = 2\n");
        let d = map.diagnostic(10..11, "bad", None);
        assert_eq!((d.line, d.column), (2, 4));
        assert_eq!(d.to_string(), "s.toml:2:4: bad");
    }
}
