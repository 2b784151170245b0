//! gantry's code generator: a validated `surface.toml` in, every generated file out.
//!
//! [`generate`] is a pure function of the surface text: no clock, no environment, no hash
//! order, so the same input always gives byte-identical files. A generated crate's build
//! script calls [`build_script`], which writes them into `OUT_DIR` and nowhere else; the
//! goldens test (`tests/goldens.rs`, refreshed by `cargo codegen`) keeps one insta snapshot
//! of each file for review.

mod build_script;
mod emit_cedar;
mod emit_docs;
mod emit_rust;
mod emit_schema;
mod generate;

pub use build_script::{SURFACE_ENV, build_script};
pub use emit_cedar::{MUTATING_GROUP, connector_group, operation_action, permission_group};
pub use emit_schema::{Role, input_schema, output_schema};
pub use generate::{Error, Files, generate, generate_from};
