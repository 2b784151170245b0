//! What a handler returns and how it becomes MCP content.

use serde::Serialize;

use crate::ToolError;

/// An image to return as MCP image content, already encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Base64 of the image bytes.
    pub data: String,
    /// `image/png`, `image/jpeg`...
    pub mime: String,
}

/// A handler's result: the structured output, optionally a text rendering for clients that
/// read only text (default: the structured output as JSON), and images.
#[derive(Debug, Clone)]
pub struct Reply<T> {
    /// Becomes `structuredContent`.
    pub output: T,
    /// Replaces the JSON text copy when set.
    pub text: Option<String>,
    /// Extra image content blocks.
    pub images: Vec<Image>,
}

impl<T> Reply<T> {
    /// A reply whose text is the JSON of `output`.
    pub fn new(output: T) -> Self {
        Self {
            output,
            text: None,
            images: Vec::new(),
        }
    }
}

/// Output type of tools that declare no output.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct NoOutput {}

/// A reply in wire-neutral form, ready for the transport.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// `structuredContent`.
    pub structured: serde_json::Value,
    /// The text content block.
    pub text: String,
    /// Image content blocks.
    pub images: Vec<Image>,
}

/// Serializes a reply.
pub fn encode<T: Serialize>(reply: Reply<T>) -> Result<Encoded, ToolError> {
    let structured = serde_json::to_value(&reply.output).map_err(|e| {
        ToolError::new(
            crate::ErrorCode::Internal,
            format!("result does not serialize: {e}"),
        )
    })?;
    let text = match reply.text {
        Some(t) => t,
        None => structured.to_string(),
    };
    Ok(Encoded {
        structured,
        text,
        images: reply.images,
    })
}
