//! gantry's end-to-end tests, as one test binary of the `gantry` package (so cargo builds the
//! real `gantry` binary they start, and the suite links once, not once per file). What they
//! share with the benches is the `support` crate.
//!
//! `cfg(test)` marks the whole crate as test code for clippy, which `.clippy.toml` lets
//! unwrap and expect.

#![cfg(test)]

use ::support;

#[cfg(target_os = "linux")]
mod admin;
#[cfg(target_os = "linux")]
mod agents;
mod apply_patch;
#[cfg(target_os = "linux")]
mod bounds;
mod cli;
#[cfg(target_os = "linux")]
mod confinement;
#[cfg(target_os = "linux")]
mod desktop;
mod e2e;
// FIFOs, symbolic links, /proc.
#[cfg(target_os = "linux")]
mod edges;
// Uses the POSIX shell for its command rendering.
#[cfg(unix)]
mod economy;
#[cfg(unix)]
mod exec;
#[cfg(target_os = "linux")]
mod faults;
mod files;
// Signals and pipes as a shell has them.
#[cfg(unix)]
mod first_hour;
// Real sshd instances and /proc.
#[cfg(target_os = "linux")]
mod hosts;
mod http;
mod policies;
mod sessions;
#[cfg(unix)]
mod shell_env;
// The control page's browser scenarios and a Python client.
#[cfg(target_os = "linux")]
mod signin;
mod surface;
mod tunnel;
// Reads /proc to prove process trees end.
#[cfg(target_os = "linux")]
mod zodex;
// Makes symbolic links.
#[cfg(unix)]
mod file_batch;
// Upstreams started with `sh` and `sleep`.
#[cfg(unix)]
mod gateway;
// A real systemd user manager in a mount namespace; reads /proc.
#[cfg(target_os = "linux")]
mod services;
// Starts POSIX programs and reads /proc.
#[cfg(target_os = "linux")]
mod shell;
// The Windows build under Wine (tests/run's Windows lane sets GANTRY_WINE_EXE).
#[cfg(target_os = "linux")]
mod wine;
