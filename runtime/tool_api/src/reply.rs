//! What a handler returns and how it becomes MCP content.

use serde::Serialize;

use crate::ToolError;

/// A content block beside the text one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// An image, already encoded.
    Image {
        /// Base64 of the image bytes.
        data: String,
        /// `image/png`, `image/jpeg`...
        mime: String,
    },
    /// Audio, already encoded.
    Audio {
        /// Base64 of the audio bytes.
        data: String,
        /// `audio/wav`...
        mime: String,
    },
    /// An embedded text resource.
    Resource {
        /// Its URI.
        uri: String,
        /// Its MIME type.
        mime: String,
        /// Its text.
        text: String,
    },
}

impl Content {
    /// An image block.
    pub fn image(data: String, mime: impl Into<String>) -> Self {
        Content::Image {
            data,
            mime: mime.into(),
        }
    }
}

/// A handler's result: the structured output, optionally a text rendering for clients that
/// read only text (default: the structured output as JSON), and more content blocks.
#[derive(Debug, Clone)]
pub struct Reply<T> {
    /// Becomes `structuredContent`.
    pub output: T,
    /// Replaces the JSON text copy when set.
    pub text: Option<String>,
    /// Content blocks after the text one.
    pub extra: Vec<Content>,
}

impl<T> Reply<T> {
    /// A reply whose text is the JSON of `output`.
    pub fn new(output: T) -> Self {
        Self {
            output,
            text: None,
            extra: Vec::new(),
        }
    }
}

/// Output type of tools that declare no output.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct NoOutput {}

/// A reply in wire-neutral form, ready for the transport.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// `structuredContent`, for tools that declare an output.
    pub structured: Option<serde_json::Value>,
    /// The text content block.
    pub text: String,
    /// The other content blocks.
    pub extra: Vec<Content>,
}

/// Serializes the reply of a tool that declares an output.
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
        structured: Some(structured),
        text,
        extra: reply.extra,
    })
}

/// The reply of a tool that declares no output: content only, no `structuredContent`.
pub fn encode_unstructured(reply: Reply<NoOutput>) -> Result<Encoded, ToolError> {
    Ok(Encoded {
        structured: None,
        text: reply.text.unwrap_or_default(),
        extra: reply.extra,
    })
}
