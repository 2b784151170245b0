//! `surface.toml` as a typed, validated model: what the emitters generate from and what
//! `gantry check --surface` validates, without linking the code generator.

mod diagnostics;
mod model;
mod vocabulary;

pub use diagnostics::{Diagnostic, Diagnostics};
pub use model::*;
