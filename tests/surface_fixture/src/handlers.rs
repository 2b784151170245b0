//! Handlers for the fixture's ready tools, and a call context over real Cedar decisions.

use std::sync::Arc;

use authz::{Engine, PolicyFile, Snapshot};
use tool_api::{Authorized, CallContext, NoOutput, Reply, ToolError};

use crate::DeclaredErrorCode;
use crate::main::{
    ChangeArgs, ChangeOperation, InspectArgs, InspectOutput, InspectOutputKind, MainHandlers,
    UndoArgs,
};
use crate::resources::Item;
use crate::side::{PokeArgs, SideHandlers};
use crate::types::{Outcome, Shape};
use crate::{CEDAR_SCHEMA, Handlers, PERMISSIONS};

/// The fixture's policies.
pub const POLICIES: &str = include_str!("../policies.cedar");

/// Handlers of both fixture connectors.
#[derive(Debug, Clone, Copy)]
pub struct Fixture;

fn reply<T>(output: T, text: &str) -> Reply<T> {
    Reply::rendered(output, text.to_string())
}

impl MainHandlers for Fixture {
    async fn inspect(
        &self,
        call: Authorized<InspectArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<InspectOutput>, ToolError> {
        let args = call.into_inner();
        let names: Vec<String> = args
            .name
            .into_iter()
            .chain(args.names.unwrap_or_default())
            .collect();
        let found: Vec<Shape> = names
            .into_iter()
            .map(|name| Shape {
                name,
                points: args.shape.clone().and_then(|s| s.points),
            })
            .collect();
        let kind = if found.is_empty() {
            InspectOutputKind::None
        } else {
            InspectOutputKind::Some
        };
        Ok(reply(InspectOutput { found, kind }, kind.as_str()))
    }

    async fn change(
        &self,
        call: Authorized<ChangeArgs>,
        cx: &CallContext,
    ) -> Result<Reply<Outcome>, ToolError> {
        let args = call.into_inner();
        // Each operation is decided on its own, on the item it touches.
        let op = if args.clear == Some(true) {
            ChangeOperation::Delete
        } else {
            ChangeOperation::Edit
        };
        let item = Item {
            id: args.id.clone(),
            inside: !args.id.starts_with("outside"),
            label: args.set.clone().unwrap_or_default(),
            size: i64::try_from(args.id.len()).unwrap_or(i64::MAX),
        };
        cx.authorize(op.action(), &item, ())?;
        Ok(reply(
            Outcome {
                changed: 1,
                note: Some(format!(
                    "{} needed `{}`",
                    op.action().as_str(),
                    op.permission()
                )),
            },
            "changed",
        ))
    }

    async fn undo(
        &self,
        _call: Authorized<UndoArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<Outcome>, ToolError> {
        Ok(reply(
            Outcome {
                changed: 0,
                note: None,
            },
            "nothing to undo",
        ))
    }
}

impl SideHandlers for Fixture {
    async fn poke(
        &self,
        _call: Authorized<PokeArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<NoOutput>, ToolError> {
        Ok(reply(NoOutput {}, "poked"))
    }
}

/// Both connectors' handlers, for the generated `Handlers::dispatch`.
pub fn handlers() -> Handlers<Fixture, Fixture> {
    Handlers {
        main: Fixture,
        side: Fixture,
    }
}

/// A call context on `connector` with the fixture's policies, on `platform`, with the
/// permissions `on` in effect (every other one off).
pub fn call_context(
    connector: &str,
    platform: &'static str,
    on: &[&str],
) -> Result<CallContext, String> {
    let engine = Engine::load(
        CEDAR_SCHEMA,
        &[PolicyFile {
            name: "policies.cedar".into(),
            text: POLICIES.into(),
        }],
        DeclaredErrorCode::DENIALS,
    )
    .map_err(|e| authz::LoadError::lines(&e))?;
    let snapshot = Snapshot {
        platform,
        read_only: false,
        permissions: PERMISSIONS
            .iter()
            .map(|p| (p.name, on.contains(&p.name)))
            .collect(),
    };
    let gate = authz::Gate::for_snapshot(Arc::new(engine), connector, &snapshot)
        .map_err(|d| d.to_string())?;
    Ok(CallContext::new(gate))
}
