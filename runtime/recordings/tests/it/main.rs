//! recordings' integration tests, one binary: importers against fixture transcripts, and the
//! store on real SQLite files.
//!
//! `cfg(test)` marks the whole crate as test code for clippy, which `.clippy.toml` lets
//! unwrap and expect.

#![cfg(test)]

mod common;
mod import;
mod store;
