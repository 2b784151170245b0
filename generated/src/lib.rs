//! gantry's public surface as Rust: argument and output types, one handler trait and one
//! dispatch function per connector, Cedar resource types, and static tables of permissions,
//! connectors and tools.
//!
//! All of it is generated from `surface.toml` into `OUT_DIR` by `build.rs` on every build
//! that needs it, so the compiled surface cannot differ from the file. The reviewed copy is
//! the `surface.rs.snap` golden beside this crate's `Cargo.toml`.

mod surface {
    include!(concat!(env!("OUT_DIR"), "/surface.rs"));
}

pub use surface::*;
