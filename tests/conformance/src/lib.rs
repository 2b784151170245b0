//! The MCP conformance suite's fixture tools, served by gantry's own runtime from a second
//! surface (`tests/conformance/surface.toml`), generated into `OUT_DIR` like `generated/`.

mod surface {
    include!(concat!(env!("OUT_DIR"), "/surface.rs"));
}

mod fixtures;

pub use fixtures::{FixtureApp, Fixtures};
pub use surface::*;
