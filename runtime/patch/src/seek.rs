//! Finding a chunk's lines in a file, tolerantly the way Codex does: exact first, then
//! ignoring trailing whitespace, then surrounding whitespace, then common Unicode punctuation
//! look-alikes. The first pass with any hit wins; within a pass, the earliest position.

/// Maps typographic dashes, quotes and spaces to their ASCII forms.
fn normalize(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}'..='\u{201B}' => '\'',
            '\u{201C}'..='\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

/// Where `pattern` occurs in `lines` at or after `from`. With `at_end`, only a match that ends
/// on the last line counts.
pub(crate) fn seek(lines: &[&str], pattern: &[&str], from: usize, at_end: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(from.min(lines.len()));
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - pattern.len();
    let starts: Vec<usize> = if at_end {
        if last_start >= from {
            vec![last_start]
        } else {
            Vec::new()
        }
    } else {
        (from..=last_start).collect()
    };
    let passes: [fn(&str, &str) -> bool; 4] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
        |a, b| normalize(a) == normalize(b),
    ];
    for same in passes {
        for &start in &starts {
            if pattern
                .iter()
                .enumerate()
                .all(|(k, p)| same(lines[start + k], p))
            {
                return Some(start);
            }
        }
    }
    None
}

/// The window of `len` lines most like `pattern` (most lines equal once normalized), for an
/// error that shows the model where it probably meant.
pub(crate) fn nearest(lines: &[&str], pattern: &[&str], from: usize) -> Option<usize> {
    if pattern.is_empty() || lines.is_empty() {
        return None;
    }
    let normalized_pattern: Vec<String> = pattern.iter().map(|p| normalize(p)).collect();
    let normalized_lines: Vec<String> = lines.iter().map(|l| normalize(l)).collect();
    let len = pattern.len().min(lines.len());
    let mut best: Option<(usize, usize)> = None;
    for start in from.min(lines.len() - len)..=lines.len() - len {
        let score = (0..len)
            .filter(|k| normalized_lines[start + k] == normalized_pattern[*k])
            .count();
        if score > 0 && best.is_none_or(|(_, s)| score > s) {
            best = Some((start, score));
        }
    }
    best.map(|(start, _)| start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_go_from_strict_to_tolerant() {
        let lines = ["a  ", "  b", "x \u{2013} y"];
        assert_eq!(seek(&lines, &["a  "], 0, false), Some(0));
        assert_eq!(seek(&lines, &["a"], 0, false), Some(0));
        assert_eq!(seek(&lines, &["b"], 0, false), Some(1));
        assert_eq!(seek(&lines, &["x - y"], 0, false), Some(2));
        assert_eq!(seek(&lines, &["nope"], 0, false), None);
    }

    #[test]
    fn an_exact_hit_later_beats_a_loose_hit_earlier() {
        let lines = ["foo ", "foo"];
        assert_eq!(seek(&lines, &["foo"], 0, false), Some(1));
    }

    #[test]
    fn end_of_file_only_matches_the_last_lines() {
        let lines = ["a", "b", "a"];
        assert_eq!(seek(&lines, &["a"], 0, true), Some(2));
        assert_eq!(seek(&lines, &["b"], 0, true), None);
    }

    #[test]
    fn nearest_finds_the_most_similar_window() {
        let lines = ["fn a() {", "  one();", "}", "fn b() {", "  two();", "}"];
        assert_eq!(
            nearest(&lines, &["fn b() {", "  three();", "}"], 0),
            Some(3)
        );
    }
}
