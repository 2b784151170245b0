//! Ceilings on memory-heavy work shared by every call of the process, so that N concurrent
//! calls cannot multiply one call's worst case: a call takes what it will hold from
//! [`HEAVY`] *before* reading or decoding, waits a bounded time when others hold it, and is
//! refused with `BUSY` rather than going over. [`DECODES`] bounds image decodes at once.
//!
//! These bound the large buffers (file contents, decoded pixels), not every allocation: the
//! README states the whole ceiling with what else a server holds.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{ErrorCode, ToolError};

/// Bytes of large buffers all calls together may hold.
pub const HEAVY_BYTES: u64 = 512 << 20;
/// Image decodes running at once.
pub const DECODE_SLOTS: u64 = 2;
/// How long a call waits for room before it is refused.
pub const WAIT: Duration = Duration::from_secs(10);

/// Large buffers held by all calls.
pub static HEAVY: Budget = Budget::new("memory for large buffers", HEAVY_BYTES, true);
/// Image decodes in progress.
pub static DECODES: Budget = Budget::new("image decodes", DECODE_SLOTS, false);

/// A counted resource with a fixed total.
#[derive(Debug)]
pub struct Budget {
    what: &'static str,
    total: u64,
    bytes: bool,
    used: Mutex<u64>,
    freed: Condvar,
}

/// A share of a [`Budget`], given back when dropped.
#[derive(Debug)]
#[must_use = "the share is given back as soon as it is dropped"]
pub struct Held<'a> {
    budget: &'a Budget,
    amount: u64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.lock();
        *used -= self.amount;
        drop(used);
        self.budget.freed.notify_all();
    }
}

impl Held<'_> {
    /// How much is held.
    pub fn amount(&self) -> u64 {
        self.amount
    }
}

impl Budget {
    /// A budget of `total` units (`bytes`: units are bytes, for messages).
    pub const fn new(what: &'static str, total: u64, bytes: bool) -> Budget {
        Budget {
            what,
            total,
            bytes,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        match self.used.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn amount(&self, n: u64) -> String {
        if self.bytes {
            format!("{} MiB", n.div_ceil(1 << 20))
        } else {
            n.to_string()
        }
    }

    /// In use now.
    pub fn in_use(&self) -> u64 {
        *self.lock()
    }

    /// Takes `amount`, waiting up to `wait` for others to give back enough. More than the
    /// whole budget is `OUTPUT_LIMIT` at once; no room in time is `BUSY`.
    pub fn take(&self, amount: u64, wait: Duration) -> Result<Held<'_>, ToolError> {
        if amount > self.total {
            return Err(ToolError::new(
                ErrorCode::OutputLimit,
                format!(
                    "needs {} of {}, more than the server's whole ceiling of {}",
                    self.amount(amount),
                    self.what,
                    self.amount(self.total)
                ),
            ));
        }
        let deadline = Instant::now() + wait;
        let mut used = self.lock();
        while *used + amount > self.total {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ToolError::new(
                    ErrorCode::Busy,
                    format!(
                        "the server's {} are in use by other calls ({} of {}); retry shortly",
                        self.what,
                        self.amount(*used),
                        self.amount(self.total)
                    ),
                ));
            }
            used = match self.freed.wait_timeout(used, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        *used += amount;
        Ok(Held {
            budget: self,
            amount,
        })
    }
}

impl Budget {
    /// [`Budget::take`] for code that reports `std::io::Error`: no room in time is
    /// `ResourceBusy` (which [`ToolError::os`] reports as `BUSY`), too much is `FileTooLarge`.
    pub fn take_io(&self, amount: u64, wait: Duration) -> std::io::Result<Held<'_>> {
        self.take(amount, wait).map_err(|e| {
            let kind = if e.code == ErrorCode::Busy {
                std::io::ErrorKind::ResourceBusy
            } else {
                std::io::ErrorKind::FileTooLarge
            };
            std::io::Error::new(kind, e.message)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_wait_and_are_given_back() {
        let b = Budget::new("test bytes", 100, true);
        let a = b.take(60, WAIT).unwrap();
        assert_eq!(b.in_use(), 60);
        // No room: refused after the wait, with BUSY.
        let e = b.take(50, Duration::from_millis(20)).unwrap_err();
        assert_eq!(e.code, ErrorCode::Busy);
        // Room comes back while waiting.
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                drop(a);
            });
            let c = b.take(50, WAIT).unwrap();
            assert_eq!(c.amount(), 50);
        });
        assert_eq!(b.in_use(), 0);
        assert_eq!(b.take(101, WAIT).unwrap_err().code, ErrorCode::OutputLimit);
    }
}
