//! The typed model of `surface.toml`, and the checks that keep it publishable.
//!
//! Parsing happens in two steps: serde reads the file into `raw` structures that keep each
//! value's span, then [`Surface::parse`] checks every cross-reference and ChatGPT rule and
//! builds the validated model the emitters use. All problems are reported together.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;

use crate::diagnostics::{Diagnostic, Diagnostics, SourceMap};
pub use crate::vocabulary::{Annotations, Audited, Platform, ReplyShape, Status};

/// A validated surface: everything the emitters need, in declaration order.
#[derive(Debug, Clone)]
pub struct Surface {
    /// Permissions, in declaration order.
    pub permissions: Vec<Permission>,
    /// Connectors, in declaration order.
    pub connectors: Vec<Connector>,
    /// Cedar resource types (besides the implicit `Host`).
    pub resources: Vec<Resource>,
    /// Shared object types.
    pub types: Vec<ObjectType>,
    /// Tools, in declaration order.
    pub tools: Vec<Tool>,
    /// The error codes a call can end with, in declaration order (may be empty for a
    /// fixture surface; gantry's own declares the one list every crate uses).
    pub errors: Vec<ErrorDecl>,
    /// Files MCP clients read to decide which servers to start, as paths ending a path
    /// (`.cursor/mcp.json`): writing one needs a permission of its own.
    pub client_launch_files: Vec<String>,
}

/// One stable error code.
#[derive(Debug, Clone)]
pub struct ErrorDecl {
    /// SCREAMING_SNAKE_CASE, as clients see it.
    pub code: String,
    /// What it means.
    pub description: String,
    /// Whether a refusal can carry it: the policy engine's default denial is the first such
    /// code, and a policy's `@code(...)` may name any of them.
    pub denial: bool,
}

/// A permission the user can turn on or off.
#[derive(Debug, Clone)]
pub struct Permission {
    /// snake_case name.
    pub name: String,
    /// What turning it on allows.
    pub description: String,
    /// Whether read-only mode masks it.
    pub mutates: bool,
    /// Default on a fresh config, per platform (same order as [`Platform::ALL`]).
    pub default: [bool; 3],
    /// Where it can be effective at all.
    pub platforms: Vec<Platform>,
}

/// A connector: one endpoint, one secret, one discovery boundary.
#[derive(Debug, Clone)]
pub struct Connector {
    /// snake_case name.
    pub name: String,
    /// Human title.
    pub title: String,
    /// What it offers.
    pub description: String,
    /// Server instructions sent at initialization.
    pub instructions: String,
    /// Where it is published.
    pub platforms: Vec<Platform>,
    /// Most bytes its serialized tools/list may take.
    pub discovery_budget: usize,
    /// Worker agents started through it call its tools too, as `Worker` principals (each a
    /// child of its `Run`, which is a child of the connector).
    pub workers: bool,
    /// The tools a connection set to progressive disclosure lists until its first successful
    /// call (empty: it always lists every tool).
    pub first_tools: Vec<String>,
}

/// A Cedar resource type and its attributes.
#[derive(Debug, Clone)]
pub struct Resource {
    /// PascalCase entity type name.
    pub name: String,
    /// What it stands for.
    pub description: String,
    /// Attribute names and their Cedar types, in declaration order.
    pub attributes: Vec<(String, CedarType)>,
}

/// The Cedar attribute types a resource may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CedarType {
    /// `Bool`.
    Bool,
    /// `String`.
    String,
    /// `Long`.
    Long,
}

impl CedarType {
    /// The type's name in Cedar schema syntax.
    pub fn cedar_name(self) -> &'static str {
        match self {
            CedarType::Bool => "Bool",
            CedarType::String => "String",
            CedarType::Long => "Long",
        }
    }
}

/// A named object type shared by tools.
#[derive(Debug, Clone)]
pub struct ObjectType {
    /// PascalCase name; also the Rust struct name.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// Its fields.
    pub fields: Vec<Field>,
}

/// One property of an input, output or object type.
#[derive(Debug, Clone)]
pub struct Field {
    /// snake_case name.
    pub name: String,
    /// Its type.
    pub ty: FieldType,
    /// Whether it must be present.
    pub required: bool,
    /// What the model reads about it.
    pub description: Option<String>,
    /// Allowed string values.
    pub enum_values: Option<Vec<String>>,
    /// Documented default.
    pub default: Option<serde_json::Value>,
    /// Bounds.
    pub bounds: Bounds,
}

/// Numeric, length and size bounds of a field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounds {
    /// Smallest integer.
    pub minimum: Option<i64>,
    /// Largest integer.
    pub maximum: Option<i64>,
    /// Fewest characters.
    pub min_length: Option<u64>,
    /// Most characters.
    pub max_length: Option<u64>,
    /// Fewest array items.
    pub min_items: Option<u64>,
    /// Most array items.
    pub max_items: Option<u64>,
}

/// The type of a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    /// A string (or an enum of strings when the field has `enum`).
    String,
    /// A 64-bit integer.
    Integer,
    /// A boolean.
    Boolean,
    /// An object with string values and any keys.
    Map,
    /// An array of items.
    Array(ItemType),
    /// A named object type.
    Object(String),
}

/// The type of an array's items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemType {
    /// Strings.
    String,
    /// Integers.
    Integer,
    /// Objects of a named type.
    Object(String),
}

/// A sub-operation of a tool that is authorized on its own (a patch's file operations, a
/// desktop batch's steps).
#[derive(Debug, Clone)]
pub struct Operation {
    /// snake_case name.
    pub name: String,
    /// The one permission it needs.
    pub requires: String,
    /// What it does.
    pub description: String,
    /// The optional inputs it takes, when it names them: a call of it that gives any other
    /// is refused by name (so a call cannot seem to do what its operation ignores).
    pub takes: Option<Vec<String>>,
}

/// A limit's value, typed by how surface.toml writes it: a bare integer is a count,
/// `"256 KB"` a byte size (KB = 1024 bytes; also `bytes`, `MB`, `GB`), `"20 s"` a duration
/// (also `ms`, `min`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// How many of something.
    Count(u64),
    /// A size in bytes.
    Bytes(u64),
    /// A duration in milliseconds.
    Millis(u64),
}

impl Limit {
    /// Parses the string form (`"256 KB"`, `"250 ms"`).
    pub fn parse(text: &str) -> Result<Limit, String> {
        let (number, unit) = text
            .trim()
            .split_once(' ')
            .ok_or_else(|| format!("`{text}` is not `<number> <unit>`"))?;
        let n: u64 = number
            .parse()
            .map_err(|_| format!("`{number}` is not a whole number"))?;
        let scaled = |factor: u64| {
            n.checked_mul(factor)
                .ok_or_else(|| format!("`{text}` is too large"))
        };
        match unit {
            "bytes" => Ok(Limit::Bytes(n)),
            "KB" => scaled(1 << 10).map(Limit::Bytes),
            "MB" => scaled(1 << 20).map(Limit::Bytes),
            "GB" => scaled(1 << 30).map(Limit::Bytes),
            "ms" => Ok(Limit::Millis(n)),
            "s" => scaled(1000).map(Limit::Millis),
            "min" => scaled(60_000).map(Limit::Millis),
            other => Err(format!(
                "unknown unit `{other}` (use bytes, KB, MB, GB, ms, s or min)"
            )),
        }
    }

    /// The value in its base unit: items, bytes or milliseconds.
    pub fn base(self) -> u64 {
        match self {
            Limit::Count(n) | Limit::Bytes(n) | Limit::Millis(n) => n,
        }
    }
}

impl std::fmt::Display for Limit {
    /// The shortest exact form: `256 KB`, `16 MB`, `20 s`, `250 ms`, `64`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let exact = |n: u64, units: &[(u64, &str)]| {
            units
                .iter()
                .find(|(size, _)| n != 0 && n.is_multiple_of(*size))
                .map(|(size, unit)| format!("{} {unit}", n / size))
        };
        match *self {
            Limit::Count(n) => write!(f, "{n}"),
            Limit::Bytes(n) => f.write_str(
                &exact(n, &[(1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")])
                    .unwrap_or_else(|| format!("{n} bytes")),
            ),
            Limit::Millis(n) => f.write_str(
                &exact(n, &[(60_000, "min"), (1000, "s")]).unwrap_or_else(|| format!("{n} ms")),
            ),
        }
    }
}

/// Replaces each `{name}` naming one of `limits` in `text` with the limit's value, so prose
/// never restates a number; an unknown `{snake_case}` name is an error.
/// How many bytes of text a model token stands for, on average: the rate at which sizes are
/// quoted in tokens and token budgets become bytes.
pub const BYTES_PER_TOKEN: u64 = 4;

fn quote_limits(text: &str, limits: &[(String, Limit)]) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        let tokens = after[name_len..].starts_with(":tokens}");
        if name_len > 0 && (tokens || after[name_len..].starts_with('}')) {
            let name = &after[..name_len];
            let Some((_, limit)) = limits.iter().find(|(n, _)| n == name) else {
                return Err(format!("`{{{name}}}` names no limit of this tool"));
            };
            out.push_str(&limit.to_string());
            if tokens {
                let Limit::Bytes(b) = limit else {
                    return Err(format!(
                        "`{{{name}:tokens}}` quotes a limit that is not a size"
                    ));
                };
                let k = (b / BYTES_PER_TOKEN).div_ceil(1000);
                out.push_str(&format!(" (~{k}k tokens)"));
                rest = &after[name_len + ":tokens}".len()..];
            } else {
                rest = &after[name_len + 1..];
            }
        } else {
            out.push('{');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A tool, as the model sees it and as Cedar decides it.
#[derive(Debug, Clone)]
pub struct Tool {
    /// Its key in surface.toml, unique across connectors: Cedar action and schema file stem.
    pub id: String,
    /// The name its connector publishes (the id unless `name` says otherwise), unique within
    /// the connector. Its Rust form ([`Tool::rust_name`]) names the handler method.
    pub name: String,
    /// The connector that publishes it.
    pub connector: String,
    /// Human title.
    pub title: String,
    /// What the model reads.
    pub description: String,
    /// Permissions the call needs, all of them.
    pub requires: Vec<String>,
    /// Permissions whose being on hides the tool from discovery.
    pub unpublished_when: Vec<String>,
    /// Cedar resource types the tool's sub-requests use (besides `Host`).
    pub targets: Vec<String>,
    /// Whether a handler exists.
    pub status: Status,
    /// MCP annotations.
    pub annotations: Annotations,
    /// Where it is published.
    pub platforms: Vec<Platform>,
    /// Named limits, in declaration order. A description may quote one as `{name}`.
    pub limits: Vec<(String, Limit)>,
    /// Input properties.
    pub input: Vec<Field>,
    /// Output properties (those of `output_type` when the output is a shared type).
    pub output: Vec<Field>,
    /// The shared object type the output is, when several tools answer alike.
    pub output_type: Option<String>,
    /// Whether the output is `structuredContent` or facts beside a text rendering.
    pub reply: ReplyShape,
    /// Groups of inputs of which exactly one must be given.
    pub exactly_one_of: Vec<Vec<String>>,
    /// Groups of inputs of which at least one must be given.
    pub at_least_one_of: Vec<Vec<String>>,
    /// Separately authorized operations.
    pub operations: Vec<Operation>,
    /// Stands for the tools of upstream MCP servers: never listed itself, every call of a
    /// name its connector does not declare comes to its handler, decided by its action.
    pub upstream: bool,
    /// The inputs its audit line keeps as what the call attempted, and what they hold.
    pub audited: Vec<(String, Audited)>,
    /// The tool of another connector this one carries to another machine: the published
    /// name it has there. Its inputs are this tool's own (the machine) and then that tool's.
    pub relays: Option<String>,
}

impl Tool {
    /// The published name as a Rust identifier stem: `.` and `-` become `_`.
    pub fn rust_name(&self) -> String {
        rust_stem(&self.name)
    }

    /// Every permission the tool can need: its own and its operations'.
    pub fn all_permissions(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.requires.iter().map(String::as_str).collect();
        for op in &self.operations {
            if !out.contains(&op.requires.as_str()) {
                out.push(&op.requires);
            }
        }
        out
    }
}

mod raw {
    //! The file as serde reads it, spans kept for diagnostics.

    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct File {
        pub permissions: IndexMap<Spanned<String>, RawPermission>,
        pub connectors: IndexMap<Spanned<String>, RawConnector>,
        #[serde(default)]
        pub resources: IndexMap<Spanned<String>, RawResource>,
        #[serde(default)]
        pub types: IndexMap<Spanned<String>, RawType>,
        pub tools: IndexMap<Spanned<String>, RawTool>,
        #[serde(default)]
        pub errors: IndexMap<Spanned<String>, RawError>,
        #[serde(default)]
        pub client_launch_files: Vec<Spanned<String>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawError {
        pub description: Option<Spanned<String>>,
        #[serde(default)]
        pub denial: bool,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawPermission {
        pub description: Option<Spanned<String>>,
        pub mutates: bool,
        pub default: PlatformFlags,
        pub platforms: Option<Vec<Platform>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct PlatformFlags {
        pub windows: bool,
        pub macos: bool,
        pub linux: bool,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawConnector {
        pub title: String,
        pub description: Option<Spanned<String>>,
        pub instructions: String,
        pub platforms: Vec<Platform>,
        pub discovery_budget: usize,
        #[serde(default)]
        pub workers: bool,
        #[serde(default)]
        pub first_tools: Vec<Spanned<String>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawResource {
        pub description: Option<Spanned<String>>,
        pub attributes: IndexMap<Spanned<String>, Spanned<String>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawType {
        pub description: Option<Spanned<String>>,
        pub fields: IndexMap<Spanned<String>, RawField>,
    }

    #[derive(Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawField {
        #[serde(rename = "type")]
        pub ty: Spanned<String>,
        pub items: Option<Spanned<String>>,
        #[serde(default)]
        pub required: bool,
        pub description: Option<String>,
        #[serde(rename = "enum")]
        pub enum_values: Option<Spanned<Vec<String>>>,
        pub default: Option<Spanned<toml::Value>>,
        pub minimum: Option<Spanned<RawBound>>,
        pub maximum: Option<Spanned<RawBound>>,
        pub min_length: Option<Spanned<RawBound>>,
        pub max_length: Option<Spanned<RawBound>>,
        pub min_items: Option<Spanned<RawBound>>,
        pub max_items: Option<Spanned<RawBound>>,
    }

    /// A bound as written: a number, or `"{limit}"` naming one of the tool's count limits.
    #[derive(Clone, Deserialize)]
    #[serde(untagged)]
    pub(super) enum RawBound {
        Number(i64),
        Limit(String),
    }

    /// A limit as written: a count, or a string with a unit.
    #[derive(Clone, Deserialize)]
    #[serde(untagged)]
    pub(super) enum RawLimit {
        Count(u64),
        Text(String),
    }

    #[derive(Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawTool {
        pub name: Option<Spanned<String>>,
        pub connector: Spanned<String>,
        /// Required, unless the tool relays another (then that one's is the default).
        pub title: Option<String>,
        pub description: Option<Spanned<String>>,
        #[serde(default)]
        pub requires: Vec<Spanned<String>>,
        #[serde(default)]
        pub unpublished_when: Vec<Spanned<String>>,
        #[serde(default)]
        pub targets: Vec<Spanned<String>>,
        pub status: Option<Spanned<String>>,
        pub annotations: Option<RawAnnotations>,
        pub platforms: Option<Spanned<Vec<Platform>>>,
        #[serde(default)]
        pub limits: IndexMap<String, Spanned<RawLimit>>,
        #[serde(default)]
        pub input: IndexMap<Spanned<String>, RawField>,
        #[serde(default)]
        pub output: IndexMap<Spanned<String>, RawField>,
        pub output_type: Option<Spanned<String>>,
        pub reply: Option<Spanned<String>>,
        #[serde(default)]
        pub exactly_one_of: Vec<Vec<Spanned<String>>>,
        #[serde(default)]
        pub at_least_one_of: Vec<Vec<Spanned<String>>>,
        #[serde(default)]
        pub operations: IndexMap<Spanned<String>, RawOperation>,
        #[serde(default)]
        pub upstream: bool,
        #[serde(default)]
        pub audited: IndexMap<Spanned<String>, Audited>,
        pub relays: Option<Spanned<String>>,
    }

    #[derive(Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawAnnotations {
        pub read_only: bool,
        pub destructive: bool,
        pub idempotent: bool,
        pub open_world: bool,
    }

    #[derive(Clone, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawOperation {
        pub requires: Spanned<String>,
        pub description: String,
        pub takes: Option<Vec<Spanned<String>>>,
    }
}

/// JSON Schema keywords a field might be tempted to carry that ChatGPT's connector refuses or
/// that this DSL does not model; named so the error can say why.
const REJECTED_KEYWORDS: &[(&str, &str)] = &[
    (
        "anyOf",
        "ChatGPT rejects anyOf/oneOf/allOf; use `exactly_one_of` on the tool instead",
    ),
    (
        "oneOf",
        "ChatGPT rejects anyOf/oneOf/allOf; use `exactly_one_of` on the tool instead",
    ),
    (
        "allOf",
        "ChatGPT rejects anyOf/oneOf/allOf; declare the fields directly",
    ),
    (
        "$ref",
        "remote or explicit $ref is not allowed; name a type from [types] in `type`",
    ),
    ("not", "`not` is not supported by ChatGPT's schema subset"),
    (
        "prefixItems",
        "tuple arrays are rejected by ChatGPT; use `items` with one type",
    ),
    (
        "additionalProperties",
        "inputs are always closed (additionalProperties: false)",
    ),
    (
        "patternProperties",
        "not supported by ChatGPT's schema subset",
    ),
    (
        "if",
        "conditional schemas are not supported by ChatGPT's schema subset",
    ),
];

/// Cedar keywords and names that cannot be record attribute identifiers in schemas.
const CEDAR_RESERVED: &[&str] = &[
    "true", "false", "if", "then", "else", "in", "is", "like", "has", "__cedar",
];

fn tool_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.starts_with(|c: char| c.is_ascii_lowercase())
}

/// A published name: what MCP clients accept (`[A-Za-z0-9_.-]`, at most 64), starting with a
/// letter so its Rust form is an identifier.
fn published_name_ok(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn rust_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c == '.' || c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

fn pascal_ok(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
}

struct Checker<'a> {
    map: SourceMap<'a>,
    out: Vec<Diagnostic>,
}

impl Checker<'_> {
    fn error(&mut self, span: Range<usize>, message: impl Into<String>, hint: Option<String>) {
        self.out.push(self.map.diagnostic(span, message, hint));
    }
}

/// Fills each tool that `relays` another (by id) from that one: its title, description,
/// annotations, limits, output and reply unless it sets its own, its inputs after the
/// relaying tool's own, its input groups and audited inputs beside them. Returns the
/// published name of each relayed tool, by id.
fn inherit_relayed(
    ck: &mut Checker<'_>,
    tools: &mut IndexMap<Spanned<String>, raw::RawTool>,
) -> BTreeMap<String, String> {
    let originals: Vec<(String, raw::RawTool)> = tools
        .iter()
        .map(|(k, t)| (k.get_ref().clone(), t.clone()))
        .collect();
    let mut names = BTreeMap::new();
    for (key, t) in tools.iter_mut() {
        let Some(relayed) = t.relays.clone() else {
            continue;
        };
        let Some((_, from)) = originals.iter().find(|(id, _)| id == relayed.get_ref()) else {
            ck.error(
                relayed.span(),
                format!(
                    "tool `{}` relays unknown tool `{}`",
                    key.get_ref(),
                    relayed.get_ref()
                ),
                Some("name another tool's id (its key under [tools])".into()),
            );
            continue;
        };
        if from.relays.is_some() || from.upstream || t.upstream {
            ck.error(
                relayed.span(),
                format!(
                    "tool `{}` relays `{}`, which relays or stands for other tools",
                    key.get_ref(),
                    relayed.get_ref()
                ),
                None,
            );
            continue;
        }
        names.insert(
            relayed.get_ref().clone(),
            from.name
                .as_ref()
                .map_or_else(|| relayed.get_ref().clone(), |n| n.get_ref().clone()),
        );
        t.title = t.title.take().or_else(|| from.title.clone());
        t.description = t.description.take().or_else(|| from.description.clone());
        t.annotations = t.annotations.take().or_else(|| from.annotations.clone());
        if t.reply.is_none() {
            t.reply.clone_from(&from.reply);
        }
        if t.output.is_empty() && t.output_type.is_none() {
            t.output.clone_from(&from.output);
            t.output_type.clone_from(&from.output_type);
        }
        for (name, limit) in &from.limits {
            t.limits
                .entry(name.clone())
                .or_insert_with(|| limit.clone());
        }
        for (name, field) in &from.input {
            if t.input.keys().any(|k| k.get_ref() == name.get_ref()) {
                ck.error(
                    name.span(),
                    format!(
                        "tool `{}` declares input `{}`, which the tool it relays has too",
                        key.get_ref(),
                        name.get_ref()
                    ),
                    None,
                );
                continue;
            }
            t.input.insert(name.clone(), field.clone());
        }
        t.exactly_one_of.extend(from.exactly_one_of.iter().cloned());
        t.at_least_one_of
            .extend(from.at_least_one_of.iter().cloned());
        for (name, kind) in &from.audited {
            t.audited.entry(name.clone()).or_insert(*kind);
        }
    }
    names
}

fn known_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

impl Surface {
    /// Parses and validates the surface file `text`; `file` names it in diagnostics.
    pub fn parse(file: &str, text: &str) -> Result<Surface, Diagnostics> {
        let map = SourceMap::new(file, text);
        let raw: raw::File = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let message = e.message().trim().to_string();
            let hint = REJECTED_KEYWORDS
                .iter()
                .find(|(kw, _)| message.contains(&format!("unknown field `{kw}`")))
                .map(|(_, why)| (*why).to_string());
            Diagnostics(vec![map.diagnostic(span, message, hint)])
        })?;
        let mut ck = Checker {
            map,
            out: Vec::new(),
        };
        let surface = build(&mut ck, raw);
        if ck.out.is_empty() {
            Ok(surface)
        } else {
            Err(Diagnostics(ck.out))
        }
    }

    /// The connector named `name`.
    pub fn connector(&self, name: &str) -> Option<&Connector> {
        self.connectors.iter().find(|c| c.name == name)
    }

    /// The tools a connector publishes, in declaration order.
    pub fn tools_of<'s>(&'s self, connector: &'s str) -> impl Iterator<Item = &'s Tool> + 's {
        self.tools.iter().filter(move |t| t.connector == connector)
    }

    /// The object type named `name`.
    pub fn object_type(&self, name: &str) -> Option<&ObjectType> {
        self.types.iter().find(|t| t.name == name)
    }

    /// The permission named `name`.
    pub fn permission(&self, name: &str) -> Option<&Permission> {
        self.permissions.iter().find(|p| p.name == name)
    }
}

fn build(ck: &mut Checker<'_>, raw: raw::File) -> Surface {
    let permission_names: Vec<String> = raw
        .permissions
        .keys()
        .map(|k| k.get_ref().clone())
        .collect();
    let permissions = raw
        .permissions
        .into_iter()
        .map(|(name, p)| {
            let description = named_item(ck, &name, p.description, "permission");
            Permission {
                name: name.into_inner(),
                description,
                mutates: p.mutates,
                default: [p.default.windows, p.default.macos, p.default.linux],
                platforms: p.platforms.unwrap_or_else(|| Platform::ALL.to_vec()),
            }
        })
        .collect::<Vec<_>>();

    let mut first_tools: Vec<(String, Spanned<String>)> = Vec::new();
    let connectors = raw
        .connectors
        .into_iter()
        .map(|(name, c)| {
            let description = named_item(ck, &name, c.description, "connector");
            first_tools.extend(
                c.first_tools
                    .iter()
                    .map(|t| (name.get_ref().clone(), t.clone())),
            );
            Connector {
                name: name.into_inner(),
                title: c.title,
                description,
                instructions: c.instructions,
                platforms: c.platforms,
                discovery_budget: c.discovery_budget,
                workers: c.workers,
                first_tools: c.first_tools.into_iter().map(Spanned::into_inner).collect(),
            }
        })
        .collect::<Vec<_>>();

    let resources = raw
        .resources
        .into_iter()
        .map(|(name, r)| {
            if !pascal_ok(name.get_ref())
                || name.get_ref() == "Host"
                || name.get_ref() == "Connector"
            {
                ck.error(
                    name.span(),
                    format!(
                        "resource `{}` must be a PascalCase name other than Host and Connector",
                        name.get_ref()
                    ),
                    Some(
                        "Host (the whole computer) and Connector (the principal) are built in"
                            .into(),
                    ),
                );
            }
            let description =
                required_description(ck, r.description, name.span(), "resource", name.get_ref());
            let attributes = r
                .attributes
                .into_iter()
                .filter_map(|(attr, ty)| {
                    if !tool_name_ok(attr.get_ref())
                        || CEDAR_RESERVED.contains(&attr.get_ref().as_str())
                    {
                        ck.error(
                            attr.span(),
                            format!(
                                "attribute `{}` is not a usable Cedar identifier",
                                attr.get_ref()
                            ),
                            None,
                        );
                    }
                    let cedar = match ty.get_ref().as_str() {
                        "Bool" => CedarType::Bool,
                        "String" => CedarType::String,
                        "Long" => CedarType::Long,
                        other => {
                            ck.error(
                                ty.span(),
                                format!("unknown Cedar attribute type `{other}`"),
                                Some("use Bool, String or Long".into()),
                            );
                            return None;
                        }
                    };
                    Some((attr.into_inner(), cedar))
                })
                .collect();
            Resource {
                name: name.into_inner(),
                description,
                attributes,
            }
        })
        .collect::<Vec<_>>();

    let type_names: BTreeSet<String> = raw.types.keys().map(|k| k.get_ref().clone()).collect();
    let types = raw
        .types
        .into_iter()
        .map(|(name, t)| {
            if !pascal_ok(name.get_ref()) {
                ck.error(
                    name.span(),
                    format!("type name `{}` must be PascalCase", name.get_ref()),
                    None,
                );
            }
            let description =
                required_description(ck, t.description, name.span(), "type", name.get_ref());
            let fields = build_fields(ck, t.fields, &type_names, &[]);
            ObjectType {
                name: name.into_inner(),
                description,
                fields,
            }
        })
        .collect::<Vec<_>>();
    check_type_cycles(ck, &types);

    let mut tools = Vec::new();
    let mut seen_ids = BTreeSet::new();
    let mut seen_names = BTreeSet::new();
    let mut raw_tools = raw.tools;
    let relayed_names = inherit_relayed(ck, &mut raw_tools);
    for (key, t) in raw_tools {
        let span = key.span();
        let id = key.into_inner();
        if !tool_name_ok(&id) {
            ck.error(
                span.clone(),
                format!("tool id `{id}` must match ^[a-z][a-z0-9_]{{0,63}}$"),
                Some("the id is the tool's Cedar action and schema file stem; publish another name with `name = \"...\"`".into()),
            );
        }
        if !seen_ids.insert(id.to_ascii_lowercase()) {
            ck.error(
                span.clone(),
                format!("duplicate tool id `{id}`"),
                Some("every tool id must be unique across connectors".into()),
            );
        }
        let tname = match &t.name {
            Some(n) => {
                if !published_name_ok(n.get_ref()) {
                    ck.error(
                        n.span(),
                        format!("tool name `{}` must match ^[A-Za-z][A-Za-z0-9_.-]{{0,63}}$", n.get_ref()),
                        Some("MCP clients accept letters, digits, `_`, `-` and `.`; claude.ai refuses `.`".into()),
                    );
                }
                n.get_ref().clone()
            }
            None => id.clone(),
        };
        let connector = t.connector.get_ref().clone();
        if !seen_names.insert((connector.clone(), rust_stem(&tname))) {
            ck.error(
                t.name.as_ref().map_or(span.clone(), Spanned::span),
                format!("connector `{connector}` publishes two tools named `{tname}` (or names alike once `.` and `-` read as `_`)"),
                Some("a name must be unique within its connector".into()),
            );
        }
        let conn = connectors.iter().find(|c| c.name == connector);
        if conn.is_none() {
            ck.error(
                t.connector.span(),
                format!("tool `{id}` names unknown connector `{connector}`"),
                Some(format!(
                    "known connectors: {}",
                    known_list(connectors.iter().map(|c| c.name.as_str()))
                )),
            );
        }
        let description = required_description(ck, t.description, span.clone(), "tool", &id);
        let check_perm = |ck: &mut Checker<'_>, p: &Spanned<String>| {
            if !permission_names.contains(p.get_ref()) {
                ck.error(
                    p.span(),
                    format!("tool `{id}` names unknown permission `{}`", p.get_ref()),
                    Some(format!(
                        "known permissions: {}",
                        known_list(permission_names.iter().map(String::as_str))
                    )),
                );
            }
        };
        for p in t.requires.iter().chain(&t.unpublished_when) {
            check_perm(ck, p);
        }
        for target in &t.targets {
            if !resources.iter().any(|r| &r.name == target.get_ref()) {
                ck.error(
                    target.span(),
                    format!(
                        "tool `{id}` targets unknown resource `{}`",
                        target.get_ref()
                    ),
                    Some(format!(
                        "declared resources: {}",
                        known_list(resources.iter().map(|r| r.name.as_str()))
                    )),
                );
            }
        }
        let status = match t.status.as_ref().map(|s| s.get_ref().as_str()) {
            None | Some("ready") => Status::Ready,
            Some("planned") => Status::Planned,
            Some(other) => {
                let s = t.status.as_ref().map_or(span.clone(), Spanned::span);
                ck.error(
                    s,
                    format!("unknown status `{other}`"),
                    Some("use `ready` or `planned`".into()),
                );
                Status::Ready
            }
        };
        let reply = match t.reply.as_ref().map(|s| s.get_ref().as_str()) {
            None | Some("structured") => ReplyShape::Structured,
            Some("text") => ReplyShape::Text,
            Some(other) => {
                let s = t.reply.as_ref().map_or(span.clone(), Spanned::span);
                ck.error(
                    s,
                    format!("unknown reply shape `{other}`"),
                    Some("use `structured` or `text`".into()),
                );
                ReplyShape::Structured
            }
        };
        let platforms = match &t.platforms {
            Some(p) => {
                if let Some(conn) = conn {
                    for platform in p.get_ref() {
                        if !conn.platforms.contains(platform) {
                            ck.error(
                                p.span(),
                                format!("tool `{id}` lists {} but connector `{}` is not published there", platform.name(), conn.name),
                                None,
                            );
                        }
                    }
                }
                p.get_ref().clone()
            }
            None => conn.map(|c| c.platforms.clone()).unwrap_or_default(),
        };
        let mut audited = Vec::new();
        for (name, kind) in t.audited {
            if !t.input.keys().any(|k| k.get_ref() == name.get_ref()) {
                ck.error(
                    name.span(),
                    format!("tool `{id}` audits unknown input `{}`", name.get_ref()),
                    Some(format!(
                        "name an input of tool `{id}` ({})",
                        known_list(t.input.keys().map(|k| k.get_ref().as_str()))
                    )),
                );
            }
            audited.push((name.into_inner(), kind));
        }
        let mut operations = Vec::new();
        for (op, o) in t.operations {
            if !tool_name_ok(op.get_ref()) {
                ck.error(
                    op.span(),
                    format!("operation `{}` must be snake_case", op.get_ref()),
                    None,
                );
            }
            check_perm(ck, &o.requires);
            let takes = o.takes.map(|names| {
                names
                    .into_iter()
                    .map(|n| {
                        let field = t.input.iter().find(|(k, _)| k.get_ref() == n.get_ref());
                        match field {
                            Some((_, f)) if !f.required => {}
                            Some(_) => ck.error(
                                n.span(),
                                format!(
                                    "operation `{}` takes `{}`, a required input",
                                    op.get_ref(),
                                    n.get_ref()
                                ),
                                Some(
                                    "`takes` lists optional inputs: a required one is always given"
                                        .into(),
                                ),
                            ),
                            None => ck.error(
                                n.span(),
                                format!(
                                    "operation `{}` takes unknown input `{}`",
                                    op.get_ref(),
                                    n.get_ref()
                                ),
                                Some(format!(
                                    "name an input of tool `{id}` ({})",
                                    known_list(t.input.keys().map(|k| k.get_ref().as_str()))
                                )),
                            ),
                        }
                        n.into_inner()
                    })
                    .collect()
            });
            operations.push(Operation {
                name: op.into_inner(),
                requires: o.requires.into_inner(),
                description: o.description,
                takes,
            });
        }
        // A tool nobody can turn off would bypass the permission model.
        if t.requires.is_empty() && operations.is_empty() {
            ck.error(
                span.clone(),
                format!("tool `{id}` needs no permission"),
                Some("set `requires` or declare `operations`, so the user can turn it off".into()),
            );
        }
        let mut limits = Vec::new();
        for (name, value) in t.limits {
            let limit = match value.get_ref() {
                raw::RawLimit::Count(n) => Ok(Limit::Count(*n)),
                raw::RawLimit::Text(text) => Limit::parse(text),
            };
            match limit {
                Ok(l) => limits.push((name, l)),
                Err(e) => ck.error(
                    value.span(),
                    format!("limit `{name}` of tool `{id}`: {e}"),
                    Some("write a count as a bare integer, a size as \"256 KB\", a duration as \"20 s\"".into()),
                ),
            }
        }
        let mut input = build_fields_explained(ck, t.input, &type_names, &limits, &description);
        let has_inline_output = !t.output.is_empty();
        let mut output = build_fields(ck, t.output, &type_names, &limits);
        let output_type = t.output_type.map(|name| {
            if has_inline_output {
                ck.error(
                    name.span(),
                    format!("tool `{id}` declares both `output_type` and `output` fields"),
                    Some("keep one: the shared type, or the tool's own fields".into()),
                );
            }
            match types.iter().find(|ty| &ty.name == name.get_ref()) {
                Some(ty) => output.clone_from(&ty.fields),
                None => ck.error(
                    name.span(),
                    format!("tool `{id}` has unknown `output_type` `{}`", name.get_ref()),
                    Some(format!(
                        "declare it under [types] ({})",
                        known_list(types.iter().map(|t| t.name.as_str()))
                    )),
                ),
            }
            name.into_inner()
        });
        let mut quote = |text: String, span: &Range<usize>| match quote_limits(&text, &limits) {
            Ok(t) => t,
            Err(e) => {
                ck.error(span.clone(), format!("tool `{id}`: {e}"), None);
                text
            }
        };
        let description = quote(description, &span);
        for f in input.iter_mut().chain(output.iter_mut()) {
            f.description = f.description.take().map(|d| quote(d, &span));
        }
        let mut groups = |raw: Vec<Vec<Spanned<String>>>, what: &str| -> Vec<Vec<String>> {
            raw.into_iter()
                .map(|g| {
                    for f in &g {
                        match input.iter().find(|i| &i.name == f.get_ref()) {
                            None => ck.error(
                                f.span(),
                                format!("`{what}` names unknown input `{}`", f.get_ref()),
                                None,
                            ),
                            Some(i) if i.required => ck.error(
                                f.span(),
                                format!("`{what}` names required input `{}`", f.get_ref()),
                                Some("fields in such a group must be optional".into()),
                            ),
                            Some(_) => {}
                        }
                    }
                    g.into_iter().map(Spanned::into_inner).collect()
                })
                .collect()
        };
        let exactly_one_of = groups(t.exactly_one_of, "exactly_one_of");
        let at_least_one_of = groups(t.at_least_one_of, "at_least_one_of");
        let annotations = match &t.annotations {
            Some(a) => Annotations {
                read_only: a.read_only,
                destructive: a.destructive,
                idempotent: a.idempotent,
                open_world: a.open_world,
            },
            None => {
                ck.error(
                    span.clone(),
                    format!("tool `{id}` has no `annotations`"),
                    None,
                );
                Annotations {
                    read_only: false,
                    destructive: true,
                    idempotent: false,
                    open_world: true,
                }
            }
        };
        let title = t.title.clone().unwrap_or_else(|| {
            ck.error(span.clone(), format!("tool `{id}` has no `title`"), None);
            String::new()
        });
        let relays = t
            .relays
            .as_ref()
            .and_then(|r| relayed_names.get(r.get_ref()).cloned());
        if relays.is_some() && !operations.is_empty() {
            ck.error(
                span.clone(),
                format!("relaying tool `{id}` declares operations"),
                Some("the other machine decides the relayed tool's operations".into()),
            );
        }
        if t.upstream {
            if !input.is_empty() || !output.is_empty() || !operations.is_empty() {
                ck.error(
                    span.clone(),
                    format!("upstream tool `{id}` declares inputs, outputs or operations"),
                    Some("its calls carry the upstream tools' own arguments and results".into()),
                );
            }
            if tools
                .iter()
                .any(|o: &Tool| o.upstream && o.connector == connector)
            {
                ck.error(
                    span.clone(),
                    format!("connector `{connector}` has a second upstream tool `{id}`"),
                    None,
                );
            }
        }
        let tool = Tool {
            id,
            name: tname,
            connector,
            title,
            description,
            requires: t.requires.into_iter().map(Spanned::into_inner).collect(),
            unpublished_when: t
                .unpublished_when
                .into_iter()
                .map(Spanned::into_inner)
                .collect(),
            targets: t.targets.into_iter().map(Spanned::into_inner).collect(),
            status,
            annotations,
            platforms,
            limits,
            input,
            output,
            output_type,
            reply,
            exactly_one_of,
            at_least_one_of,
            operations,
            upstream: t.upstream,
            audited,
            relays,
        };
        // A tool that says it only reads must not need a permission that mutates.
        if tool.annotations.read_only {
            for p in tool.all_permissions() {
                if permissions.iter().any(|q| q.name == p && q.mutates) {
                    ck.error(
                        span.clone(),
                        format!("tool `{}` claims readOnlyHint but needs mutating permission `{p}`", tool.id),
                        Some("ChatGPT skips confirmation for read-only tools; do not let a write tool pretend".into()),
                    );
                }
            }
        }
        tools.push(tool);
    }
    let errors = raw
        .errors
        .into_iter()
        .map(|(code, e)| {
            // A leading letter: the code becomes a Rust variant (`404_GONE` could not).
            let screaming = code.get_ref().starts_with(|c: char| c.is_ascii_uppercase())
                && code
                    .get_ref()
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !screaming {
                ck.error(
                    code.span(),
                    format!(
                        "error code `{}` must be SCREAMING_SNAKE_CASE",
                        code.get_ref()
                    ),
                    None,
                );
            }
            let description =
                required_description(ck, e.description, code.span(), "error code", code.get_ref());
            ErrorDecl {
                code: code.into_inner(),
                description,
                denial: e.denial,
            }
        })
        .collect::<Vec<_>>();
    if !errors.is_empty() && !errors.iter().any(|e| e.denial) {
        ck.error(
            0..0,
            "[errors] declares no code with `denial = true`",
            Some(
                "refusals need a code: mark PERMISSION_DENIED (the first denial is the default)"
                    .into(),
            ),
        );
    }

    for (connector, tool) in &first_tools {
        if !tools
            .iter()
            .any(|t| t.name == *tool.get_ref() && t.connector == *connector)
        {
            ck.error(
                tool.span(),
                format!(
                    "first_tools of connector `{connector}` names `{}`, which is not one of its tools",
                    tool.get_ref()
                ),
                None,
            );
        }
    }

    let client_launch_files = raw
        .client_launch_files
        .into_iter()
        .map(|f| {
            let ok = !f.get_ref().is_empty()
                && !f.get_ref().starts_with('/')
                && f.get_ref()
                    .split('/')
                    .all(|c| !c.is_empty() && c != "." && c != "..");
            if !ok {
                ck.error(
                    f.span(),
                    format!(
                        "client launch file `{}` is not a relative path",
                        f.get_ref()
                    ),
                    Some("write the end of a path, `/`-separated: `.cursor/mcp.json`".into()),
                );
            }
            f.into_inner()
        })
        .collect();

    Surface {
        permissions,
        connectors,
        resources,
        types,
        tools,
        errors,
        client_launch_files,
    }
}

/// Checks a snake_case name and its required description; returns the description.
fn named_item(
    ck: &mut Checker<'_>,
    name: &Spanned<String>,
    description: Option<Spanned<String>>,
    what: &str,
) -> String {
    if !tool_name_ok(name.get_ref()) {
        ck.error(
            name.span(),
            format!("{what} name `{}` must be snake_case ASCII", name.get_ref()),
            None,
        );
    } else if name.get_ref() == "self" {
        // Its Rust variant or module would be the keyword `Self`/`self`.
        ck.error(
            name.span(),
            format!("{what} name `self` is reserved in the generated Rust"),
            None,
        );
    }
    required_description(ck, description, name.span(), what, name.get_ref())
}

fn required_description(
    ck: &mut Checker<'_>,
    d: Option<Spanned<String>>,
    owner: Range<usize>,
    what: &str,
    name: &str,
) -> String {
    match d {
        Some(d) if !d.get_ref().trim().is_empty() => d.into_inner(),
        Some(d) => {
            ck.error(
                d.span(),
                format!("{what} `{name}` has an empty description"),
                None,
            );
            String::new()
        }
        None => {
            ck.error(
                owner,
                format!("{what} `{name}` is missing a description"),
                Some("the description is what the model (or the user) reads; add `description = \"...\"`".into()),
            );
            String::new()
        }
    }
}

/// A bound's value: a number as written, or the count limit it names as `"{name}"`.
fn resolve_bound(
    ck: &mut Checker<'_>,
    bound: Option<Spanned<raw::RawBound>>,
    limits: &[(String, Limit)],
    field: &str,
) -> Option<i64> {
    let bound = bound?;
    let span = bound.span();
    match bound.into_inner() {
        raw::RawBound::Number(n) => Some(n),
        raw::RawBound::Limit(text) => {
            let name = text.strip_prefix('{').and_then(|t| t.strip_suffix('}'));
            match limits.iter().find(|(n, _)| Some(n.as_str()) == name) {
                Some((_, Limit::Count(n))) => i64::try_from(*n).ok(),
                _ => {
                    ck.error(
                        span,
                        format!("bound `{text}` of `{field}` names no count limit of this tool"),
                        Some(
                            "write a number, or \"{name}\" for a bare-integer limit in `limits`"
                                .into(),
                        ),
                    );
                    None
                }
            }
        }
    }
}

fn build_fields_explained(
    ck: &mut Checker<'_>,
    raw: IndexMap<Spanned<String>, raw::RawField>,
    type_names: &BTreeSet<String>,
    limits: &[(String, Limit)],
    tool_description: &str,
) -> Vec<Field> {
    // An input needs its own description unless the tool's description already names it in
    // backticks: the model reads both, and saying it twice costs discovery bytes.
    let spans: Vec<(String, Range<usize>, bool)> = raw
        .iter()
        .map(|(n, f)| {
            let described = f.description.as_ref().is_some_and(|d| !d.trim().is_empty());
            (n.get_ref().clone(), n.span(), described)
        })
        .collect();
    let fields = build_fields(ck, raw, type_names, limits);
    for (name, span, described) in spans {
        if !described && !tool_description.contains(&format!("`{name}`")) {
            ck.error(
                span,
                format!("input `{name}` is missing a description"),
                Some(format!(
                    "the model reads it to fill the argument in; add `description = \"...\"`, or name it as `{name}` in the tool's description"
                )),
            );
        }
    }
    fields
}

fn build_fields(
    ck: &mut Checker<'_>,
    raw: IndexMap<Spanned<String>, raw::RawField>,
    type_names: &BTreeSet<String>,
    limits: &[(String, Limit)],
) -> Vec<Field> {
    let mut fields = Vec::new();
    for (name, f) in raw {
        let fname = name.get_ref().clone();
        if !tool_name_ok(&fname) {
            ck.error(
                name.span(),
                format!("field `{fname}` must be snake_case ASCII"),
                None,
            );
        }
        let unknown_type = |ck: &mut Checker<'_>, s: &Spanned<String>| {
            ck.error(
                s.span(),
                format!("field `{fname}` has unknown type `{}`", s.get_ref()),
                Some(format!(
                    "use string, integer, boolean, map, array or a type from [types] ({})",
                    known_list(type_names.iter().map(String::as_str))
                )),
            );
        };
        let ty = match f.ty.get_ref().as_str() {
            "string" => FieldType::String,
            "integer" => FieldType::Integer,
            "boolean" => FieldType::Boolean,
            "map" => FieldType::Map,
            "number" => {
                ck.error(
                    f.ty.span(),
                    format!("field `{fname}` is a float"),
                    Some("Cedar has no floats and limits are whole numbers; use integer".into()),
                );
                FieldType::Integer
            }
            "array" => match &f.items {
                None => {
                    ck.error(
                        f.ty.span(),
                        format!("array `{fname}` has no `items`"),
                        Some("ChatGPT requires `items` on every array".into()),
                    );
                    FieldType::Array(ItemType::String)
                }
                Some(items) => FieldType::Array(match items.get_ref().as_str() {
                    "string" => ItemType::String,
                    "integer" => ItemType::Integer,
                    t if type_names.contains(t) => ItemType::Object(t.to_string()),
                    _ => {
                        unknown_type(ck, items);
                        ItemType::String
                    }
                }),
            },
            t if type_names.contains(t) => FieldType::Object(t.to_string()),
            _ => {
                unknown_type(ck, &f.ty);
                FieldType::String
            }
        };
        if f.items.is_some() && !matches!(ty, FieldType::Array(_)) {
            ck.error(
                name.span(),
                format!("field `{fname}` has `items` but is not an array"),
                None,
            );
        }
        let description = f.description.filter(|d| !d.trim().is_empty());
        let enum_values = f.enum_values.map(|e| {
            if ty != FieldType::String {
                ck.error(
                    e.span(),
                    format!("`enum` on `{fname}` needs type = \"string\""),
                    None,
                );
            }
            let values = e.get_ref().clone();
            if values.is_empty() || values.iter().any(|v| !tool_name_ok(v)) {
                ck.error(
                    e.span(),
                    format!("enum values of `{fname}` must be non-empty snake_case names"),
                    None,
                );
            }
            values
        });
        let default = f.default.map(|d| {
            let span = d.span();
            let value = d.into_inner();
            let ok = match (&ty, &value) {
                (FieldType::String, toml::Value::String(s)) => {
                    enum_values.as_ref().is_none_or(|e| e.contains(s))
                }
                (FieldType::Integer, toml::Value::Integer(_))
                | (FieldType::Boolean, toml::Value::Boolean(_)) => true,
                _ => false,
            };
            if !ok {
                ck.error(
                    span,
                    format!("default of `{fname}` does not match its type"),
                    None,
                );
            }
            serde_json::to_value(&value).unwrap_or(serde_json::Value::Null)
        });
        let mut length = |b| {
            let n = resolve_bound(ck, b, limits, &fname)?;
            u64::try_from(n).ok().or_else(|| {
                ck.error(
                    name.span(),
                    format!("field `{fname}` has a negative length or item bound"),
                    None,
                );
                None
            })
        };
        let (min_length, max_length) = (length(f.min_length), length(f.max_length));
        let (min_items, max_items) = (length(f.min_items), length(f.max_items));
        let bounds = Bounds {
            min_length,
            max_length,
            min_items,
            max_items,
            minimum: resolve_bound(ck, f.minimum, limits, &fname),
            maximum: resolve_bound(ck, f.maximum, limits, &fname),
        };
        let misplaced = match ty {
            FieldType::Integer => {
                bounds.min_length.is_some()
                    || bounds.max_length.is_some()
                    || bounds.min_items.is_some()
                    || bounds.max_items.is_some()
            }
            FieldType::String => {
                bounds.minimum.is_some()
                    || bounds.maximum.is_some()
                    || bounds.min_items.is_some()
                    || bounds.max_items.is_some()
            }
            FieldType::Array(_) => {
                bounds.minimum.is_some()
                    || bounds.maximum.is_some()
                    || bounds.min_length.is_some()
                    || bounds.max_length.is_some()
            }
            FieldType::Boolean | FieldType::Map | FieldType::Object(_) => {
                bounds != Bounds::default()
            }
        };
        if misplaced {
            ck.error(name.span(), format!("field `{fname}` has bounds that do not apply to its type"), Some("integers take minimum/maximum, strings min_length/max_length, arrays min_items/max_items".into()));
        }
        if let (Some(lo), Some(hi)) = (bounds.minimum, bounds.maximum)
            && lo > hi
        {
            ck.error(
                name.span(),
                format!("field `{fname}` has minimum above maximum"),
                None,
            );
        }
        fields.push(Field {
            name: fname,
            ty,
            required: f.required,
            description,
            enum_values,
            default,
            bounds,
        });
    }
    fields
}

/// Object types nest by value in Rust, so a cycle would be an infinitely sized struct.
fn check_type_cycles(ck: &mut Checker<'_>, types: &[ObjectType]) {
    fn refs(f: &Field) -> Option<&str> {
        match &f.ty {
            FieldType::Object(t) | FieldType::Array(ItemType::Object(t)) => Some(t),
            _ => None,
        }
    }
    fn visit<'a>(types: &'a [ObjectType], name: &'a str, stack: &mut Vec<&'a str>) -> bool {
        if stack.contains(&name) {
            return true;
        }
        let Some(t) = types.iter().find(|t| t.name == name) else {
            return false;
        };
        stack.push(name);
        let cyclic = t
            .fields
            .iter()
            .filter_map(refs)
            .any(|r| visit(types, r, stack));
        stack.pop();
        cyclic
    }
    for t in types {
        if visit(types, &t.name, &mut Vec::new()) {
            ck.error(
                0..0,
                format!("type `{}` contains itself", t.name),
                Some("object types must not be recursive".into()),
            );
        }
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
