//! [`generate`]: a surface in, every generated file out.

use std::collections::BTreeMap;

/// Generated files keyed by their path relative to the output directory (always with `/`):
/// `surface.rs`, `error_codes.rs` (when the surface declares `[errors]`),
/// `schemas/<tool>.input.json`, `schemas/<tool>.output.json`, `TOOLS.md`,
/// `surface.cedarschema` and `base.cedar`.
pub type Files = BTreeMap<String, String>;

/// Everything that can stop generation.
#[derive(Debug)]
pub enum Error {
    /// The surface file is invalid; every problem is listed.
    Surface(surface::Diagnostics),
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

/// Generates every file from the text of a surface file.
pub fn generate(file_name: &str, text: &str) -> Result<Files, Error> {
    let surface = surface::Surface::parse(file_name, text).map_err(Error::Surface)?;
    generate_from(&surface).map_err(Error::Emit)
}

/// Generates every file from a validated surface.
pub fn generate_from(surface: &surface::Surface) -> Result<Files, String> {
    let mut files = Files::new();
    files.insert("surface.rs".into(), crate::emit_rust::surface_rs(surface)?);
    for t in &surface.tools {
        files.insert(
            format!("schemas/{}.input.json", t.id),
            crate::emit_schema::to_file(&crate::emit_schema::input_schema(surface, t)),
        );
        if let Some(out) = crate::emit_schema::output_schema(surface, t) {
            files.insert(
                format!("schemas/{}.output.json", t.id),
                crate::emit_schema::to_file(&out),
            );
        }
    }
    if !surface.errors.is_empty() {
        files.insert(
            "error_codes.rs".into(),
            crate::emit_rust::error_codes_rs(surface)?,
        );
    }
    files.insert("TOOLS.md".into(), crate::emit_docs::tools_md(surface));
    files.insert(
        "surface.cedarschema".into(),
        crate::emit_cedar::schema(surface),
    );
    files.insert(
        "base.cedar".into(),
        crate::emit_cedar::base_policies(surface),
    );
    Ok(files)
}
