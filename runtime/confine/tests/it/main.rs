//! confine's integration tests, one binary: descriptors held by a walk, permits that must
//! not compile when misused, and walks racing a directory swapped for a symlink.
//!
//! `cfg(test)` marks the whole crate as test code for clippy, which `.clippy.toml` lets
//! unwrap and expect.

#![cfg(test)]

#[cfg(target_os = "linux")]
mod descriptors;
mod permits;
#[cfg(target_os = "linux")]
mod swap_races;
