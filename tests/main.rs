//! gantry's end-to-end tests, as one test binary of the server crate (so they start the real
//! `gantry` through `CARGO_BIN_EXE_gantry`, and the suite links once, not once per file).
//!
//! Every module is `cfg(test)` so clippy treats it as test code (`clippy.toml` allows
//! `unwrap`/`expect` there).

#[cfg(test)]
mod support;

#[cfg(test)]
mod apply_patch;
#[cfg(test)]
mod e2e;
#[cfg(test)]
#[cfg(unix)]
mod exec;
#[cfg(test)]
mod files;
#[cfg(test)]
mod http;
#[cfg(test)]
mod policies;
#[cfg(test)]
mod surface;
