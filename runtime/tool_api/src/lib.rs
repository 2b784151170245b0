//! The vocabulary generated tool code and gantry's runtime share: typed errors with stable
//! codes, argument decoding and validation, replies, the per-call context, and the types of
//! the static surface tables.

pub mod check;
mod context;
mod decode;
mod effect;
mod error;
mod limit;
pub mod memory;
mod reply;
mod spec;

pub use authz::{ActionId, AttrValue, Authorized, Host, Resource, WorkerId};
pub use context::{CallContext, Decided, MAX_RECORDED_ID_CHARS};
pub use decode::{Validate, decode};
pub use effect::{Reads, TypedAction, Writes};
pub use error::{ErrorCode, ToolError};
pub use limit::{ByteSize, Bytes, Millis, Quantity, TimeLimit};
pub use reply::{
    Content, ERROR_META_KEY, Encoded, FACTS_META_KEY, NoOutput, Reply, encode, encode_text,
    encode_unstructured,
};
pub use spec::{
    Annotations, Audited, ConnectorSpec, OperationSpec, PermissionSpec, Platform, PlatformFlags,
    Status, ToolSpec,
};

/// A JSON object, as tool arguments arrive.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
