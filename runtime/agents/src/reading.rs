//! Reading a worker's turn: its command line from a kind's template, and the conversation id
//! and token usage from what its program prints.

use config::worker_kinds::Kind;

/// `template` with every placeholder replaced by its value in `values`, in one pass: a value
/// (a prompt the model wrote) is never read for placeholders itself.
pub fn expand(template: &[String], values: &[(&str, &str)]) -> Vec<String> {
    template
        .iter()
        .map(|word| {
            let mut out = String::with_capacity(word.len());
            let mut rest = word.as_str();
            while !rest.is_empty() {
                let placeholder = values
                    .iter()
                    .find_map(|(name, value)| Some((value, rest.strip_prefix(name)?)));
                match placeholder {
                    Some((value, after)) => {
                        out.push_str(value);
                        rest = after;
                    }
                    None => {
                        let mut chars = rest.chars();
                        if let Some(c) = chars.next() {
                            out.push(c);
                        }
                        rest = chars.as_str();
                    }
                }
            }
            out
        })
        .collect()
}

/// What a turn's output said: the conversation id and the conversation's size.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Readings {
    /// The last conversation id seen.
    pub conversation: Option<String>,
    /// A value the `conversation` pattern found that is not an id (shortened, escaped).
    pub rejected: Option<String>,
    /// Per token pattern, its last match.
    last_counts: Vec<Option<u64>>,
}

impl Readings {
    /// The conversation's size: the sum of each token pattern's last match, when any matched.
    pub fn tokens(&self) -> Option<u64> {
        self.last_counts.iter().any(Option::is_some).then(|| {
            self.last_counts
                .iter()
                .flatten()
                .fold(0u64, |sum, n| sum.saturating_add(*n))
        })
    }
}

/// Reads lines of one turn's output for `kind`'s patterns.
#[derive(Debug)]
pub struct Reader {
    conversation: regex::Regex,
    tokens: Vec<regex::Regex>,
    partial: String,
    /// What was read so far.
    pub readings: Readings,
}

/// Whether `id` may be used as a conversation id: it becomes one argument of the resume
/// command, so it must read as a value there, never as a flag or anything else (the output
/// it is read from is not trusted: any process of the user can write to a terminal).
fn is_conversation_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

/// The longest line kept while waiting for its end; a longer one is read in pieces.
const MAX_LINE: usize = 1 << 20;

impl Reader {
    /// A reader for `kind` (its patterns were checked when the config was read).
    pub fn new(kind: &Kind) -> Result<Reader, regex::Error> {
        let tokens = kind
            .tokens
            .iter()
            .map(|t| regex::Regex::new(t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Reader {
            conversation: regex::Regex::new(&kind.conversation)?,
            readings: Readings {
                conversation: None,
                rejected: None,
                last_counts: vec![None; tokens.len()],
            },
            tokens,
            partial: String::new(),
        })
    }

    /// Feeds output; whole lines are read at once.
    pub fn feed(&mut self, text: &str) {
        self.partial.push_str(text);
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            self.read_line(&line);
        }
        if self.partial.len() > MAX_LINE {
            let line = std::mem::take(&mut self.partial);
            self.read_line(&line);
        }
    }

    /// Reads what is left (the output ended without a newline).
    pub fn finish(&mut self) {
        let line = std::mem::take(&mut self.partial);
        self.read_line(&line);
    }

    fn read_line(&mut self, line: &str) {
        if let Some(id) = self
            .conversation
            .captures_iter(line)
            .last()
            .and_then(|c| c.get(1))
        {
            if is_conversation_id(id.as_str()) {
                self.readings.conversation = Some(id.as_str().to_string());
            } else {
                self.readings.rejected = Some(
                    id.as_str()
                        .chars()
                        .take(60)
                        .flat_map(char::escape_debug)
                        .collect(),
                );
            }
        }
        for (re, slot) in self.tokens.iter().zip(self.readings.last_counts.iter_mut()) {
            if let Some(n) = re
                .captures_iter(line)
                .last()
                .and_then(|c| c.get(1))
                .and_then(|m| m.as_str().parse().ok())
            {
                *slot = Some(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use config::worker_kinds::known_kinds;

    #[test]
    fn readings_take_the_last_id_and_sum_each_patterns_last_count() {
        let kind = &known_kinds()[0];
        let mut r = Reader::new(kind).unwrap();
        r.feed("{\"type\":\"thread.started\",\"thread_id\":\"abc\"}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":100,\"cached_input_tokens\":0,\"output_tokens\":7}}\n");
        r.feed("{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":250,");
        r.feed("\"output_tokens\":9}}");
        r.finish();
        assert_eq!(r.readings.conversation.as_deref(), Some("abc"));
        assert_eq!(r.readings.tokens(), Some(259));
        let mut none = Reader::new(kind).unwrap();
        none.feed("nothing here\n");
        assert_eq!(none.readings.tokens(), None);
        // An id that would read as a flag, or hold anything but an id's characters, is not
        // taken; counts too big to add stay at the ceiling of u64.
        let mut forged = Reader::new(kind).unwrap();
        forged.feed("{\"thread_id\":\"--dangerously-bypass\"}\n{\"thread_id\":\"a b\"}\n");
        forged.feed("{\"input_tokens\":18446744073709551615,\"output_tokens\":9}\n");
        assert_eq!(forged.readings.conversation, None);
        assert_eq!(forged.readings.tokens(), Some(u64::MAX));
    }

    #[test]
    fn expansion_replaces_whole_placeholders_only() {
        let argv = expand(
            &["a".into(), "{prompt}".into(), "url={mcp_url}".into()],
            &[("{prompt}", "do {mcp_url} x"), ("{mcp_url}", "http://h")],
        );
        assert_eq!(argv, ["a", "do {mcp_url} x", "url=http://h"]);
    }
}
