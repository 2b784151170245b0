//! Bounded JSON-RPC lines on a byte stream. A line longer than the limit is never buffered:
//! what was passed on is cut off with a byte no JSON text can end with and a newline (so the
//! protocol layer ignores it as unparsable, even when the part passed on was a whole request
//! followed by padding), the rest is dropped as it arrives, and a one-line stand-in takes its place,
//! carrying the oversized message's own `id` (read from its first bytes):
//! - on gantry's stdio ([`BoundedLines::new`]), a request for [`OVERSIZED_METHOD`], which the
//!   server answers with a JSON-RPC error naming the limit, so a client that sent too much
//!   is told so under the id it waits on instead of waiting forever;
//! - from an upstream server ([`BoundedLines::responses`]), an error response with
//!   [`OVERSIZED_CODE`], so a result over the gateway's cap fails its call as soon as the cap
//!   is crossed instead of being read whole (or dropped, and waited on until the timeout).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The longest request line read from stdio, its newline included (rmcp's own limit: a line
/// this one lets through always fits it).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The method of the request that stands in for an oversized one.
pub const OVERSIZED_METHOD: &str = "gantry/oversized_request";

/// The JSON-RPC error code of the stand-in for an oversized upstream response.
pub const OVERSIZED_CODE: i32 = -32099;

/// What takes an oversized line's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StandIn {
    /// A request for [`OVERSIZED_METHOD`] (what a server reads).
    Request,
    /// An error response (what a client reads).
    ErrorResponse,
}

/// How much of a line's start is kept to find its `id`.
const HEAD_BYTES: usize = 64 << 10;

/// An input stream whose lines are at most [`MAX_LINE_BYTES`].
#[derive(Debug)]
pub struct BoundedLines<R> {
    inner: R,
    max: usize,
    /// Bytes of the current line passed on so far.
    line: usize,
    /// The current line's first bytes.
    head: Vec<u8>,
    /// Dropping the rest of an oversized line.
    discarding: bool,
    /// Bytes to hand out before reading more.
    pending: VecDeque<u8>,
    scratch: Vec<u8>,
    stand_in: StandIn,
    /// Every line must be JSON (start with `{` or `[`): anything else ends the stream.
    strict: bool,
    /// A line that is not JSON arrived (strict): the stream is over.
    broken: bool,
}

impl<R> BoundedLines<R> {
    /// `inner`, requests to gantry, with lines bounded by [`MAX_LINE_BYTES`].
    pub fn new(inner: R) -> Self {
        Self::with_max(inner, MAX_LINE_BYTES - 1, StandIn::Request)
    }

    /// `inner`, an upstream server's messages to gantry, with lines bounded by `max` (its
    /// newline included).
    pub fn responses(inner: R, max: usize) -> Self {
        Self::with_max(inner, max.saturating_sub(1), StandIn::ErrorResponse)
    }

    /// [`BoundedLines::responses`], and a line that is not JSON ends the stream with an
    /// error: a peer whose output anything else can write to (a remote gantry's stdout is
    /// reachable by the commands it runs) cannot keep its reader busy with lines that are
    /// dropped one by one.
    pub fn strict_responses(inner: R, max: usize) -> Self {
        let mut lines = Self::responses(inner, max);
        lines.strict = true;
        lines
    }

    fn with_max(inner: R, max: usize, stand_in: StandIn) -> Self {
        BoundedLines {
            stand_in,
            inner,
            max,
            line: 0,
            head: Vec::new(),
            discarding: false,
            pending: VecDeque::new(),
            scratch: vec![0; 64 << 10],
            strict: false,
            broken: false,
        }
    }

    /// Processes `chunk` from the inner stream into `pending`.
    fn take(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let newline = rest.iter().position(|&b| b == b'\n');
            let (part, ends) = match newline {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            rest = newline.map_or(&[][..], |i| &rest[i + 1..]);
            if self.strict
                && self.line == 0
                && !self.discarding
                && part
                    .first()
                    .is_some_and(|b| !matches!(b, b'{' | b'[' | b'\r'))
            {
                self.broken = true;
                return;
            }
            if !self.discarding {
                let room = self.max - self.line;
                if part.len() <= room {
                    self.keep_head(part);
                    self.pending.extend(part);
                    self.line += part.len();
                    if ends {
                        self.pending.push_back(b'\n');
                        self.line = 0;
                        self.head.clear();
                    }
                    continue;
                }
                // Too long: spoil what was passed on (a whole request and then padding must
                // not run), end it, drop the rest of the line.
                self.keep_head(part);
                self.pending.extend(b"x\n");
                self.discarding = true;
            }
            if ends {
                self.discarding = false;
                self.line = 0;
                self.stand_in();
                self.head.clear();
            }
        }
    }

    fn keep_head(&mut self, part: &[u8]) {
        let room = HEAD_BYTES.saturating_sub(self.head.len());
        self.head.extend(&part[..part.len().min(room)]);
    }

    /// The request answered in place of the oversized one.
    fn stand_in(&mut self) {
        let Some(id) = top_level_id(&self.head) else {
            tracing::warn!(
                limit = self.max,
                "stdio: dropped a message longer than the limit, with no id to answer"
            );
            return;
        };
        tracing::warn!(limit = self.max, %id, "stdio: refused a message longer than the limit");
        let line = match self.stand_in {
            StandIn::Request => format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{OVERSIZED_METHOD}\",\"params\":{{\"limit_bytes\":{}}}}}\n",
                self.max
            ),
            StandIn::ErrorResponse => format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":{OVERSIZED_CODE},\"message\":\"the answer is larger than {} bytes; it was not read\"}}}}\n",
                self.max
            ),
        };
        self.pending.extend(line.as_bytes());
    }
}

/// The `id` of the JSON object that `head` begins, when it appears among its first bytes at
/// the top level: a number or a string, as its JSON text.
fn top_level_id(head: &[u8]) -> Option<String> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut key_start = None;
    for (i, &b) in head.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    in_string = false;
                    if depth == 1
                        && let Some(start) = key_start.take()
                        && &head[start..i] == b"id"
                    {
                        let after = head[i + 1..].iter().skip_while(|b| b.is_ascii_whitespace());
                        let mut after = after.copied().collect::<Vec<u8>>();
                        if after.first() != Some(&b':') {
                            continue;
                        }
                        after.remove(0);
                        let mut values = serde_json::Deserializer::from_slice(&after)
                            .into_iter::<serde_json::Value>();
                        return match values.next() {
                            Some(Ok(
                                v @ (serde_json::Value::Number(_) | serde_json::Value::String(_)),
                            )) => Some(v.to_string()),
                            _ => None,
                        };
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                key_start = Some(i + 1);
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.broken && this.pending.is_empty() {
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "a line that is not JSON-RPC: the connection is not trusted further",
                )));
            }
            if !this.pending.is_empty() {
                let n = this.pending.len().min(buf.remaining());
                let (a, b) = this.pending.as_slices();
                let from_a = n.min(a.len());
                buf.put_slice(&a[..from_a]);
                buf.put_slice(&b[..n - from_a]);
                this.pending.drain(..n);
                return Poll::Ready(Ok(()));
            }
            let mut scratch = std::mem::take(&mut this.scratch);
            let mut read = ReadBuf::new(&mut scratch);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read);
            let filled = read.filled().len();
            match polled {
                Poll::Ready(Ok(())) if filled == 0 => {
                    this.scratch = scratch;
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Ok(())) => {
                    this.take(&scratch[..filled]);
                    this.scratch = scratch;
                }
                other => {
                    this.scratch = scratch;
                    return other;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(max: usize, input: &[u8]) -> String {
        let mut b = BoundedLines::with_max(&input[..0], max, StandIn::Request);
        for chunk in input.chunks(7) {
            b.take(chunk);
        }
        String::from_utf8(b.pending.into_iter().collect()).unwrap()
    }

    #[test]
    fn a_strict_reader_stops_at_the_first_line_that_is_not_json() {
        let mut b = BoundedLines::strict_responses(&b""[..], 1024);
        b.take(b"{\"id\":1}\n\n{\"id\":2}\nyes\n{\"id\":3}\n");
        assert!(b.broken);
        let kept = String::from_utf8(b.pending.iter().copied().collect()).unwrap();
        assert_eq!(kept, "{\"id\":1}\n\n{\"id\":2}\n");
    }

    #[test]
    fn short_lines_pass_unchanged_and_a_long_one_is_answered_under_its_id() {
        let ok = b"{\"id\":1,\"method\":\"a\"}\n{\"id\":2}\n";
        assert_eq!(through(64, ok), String::from_utf8_lossy(ok));
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"r-7\",\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n{{\"id\":3}}\n",
            "y".repeat(500)
        );
        let out = through(64, long.as_bytes());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[0].len() <= 64);
        assert_eq!(
            lines[1],
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":\"r-7\",\"method\":\"{OVERSIZED_METHOD}\",\"params\":{{\"limit_bytes\":64}}}}"
            )
        );
        assert_eq!(lines[2], "{\"id\":3}");
    }

    #[test]
    fn an_oversized_response_becomes_an_error_under_its_id() {
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":\"{}\"}}\n",
            "z".repeat(300)
        );
        let mut b = BoundedLines::responses(&long.as_bytes()[..0], 100);
        b.take(long.as_bytes());
        let out = String::from_utf8(b.pending.into_iter().collect()).unwrap();
        let reply: serde_json::Value = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
        assert_eq!(reply["id"], 5);
        assert_eq!(reply["error"]["code"], OVERSIZED_CODE);
    }

    #[test]
    fn a_whole_request_padded_past_the_limit_is_spoilt_not_run() {
        let padded = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\"}}{}\n",
            " ".repeat(200)
        );
        let out = through(64, padded.as_bytes());
        let first = out.lines().next().unwrap();
        assert!(first.ends_with('x'), "{first:?}");
        assert!(serde_json::from_str::<serde_json::Value>(first).is_err());
        let stand_in: serde_json::Value =
            serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
        assert_eq!(stand_in["id"], 8);
        assert_eq!(stand_in["method"], OVERSIZED_METHOD);
    }

    #[test]
    fn only_the_top_level_id_counts() {
        assert_eq!(
            top_level_id(b"{\"params\":{\"id\":9},\"id\":4"),
            Some("4".into())
        );
        assert_eq!(
            top_level_id(b"{\"method\":\"x\",\"params\":{\"id\":9}"),
            None
        );
        assert_eq!(
            top_level_id(b"{\"method\":\"id\",\"id\" : \"a\\\"b\""),
            Some("\"a\\\"b\"".into())
        );
    }
}
