//! Finding a chunk's lines in a file, tolerantly the way Codex does: exact first, then
//! ignoring trailing whitespace, then surrounding whitespace, then common Unicode punctuation
//! look-alikes. The first pass with any hit wins; within a pass, the earliest position.
//!
//! Matching is linear, not quadratic: each pass turns every line into a 64-bit key once (a
//! keyed hash of the line as that pass sees it, so a patch author cannot pick colliding
//! lines), and windows are compared by a rolling hash of their keys; only a window whose hash
//! equals the pattern's is compared line by line. Every step is counted against a [`Budget`],
//! so no patch, however built, makes a call run away with a core.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher as _;

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

/// The four ways a line is seen, strictest first.
const PASSES: usize = 4;

fn seen_as(pass: usize, line: &str) -> std::borrow::Cow<'_, str> {
    match pass {
        0 => line.into(),
        1 => line.trim_end().into(),
        2 => line.trim().into(),
        _ => normalize(line).into(),
    }
}

/// Line steps one update may take (hashing a line, sliding a window, comparing a line).
/// About a second of work on a slow core; a patch that needs more is refused, not run.
pub const DEFAULT_BUDGET: u64 = 200_000_000;

/// Line steps spent looking for the region an error shows as the nearest candidate.
const NEAREST_STEPS: u64 = 10_000_000;

/// Work left for one update's matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    left: u64,
    limit: u64,
}

/// The budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// The budget that ran out, in line steps.
    pub limit: u64,
}

impl Budget {
    /// A budget of `steps` line steps.
    pub fn new(steps: u64) -> Budget {
        Budget {
            left: steps,
            limit: steps,
        }
    }

    fn spend(&mut self, steps: u64) -> Result<(), Exhausted> {
        match self.left.checked_sub(steps) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                Err(Exhausted { limit: self.limit })
            }
        }
    }
}

/// The multiplier of the rolling hash (odd, so every power is invertible mod 2^64).
const BASE: u64 = 0x9E37_79B9_7F4A_7C15;

/// A file's lines, with each pass's keys computed when first needed.
pub(crate) struct Seeker<'a> {
    lines: &'a [&'a str],
    keys: [Option<Vec<u64>>; PASSES],
    hasher: RandomState,
    pub(crate) budget: Budget,
}

impl<'a> Seeker<'a> {
    pub(crate) fn new(lines: &'a [&'a str], budget: Budget) -> Seeker<'a> {
        Seeker {
            lines,
            keys: [None, None, None, None],
            hasher: RandomState::new(),
            budget,
        }
    }

    fn key(&self, pass: usize, line: &str) -> u64 {
        self.hasher.hash_one(seen_as(pass, line).as_ref())
    }

    /// Makes the keys of `pass` if they are not made yet.
    fn keys(&mut self, pass: usize) -> Result<(), Exhausted> {
        if self.keys[pass].is_none() {
            self.budget.spend(self.lines.len() as u64)?;
            let keys = self.lines.iter().map(|l| self.key(pass, l)).collect();
            self.keys[pass] = Some(keys);
        }
        Ok(())
    }

    /// Where `pattern` occurs at or after `from`. With `at_end`, only a match that ends on the
    /// last line counts.
    pub(crate) fn seek(
        &mut self,
        pattern: &[&str],
        from: usize,
        at_end: bool,
    ) -> Result<Option<usize>, Exhausted> {
        let n = self.lines.len();
        if pattern.is_empty() {
            return Ok(Some(from.min(n)));
        }
        let m = pattern.len();
        if m > n || from > n - m {
            return Ok(None);
        }
        let last_start = n - m;
        let first = if at_end { last_start } else { from };
        for pass in 0..PASSES {
            self.keys(pass)?;
            let mut budget = self.budget;
            let found = self.scan(pass, pattern, first, last_start, &mut budget);
            self.budget = budget;
            if let Some(start) = found? {
                return Ok(Some(start));
            }
        }
        Ok(None)
    }

    /// One pass of [`Seeker::seek`] over starts `first..=last_start` (keys already made).
    fn scan(
        &self,
        pass: usize,
        pattern: &[&str],
        first: usize,
        last_start: usize,
        budget: &mut Budget,
    ) -> Result<Option<usize>, Exhausted> {
        let m = pattern.len();
        let keys = self.keys[pass].as_deref().unwrap_or_default();
        budget.spend(2 * m as u64)?;
        let want: Vec<u64> = pattern.iter().map(|p| self.key(pass, p)).collect();
        let roll = |h: u64, k: &u64| h.wrapping_mul(BASE).wrapping_add(*k);
        let want_hash = want.iter().fold(0, roll);
        let top = (1..m).fold(1u64, |p, _| p.wrapping_mul(BASE));
        let mut hash = keys[first..first + m].iter().fold(0, roll);
        let mut start = first;
        loop {
            budget.spend(1)?;
            if hash == want_hash && keys[start..start + m] == want[..] {
                budget.spend(m as u64)?;
                if pattern
                    .iter()
                    .enumerate()
                    .all(|(k, p)| seen_as(pass, self.lines[start + k]) == seen_as(pass, p))
                {
                    return Ok(Some(start));
                }
            }
            if start == last_start {
                return Ok(None);
            }
            hash = roll(
                hash.wrapping_sub(keys[start].wrapping_mul(top)),
                &keys[start + m],
            );
            start += 1;
        }
    }

    /// The window of the pattern's length most like it (most lines equal once normalized),
    /// for an error that shows the model where it probably meant. Best effort: it stops when
    /// the budget does and gives the best window seen so far.
    pub(crate) fn nearest(&mut self, pattern: &[&str], from: usize) -> Option<usize> {
        let n = self.lines.len();
        if pattern.is_empty() || n == 0 {
            return None;
        }
        let want: Vec<u64> = pattern.iter().map(|p| self.key(PASSES - 1, p)).collect();
        self.keys(PASSES - 1).ok()?;
        let keys = self.keys[PASSES - 1].as_deref().unwrap_or_default();
        let len = pattern.len().min(n);
        let mut best: Option<(usize, usize)> = None;
        // A hint, not an answer: it gets a small share of the budget.
        let mut budget = Budget::new(self.budget.left.min(NEAREST_STEPS));
        for start in from.min(n - len)..=n - len {
            if budget.spend(len as u64).is_err() {
                break;
            }
            let score = (0..len).filter(|k| keys[start + k] == want[*k]).count();
            if score > 0 && best.is_none_or(|(_, s)| score > s) {
                best = Some((start, score));
            }
        }
        best.map(|(start, _)| start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seek(lines: &[&str], pattern: &[&str], from: usize, at_end: bool) -> Option<usize> {
        Seeker::new(lines, Budget::new(DEFAULT_BUDGET))
            .seek(pattern, from, at_end)
            .unwrap()
    }

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
    fn windows_slide_correctly_over_every_start() {
        let lines = ["a", "b", "c", "a", "b", "d", "a", "b", "c"];
        assert_eq!(seek(&lines, &["a", "b", "d"], 0, false), Some(3));
        assert_eq!(seek(&lines, &["a", "b", "c"], 1, false), Some(6));
        assert_eq!(seek(&lines, &["b", "c"], 2, false), Some(7));
        assert_eq!(seek(&lines, &["c", "x"], 0, false), None);
    }

    /// The red team's case: N identical context lines then one that differs, against 2N
    /// identical lines. Quadratic matching took 18–20 s at N = 20 000; counted in line steps,
    /// hashed matching takes a small multiple of the file's length.
    #[test]
    fn identical_lines_cost_linear_steps_not_quadratic() {
        let n = 20_000;
        let lines: Vec<&str> = vec!["same"; 2 * n];
        let mut pattern: Vec<&str> = vec!["same"; n];
        pattern.push("different");
        let mut s = Seeker::new(&lines, Budget::new(DEFAULT_BUDGET));
        assert_eq!(s.seek(&pattern, 0, false), Ok(None));
        let spent = DEFAULT_BUDGET - s.budget.left;
        assert!(spent < 20 * (2 * n as u64), "spent {spent} steps");
    }

    #[test]
    fn a_budget_that_runs_out_is_an_error_not_a_hang() {
        let lines: Vec<&str> = vec!["x"; 10_000];
        let mut s = Seeker::new(&lines, Budget::new(1_000));
        assert_eq!(s.seek(&["y"], 0, false), Err(Exhausted { limit: 1_000 }));
    }

    #[test]
    fn nearest_finds_the_most_similar_window() {
        let lines = ["fn a() {", "  one();", "}", "fn b() {", "  two();", "}"];
        let mut s = Seeker::new(&lines, Budget::new(DEFAULT_BUDGET));
        assert_eq!(s.nearest(&["fn b() {", "  three();", "}"], 0), Some(3));
    }
}
