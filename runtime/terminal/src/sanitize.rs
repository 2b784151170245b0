//! Terminal output made readable for a model: ANSI escape sequences removed, `\r\n` turned
//! into `\n`, other control characters dropped (tabs kept), C1 controls (U+0080–U+009F, among
//! them the single-character CSI U+009B) dropped after decoding, invalid UTF-8 replaced with
//! U+FFFD. Streaming: an escape sequence or a UTF-8 character split across reads is handled.

/// Where the escape-sequence parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    /// Plain text.
    None,
    /// After ESC.
    Start,
    /// Inside `ESC [` … final byte.
    Csi,
    /// Inside `ESC ]` … BEL or `ESC \`.
    Osc,
    /// Inside an OSC, just after ESC (maybe the `\` of ST).
    OscEscape,
    /// `ESC (`, `ESC )`…: one more byte.
    Charset,
}

/// A streaming sanitizer.
#[derive(Debug)]
pub struct Sanitizer {
    esc: Esc,
    utf8: Vec<u8>,
    pending_cr: bool,
}

impl Default for Sanitizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Sanitizer {
    /// A sanitizer at the start of a stream.
    pub fn new() -> Self {
        Self {
            esc: Esc::None,
            utf8: Vec::new(),
            pending_cr: false,
        }
    }

    /// Sanitizes `bytes`, appending text to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut String) {
        let mut plain: Vec<u8> = Vec::with_capacity(bytes.len());
        for &b in bytes {
            match self.esc {
                Esc::None => match b {
                    0x1b => self.esc = Esc::Start,
                    b'\r' => self.pending_cr = true,
                    b'\n' => {
                        self.pending_cr = false;
                        plain.push(b'\n');
                    }
                    b'\t' => {
                        self.flush_cr(&mut plain);
                        plain.push(b);
                    }
                    0x00..=0x1f | 0x7f => {}
                    _ => {
                        self.flush_cr(&mut plain);
                        plain.push(b);
                    }
                },
                Esc::Start => {
                    self.esc = match b {
                        b'[' => Esc::Csi,
                        b']' | b'P' | b'X' | b'^' | b'_' => Esc::Osc,
                        b'(' | b')' | b'*' | b'+' | b'#' | b'%' => Esc::Charset,
                        _ => Esc::None,
                    }
                }
                Esc::Csi => {
                    if (0x40..=0x7e).contains(&b) {
                        self.esc = Esc::None;
                    }
                }
                Esc::Osc => match b {
                    0x07 => self.esc = Esc::None,
                    0x1b => self.esc = Esc::OscEscape,
                    _ => {}
                },
                Esc::OscEscape => self.esc = if b == b'\\' { Esc::None } else { Esc::Osc },
                Esc::Charset => self.esc = Esc::None,
            }
        }
        self.decode(&plain, out);
    }

    /// A lone `\r` (progress bars redrawing a line) becomes a line break, so no text is lost
    /// and nothing is overwritten.
    fn flush_cr(&mut self, plain: &mut Vec<u8>) {
        if self.pending_cr {
            plain.push(b'\n');
            self.pending_cr = false;
        }
    }

    fn decode(&mut self, plain: &[u8], out: &mut String) {
        let mut bytes = std::mem::take(&mut self.utf8);
        bytes.extend_from_slice(plain);
        let mut rest: &[u8] = &bytes;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    push_without_c1(out, s);
                    return;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    push_without_c1(out, std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &bad[n..];
                        }
                        None => {
                            // An incomplete character at the end: keep it for the next read.
                            self.utf8 = bad.to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: a dangling partial character becomes U+FFFD.
    pub fn finish(&mut self, out: &mut String) {
        if !self.utf8.is_empty() {
            self.utf8.clear();
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
}

/// Appends `s` without C1 control characters. Each is encoded as `C2 80`–`C2 9F`, so text
/// without a `C2` byte is appended as it is.
fn push_without_c1(out: &mut String, s: &str) {
    if !s.as_bytes().contains(&0xc2) {
        out.push_str(s);
        return;
    }
    out.extend(s.chars().filter(|c| !('\u{80}'..='\u{9f}').contains(c)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(chunks: &[&[u8]]) -> String {
        let mut s = Sanitizer::new();
        let mut out = String::new();
        for c in chunks {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        out
    }

    #[test]
    fn colours_titles_and_controls_disappear() {
        assert_eq!(
            clean(&[b"\x1b[31mred\x1b[0m and \x1b]0;title\x07plain\x07 bell\r\n"]),
            "red and plain bell\n"
        );
        assert_eq!(
            clean(&[b"a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b\n"]),
            "alinkb\n"
        );
        assert_eq!(clean(&[b"tab\there\x00\x08!\n"]), "tab\there!\n");
    }

    /// Found by the fuzzer: U+0092 came through. C1 controls are dropped, even split across
    /// reads; the Latin-1 letters beside them stay.
    #[test]
    fn c1_controls_are_dropped() {
        assert_eq!(
            clean(&[b"a\xc2\x92b\xc2", b"\x9b31mc \xc2\xa9\n"]),
            "ab31mc \u{a9}\n"
        );
    }

    #[test]
    fn sequences_and_characters_split_across_reads_survive() {
        assert_eq!(clean(&[b"\x1b[3", b"1mx\xc3", b"\xa9\n"]), "x\u{e9}\n");
    }

    #[test]
    fn invalid_utf8_is_replaced_and_progress_lines_are_kept() {
        assert_eq!(clean(&[b"\xff\xfe ok\n"]), "\u{fffd}\u{fffd} ok\n");
        assert_eq!(clean(&[b"10%\r50%\r100%\r\n"]), "10%\n50%\n100%\n");
        assert_eq!(clean(&[b"cut \xe2\x82"]), "cut \u{fffd}");
    }
}
