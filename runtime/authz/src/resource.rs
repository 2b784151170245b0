//! What a request names: action ids and resources with their facts.

/// A Cedar action id (`Action::"read"`, `Action::"apply_patch:add"`), as generated from the
/// surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActionId(&'static str);

impl ActionId {
    /// Wraps an action name; only generated code should need this.
    pub const fn new(name: &'static str) -> Self {
        Self(name)
    }

    /// The action's name.
    pub const fn as_str(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for ActionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A resource attribute value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrValue<'a> {
    /// A boolean fact.
    Bool(bool),
    /// A string fact.
    String(&'a str),
    /// An integer fact.
    Long(i64),
}

/// Something a call touches, as a Cedar entity. Implemented by the generated resource types
/// and by [`Host`].
pub trait Resource {
    /// The Cedar entity type (`Path`, `Command`, `Host`...).
    fn entity_type(&self) -> &'static str;
    /// The entity id: the canonical form of what is touched (a resolved path, a command line).
    fn id(&self) -> &str;
    /// The facts policies may test.
    fn attributes(&self) -> Vec<(&'static str, AttrValue<'_>)>;
}

/// The computer as a whole: the resource of a call before it names a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Host;

impl Resource for Host {
    fn entity_type(&self) -> &'static str {
        "Host"
    }

    fn id(&self) -> &str {
        "host"
    }

    fn attributes(&self) -> Vec<(&'static str, AttrValue<'_>)> {
        Vec::new()
    }
}
