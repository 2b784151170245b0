//! Actions typed by their effect, so a permit for a read can never be used for a write: the
//! generator knows which actions mutate (from the permissions they need) and gives those a
//! [`TypedAction<Writes>`]; code that writes asks for one.

use std::marker::PhantomData;

use authz::ActionId;

/// Effect marker: the action only observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reads;

/// Effect marker: the action changes state (every permission it needs is a mutating one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writes;

/// A Cedar action whose effect `E` is known at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypedAction<E> {
    id: ActionId,
    effect: PhantomData<E>,
}

impl<E> TypedAction<E> {
    /// Only generated code names an action's effect (from surface.toml); hand-written code
    /// uses the constants and methods it emits.
    #[doc(hidden)]
    pub const fn generated(id: ActionId) -> Self {
        Self {
            id,
            effect: PhantomData,
        }
    }

    /// The Cedar action.
    pub const fn id(self) -> ActionId {
        self.id
    }
}
