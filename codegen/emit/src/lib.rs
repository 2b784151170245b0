//! gantry's code generator: `surface.toml` in, the contents of `generated/` out.
//!
//! [`generate`] is a pure function of the surface text: no clock, no environment, no hash
//! order, so the same input always gives byte-identical files. [`sync`] writes them (and
//! removes stale ones); [`check`] compares and reports a bounded diff.

mod diagnostics;
mod emit_cedar;
mod emit_docs;
mod emit_rust;
mod emit_schema;
mod model;
mod sync;

pub use diagnostics::{Diagnostic, Diagnostics};
pub use emit_cedar::{MUTATING_GROUP, connector_group, operation_action, permission_group};
pub use emit_schema::{Role, input_schema, output_schema};
pub use model::{Connector, Field, FieldType, Permission, Platform, Status, Surface, Tool};
pub use sync::{HAND_WRITTEN, Staleness, build_script, check, sync};

use std::collections::BTreeMap;

/// Files of `generated/`, keyed by their path relative to it (always with `/`).
pub type Files = BTreeMap<String, String>;

/// Everything that can stop generation.
#[derive(Debug)]
pub enum Error {
    /// The surface file is invalid; every problem is listed.
    Surface(Diagnostics),
    /// An emitter produced something it could not format (a codegen bug).
    Emit(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Surface(d) => write!(f, "{d}"),
            Error::Emit(e) => write!(f, "codegen bug: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Generates every file of `generated/` from the text of a surface file.
pub fn generate(file_name: &str, text: &str) -> Result<Files, Error> {
    let surface = Surface::parse(file_name, text).map_err(Error::Surface)?;
    generate_from(&surface).map_err(Error::Emit)
}

/// Generates every file of `generated/` from a validated surface.
pub fn generate_from(surface: &Surface) -> Result<Files, String> {
    let mut files = Files::new();
    files.insert("src/surface.rs".into(), emit_rust::surface_rs(surface)?);
    files.insert("src/surface/types.rs".into(), emit_rust::types_rs(surface)?);
    files.insert(
        "src/surface/resources.rs".into(),
        emit_rust::resources_rs(surface)?,
    );
    for c in &surface.connectors {
        files.insert(
            format!("src/surface/{}.rs", c.name),
            emit_rust::connector_rs(surface, &c.name)?,
        );
    }
    for t in &surface.tools {
        files.insert(
            format!("schemas/{}.input.json", t.name),
            emit_schema::to_file(&emit_schema::input_schema(surface, t)),
        );
        if let Some(out) = emit_schema::output_schema(surface, t) {
            files.insert(
                format!("schemas/{}.output.json", t.name),
                emit_schema::to_file(&out),
            );
        }
    }
    files.insert("docs/TOOLS.md".into(), emit_docs::tools_md(surface));
    files.insert(
        "policies/surface.cedarschema".into(),
        emit_cedar::schema(surface),
    );
    Ok(files)
}
