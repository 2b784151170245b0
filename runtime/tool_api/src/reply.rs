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

/// Where a text-shaped tool's facts travel: the result's `_meta` under this key, which
/// clients hand to programs (and widgets), never to the model.
pub const FACTS_META_KEY: &str = "gantry/result";

/// Where an error's stable code travels for programs (the model reads it in the text).
pub const ERROR_META_KEY: &str = "gantry/error";

/// A handler's result: the output (`structuredContent`, or the facts of a text-shaped tool),
/// the text rendering, and more content blocks.
#[derive(Debug, Clone)]
pub struct Reply<T> {
    /// Becomes `structuredContent`, or `_meta["gantry/result"]` for a text-shaped tool.
    pub output: T,
    /// What the model reads. A structured tool without it sends its output as JSON text.
    pub text: Option<String>,
    /// Content blocks after the text one.
    pub extra: Vec<Content>,
    /// Nothing the call asked for succeeded: the result is marked `isError`, with the text
    /// saying what failed for each part.
    pub failed: bool,
}

impl<T> Reply<T> {
    /// A reply whose text is the JSON of `output`.
    pub fn new(output: T) -> Self {
        Self {
            output,
            text: None,
            extra: Vec::new(),
            failed: false,
        }
    }

    /// A reply the model reads as `text`.
    pub fn rendered(output: T, text: String) -> Self {
        Self {
            output,
            text: Some(text),
            extra: Vec::new(),
            failed: false,
        }
    }
}

/// Output type of tools that declare no output.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct NoOutput {}

/// A reply in wire-neutral form, ready for the transport.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// `structuredContent`, for structured tools.
    pub structured: Option<serde_json::Value>,
    /// The result's `_meta`, for text-shaped tools with facts.
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
    /// The text content block.
    pub text: String,
    /// The other content blocks.
    pub extra: Vec<Content>,
    /// `isError`.
    pub failed: bool,
}

fn to_value<T: Serialize>(output: &T) -> Result<serde_json::Value, ToolError> {
    serde_json::to_value(output).map_err(|e| {
        ToolError::new(
            crate::ErrorCode::Internal,
            format!("result does not serialize: {e}"),
        )
    })
}

/// Serializes the reply of a structured tool: the output is `structuredContent`.
pub fn encode<T: Serialize>(reply: Reply<T>) -> Result<Encoded, ToolError> {
    let structured = to_value(&reply.output)?;
    let text = match reply.text {
        Some(t) => t,
        None => structured.to_string(),
    };
    Ok(Encoded {
        structured: Some(structured),
        meta: None,
        text,
        extra: reply.extra,
        failed: reply.failed,
    })
}

/// Serializes the reply of a text-shaped tool: the model reads the text once; the facts go
/// to `_meta` for programs. A handler of such a tool must render its text.
pub fn encode_text<T: Serialize>(reply: Reply<T>) -> Result<Encoded, ToolError> {
    let Some(text) = reply.text else {
        return Err(ToolError::new(
            crate::ErrorCode::Internal,
            "a text-shaped tool returned no text rendering",
        ));
    };
    let facts = to_value(&reply.output)?;
    let meta = match facts {
        serde_json::Value::Object(o) if o.is_empty() => None,
        facts => Some(serde_json::Map::from_iter([(
            FACTS_META_KEY.to_string(),
            facts,
        )])),
    };
    Ok(Encoded {
        structured: None,
        meta,
        text,
        extra: reply.extra,
        failed: reply.failed,
    })
}

/// The reply of a tool that declares no output: content only, no `structuredContent`.
pub fn encode_unstructured(reply: Reply<NoOutput>) -> Result<Encoded, ToolError> {
    Ok(Encoded {
        structured: None,
        meta: None,
        text: reply.text.unwrap_or_default(),
        extra: reply.extra,
        failed: reply.failed,
    })
}
