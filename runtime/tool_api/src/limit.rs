//! Limits declared in surface.toml, typed by what they measure. Each carries the text the
//! surface shows for it (`"256 KB"`, `"20 s"`), so a message quotes the same figure the tool
//! description does, and no handler restates a number.

use std::fmt;
use std::marker::PhantomData;

/// Unit marker: bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes;

/// Unit marker: milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis;

/// A limit in unit `U`, as generated from surface.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity<U> {
    value: u64,
    shown: &'static str,
    unit: PhantomData<U>,
}

/// A size limit.
pub type ByteSize = Quantity<Bytes>;

/// A time limit.
pub type TimeLimit = Quantity<Millis>;

impl<U> Quantity<U> {
    /// `value` in the base unit, shown as `shown` (the generator renders both).
    pub const fn new(value: u64, shown: &'static str) -> Self {
        Self {
            value,
            shown,
            unit: PhantomData,
        }
    }

    /// The value in the base unit (bytes, milliseconds).
    pub const fn get(self) -> u64 {
        self.value
    }
}

impl ByteSize {
    /// The size as a `usize` (saturating on a 32-bit target).
    pub const fn as_usize(self) -> usize {
        // `try_from` is not const; the comparison makes the cast lossless.
        if self.value > usize::MAX as u64 {
            usize::MAX
        } else {
            self.value as usize
        }
    }
}

impl TimeLimit {
    /// The limit as a `Duration`.
    pub const fn duration(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.value)
    }
}

impl<U> fmt::Display for Quantity<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.shown)
    }
}
