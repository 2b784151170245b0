//! `agents`: the prime spawns, messages and reads the status of workers; a worker finishes.
//! Who may do which is Cedar's decision (each action is an operation of its own, and
//! `policies/base/agents.cedar` keeps spawn, message and status to the prime and finish to a
//! worker); who the caller is comes from the endpoint the call arrived on, never from its
//! arguments.

use generated::core::{AgentsArgs, AgentsArgsAction, AgentsOperation, AgentsOutput};
use generated::types::{WorkerState, WorkerStateState};
use tool_api::{CallContext, ErrorCode, Host, Reply, ToolError};

use agents::{Agents, Report, State};

/// The inputs `operation` takes (surface.toml's `takes`); any other is refused by name, so a
/// worker cannot think it finished another worker by naming it.
fn check_fields(args: &AgentsArgs, operation: AgentsOperation) -> Result<(), ToolError> {
    let takes = operation.takes().unwrap_or(&[]);
    let extra: Vec<&str> = args
        .given()
        .into_iter()
        .filter(|name| !takes.contains(name))
        .collect();
    if extra.is_empty() {
        return Ok(());
    }
    let why = if operation == AgentsOperation::Finish {
        " (a worker finishes only itself: who is calling is known from its endpoint)"
    } else {
        ""
    };
    Err(ToolError::new(
        ErrorCode::InvalidInput,
        format!(
            "{}: `{}` does not take {}{why}",
            extra.join(", "),
            args.action.as_str(),
            if extra.len() == 1 { "it" } else { "them" }
        ),
    ))
}

fn output_of(report: &Report) -> AgentsOutput {
    AgentsOutput {
        run: report.run.clone(),
        free_slots: i64::try_from(report.free_slots).ok(),
        workers: Some(
            report
                .workers
                .iter()
                .map(|w| WorkerState {
                    id: w.id.clone(),
                    kind: w.kind.clone(),
                    state: match w.state {
                        State::Working => WorkerStateState::Working,
                        State::Waiting => WorkerStateState::Waiting,
                        State::Asleep => WorkerStateState::Asleep,
                        State::Finished => WorkerStateState::Finished,
                    },
                    conversation: w.conversation.clone(),
                    tokens: w.tokens.and_then(|t| i64::try_from(t).ok()),
                })
                .collect(),
        ),
    }
}

pub(super) async fn run(
    agents: &std::sync::Arc<Agents>,
    cx: &CallContext,
    args: AgentsArgs,
) -> Result<Reply<AgentsOutput>, ToolError> {
    let operation = match args.action {
        AgentsArgsAction::Spawn => AgentsOperation::Spawn,
        AgentsArgsAction::Message => AgentsOperation::Message,
        AgentsArgsAction::Status => AgentsOperation::Status,
        AgentsArgsAction::Finish => AgentsOperation::Finish,
    };
    // Who may do this is decided before anything about the arguments is said.
    cx.authorize(operation.action(), &Host, ())?;
    check_fields(&args, operation)?;
    let report = match args.action {
        AgentsArgsAction::Spawn => {
            agents
                .spawn(
                    args.kind.as_deref(),
                    args.context.as_deref().unwrap_or(""),
                    args.tasks.as_deref().unwrap_or(&[]),
                )
                .await?
        }
        AgentsArgsAction::Message => {
            agents
                .message(
                    args.to.as_deref().unwrap_or(&[]),
                    args.message.as_deref().unwrap_or(""),
                )
                .await?
        }
        AgentsArgsAction::Status => agents.status().await?,
        AgentsArgsAction::Finish => {
            let Some(worker) = cx.worker() else {
                // The policy refuses this first; this holds even under a policy set that
                // would not.
                return Err(ToolError::new(
                    ErrorCode::PermissionDenied,
                    "`finish` is a worker's handoff, made from the worker's own endpoint",
                ));
            };
            let text = agents.finish(worker, args.message.as_deref().unwrap_or(""))?;
            let output = AgentsOutput {
                run: Some(worker.run.clone()),
                free_slots: None,
                workers: None,
            };
            return Ok(Reply::rendered(output, text));
        }
    };
    let output = output_of(&report);
    Ok(Reply::rendered(output, report.text))
}
