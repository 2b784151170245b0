//! The per-call gate and the proof-of-permit type it mints.

use std::ops::Deref;
use std::sync::Arc;

use cedar_policy::{Entity, EntityUid};

use crate::engine::{Denial, Engine, Facts, Snapshot};
use crate::resource::{ActionId, Resource};

/// A value that passed an authorization decision. It has no public constructor: the only way
/// to get one is a permit from [`Gate::authorize`].
#[derive(Debug)]
pub struct Authorized<T> {
    value: T,
    action: ActionId,
    policies: Vec<String>,
}

impl<T> Authorized<T> {
    /// The authorized value.
    pub fn get(&self) -> &T {
        &self.value
    }

    /// Gives the value up (it is then an ordinary value again).
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The action that was permitted.
    pub fn action(&self) -> ActionId {
        self.action
    }

    /// The ids of the policies that permitted it, for the audit log.
    pub fn policies(&self) -> &[String] {
        &self.policies
    }
}

impl<T> Deref for Authorized<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

/// One call's view of the engine: who is calling and the permission snapshot taken when the
/// call arrived. Every request the call makes goes through it.
#[derive(Clone)]
pub struct Gate {
    engine: Arc<Engine>,
    principal: EntityUid,
    /// The principal's ancestors as entities (a worker's run), empty for a connector.
    principal_entities: Arc<[Entity]>,
    principal_name: String,
    worker: Option<Arc<WorkerId>>,
    facts: Facts,
    /// A second policy set that must permit too: the one a policy change brings while it
    /// settles, so its new `forbid`s hold at once and its new `permit`s only once it settled.
    settling: Option<Arc<Engine>>,
}

/// A worker agent a call was proven to come from (by the endpoint it arrived on).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkerId {
    /// The run it belongs to.
    pub run: String,
    /// Its id within the run (`w1`).
    pub worker: String,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("principal", &self.principal_name)
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate for a call arriving on `connector`, decided against `facts`.
    pub fn new(engine: Arc<Engine>, connector: &str, facts: &Facts) -> Result<Self, Denial> {
        let principal = engine.connector_uid(connector)?;
        Ok(Self {
            engine,
            principal,
            principal_entities: Arc::from([]),
            principal_name: connector.to_string(),
            worker: None,
            facts: facts.clone(),
            settling: None,
        })
    }

    /// A gate for a call of worker `worker` of run `run`, started through `connector`: the
    /// principal is `Worker::"<run>/<worker>"`, a child of its run and of the connector. Only
    /// the worker's own endpoint builds one; nothing a caller sends can.
    pub fn for_worker(
        engine: Arc<Engine>,
        connector: &str,
        worker: WorkerId,
        facts: &Facts,
    ) -> Result<Self, Denial> {
        let (principal, entities) =
            engine.worker_principal(connector, &worker.run, &worker.worker)?;
        Ok(Self {
            engine,
            principal,
            principal_entities: Arc::from(entities),
            principal_name: connector.to_string(),
            worker: Some(Arc::new(worker)),
            facts: facts.clone(),
            settling: None,
        })
    }

    /// The same gate, where `settling` (a policy set not yet settled) must permit a call too.
    pub fn also_decided_by(mut self, settling: Option<Arc<Engine>>) -> Self {
        self.settling = settling;
        self
    }

    /// The worker the call came from, if a worker made it.
    pub fn worker(&self) -> Option<&WorkerId> {
        self.worker.as_deref()
    }

    /// Who owns what the call starts (a command session, its spill files): the connector
    /// for the connector's own client, `<connector>/<run>/<worker>` for a worker.
    pub fn owner(&self) -> String {
        match &self.worker {
            Some(w) => format!("{}/{}/{}", self.principal_name, w.run, w.worker),
            None => self.principal_name.clone(),
        }
    }

    /// A gate straight from a snapshot (validates the context; prefer sharing [`Facts`]).
    pub fn for_snapshot(
        engine: Arc<Engine>,
        connector: &str,
        snapshot: &Snapshot,
    ) -> Result<Self, Denial> {
        let facts = engine.facts(snapshot)?;
        Self::new(engine, connector, &facts)
    }

    /// The connector the call arrived on.
    pub fn connector(&self) -> &str {
        &self.principal_name
    }

    /// Asks the policies whether `action` on `resource` is allowed; on a permit, wraps `value`
    /// as [`Authorized`]. A deny, or any evaluation error, returns the [`Denial`].
    pub fn authorize<R: Resource + ?Sized, T>(
        &self,
        action: ActionId,
        resource: &R,
        value: T,
    ) -> Result<Authorized<T>, Denial> {
        let decision = self.engine.decide(
            &self.principal,
            &self.principal_entities,
            action,
            resource,
            &self.facts,
        );
        if !decision.allowed {
            return Err(self.engine.denial(action, resource, decision));
        }
        if let Some(settling) = &self.settling {
            let second = settling.decide(
                &self.principal,
                &self.principal_entities,
                action,
                resource,
                &self.facts,
            );
            if !second.allowed {
                return Err(settling.denial(action, resource, second));
            }
        }
        {
            Ok(Authorized {
                value,
                action,
                policies: decision.policies,
            })
        }
    }
}
