//! One Cedar decision, and the whole dispatch path (decode → authorize → no-op handler →
//! encode), with the shipped schema and policies.
//!
//! `cargo bench -p gantry --bench authorize`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use criterion::{Criterion, criterion_group, criterion_main};
use generated::core::{
    ApplyPatchArgs, CoreHandlers, ExecCommandArgs, FindArgs, FindOutput, ReadArgs, ReadOutput,
    SessionArgs, SessionOutput, ViewImageArgs, ViewImageOutput, WriteStdinArgs, actions,
};
use server::permissions::PermissionState;
use tool_api::{Authorized, CallContext, Platform, Reply, ToolError};

/// Answers `read` with an empty result at once; the other tools are not measured here.
struct Noop;

impl CoreHandlers for Noop {
    async fn read(
        &self,
        _call: Authorized<ReadArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<ReadOutput>, ToolError> {
        // `read` answers in text: a reply without a rendering is refused by the encoder.
        Ok(Reply::rendered(
            ReadOutput {
                entries: Vec::new(),
                truncated: false,
            },
            String::new(),
        ))
    }

    async fn view_image(
        &self,
        _call: Authorized<ViewImageArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<ViewImageOutput>, ToolError> {
        Err(ToolError::not_implemented(actions::VIEW_IMAGE.as_str()))
    }

    async fn find(
        &self,
        _call: Authorized<FindArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<FindOutput>, ToolError> {
        Err(ToolError::not_implemented(actions::FIND.as_str()))
    }

    async fn exec_command(
        &self,
        _call: Authorized<ExecCommandArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<generated::types::ExecResult>, ToolError> {
        Err(ToolError::not_implemented(actions::EXEC_COMMAND.as_str()))
    }

    async fn write_stdin(
        &self,
        _call: Authorized<WriteStdinArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<generated::types::ExecResult>, ToolError> {
        Err(ToolError::not_implemented(actions::WRITE_STDIN.as_str()))
    }

    async fn apply_patch(
        &self,
        _call: Authorized<ApplyPatchArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<generated::types::PatchResult>, ToolError> {
        Ok(Reply::new(generated::types::PatchResult {
            files: Vec::new(),
        }))
    }

    async fn session(
        &self,
        _call: Authorized<SessionArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<SessionOutput>, ToolError> {
        Err(ToolError::not_implemented(actions::SESSION.as_str()))
    }

    async fn agents(
        &self,
        _call: Authorized<generated::core::AgentsArgs>,
        _cx: &CallContext,
    ) -> Result<Reply<generated::core::AgentsOutput>, ToolError> {
        Err(ToolError::not_implemented(actions::AGENTS.as_str()))
    }
}

/// Runs a future that never waits (the no-op handler) to completion.
fn ready<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the no-op handler waited"),
    }
}

fn benches(c: &mut Criterion) {
    let engine = Arc::new(server::policy_set::load(None).unwrap());
    let stored: BTreeMap<&'static str, bool> = generated::PERMISSIONS
        .iter()
        .map(|p| (p.name, true))
        .collect();
    let snapshot = PermissionState::new(Platform::Linux, false, stored).snapshot();
    let facts = engine.facts(&snapshot).unwrap();
    let path = generated::resources::Path {
        id: "/home/u/project/src/main.rs".into(),
        inside_root: true,
        gantry_owned: false,
        client_launch: false,
        client_launch_dir: false,
        kind: "file".into(),
    };

    c.bench_function("decision: read on a Path (permit)", |b| {
        let gate = authz::Gate::new(engine.clone(), "core", &facts).unwrap();
        b.iter(|| black_box(gate.authorize(actions::READ, black_box(&path), ()).is_ok()));
    });

    c.bench_function("decision: read on Host (permit, no attributes)", |b| {
        let gate = authz::Gate::new(engine.clone(), "core", &facts).unwrap();
        b.iter(|| {
            black_box(
                gate.authorize(actions::READ, black_box(&tool_api::Host), ())
                    .is_ok(),
            )
        });
    });

    c.bench_function("decision: read outside the roots (deny)", |b| {
        let gate = authz::Gate::new(engine.clone(), "core", &facts).unwrap();
        let outside = generated::resources::Path {
            inside_root: false,
            gantry_owned: false,
            client_launch: false,
            client_launch_dir: false,
            ..path.clone()
        };
        b.iter(|| {
            black_box(
                gate.authorize(actions::READ, black_box(&outside), ())
                    .is_err(),
            )
        });
    });

    c.bench_function(
        "facts: snapshot to validated context (once per permission change)",
        |b| {
            b.iter(|| black_box(engine.facts(black_box(&snapshot)).unwrap()));
        },
    );

    c.bench_function("gate: build per call (principal + shared facts)", |b| {
        b.iter(|| black_box(authz::Gate::new(engine.clone(), "core", black_box(&facts)).unwrap()));
    });

    let arguments: tool_api::JsonObject =
        serde_json::from_str(r#"{"paths":["src/main.rs","README.md"],"ranges":[{"path":"src/lib.rs","start_line":10,"end_line":40}]}"#).unwrap();
    c.bench_function(
        "dispatch: decode + gate + authorize + no-op handler + encode",
        |b| {
            b.iter(|| {
                let gate = authz::Gate::new(engine.clone(), "core", &facts).unwrap();
                let cx = CallContext::new(gate);
                let out = ready(generated::core::dispatch(
                    &Noop,
                    &cx,
                    "read",
                    black_box(arguments.clone()),
                ));
                black_box(out.unwrap())
            });
        },
    );
}

criterion_group!(group, benches);
criterion_main!(group);
