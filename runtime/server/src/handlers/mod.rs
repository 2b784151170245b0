//! The tool handlers: one struct per connector implementing its generated trait. Handlers get
//! authorized arguments and authorize each target again through the call's gate.

mod agents;
mod apply_patch;
mod apps;
mod browser;
mod desktop;
mod exec;
mod file;
mod find;
mod gateway;
mod hosts;
mod read;
mod services;
mod session;
mod shell;
mod shell_input;
mod view_image;
mod workdir_context;
mod zodex;

use std::sync::Arc;

use generated::core::{
    AgentsArgs, AgentsOutput, ApplyPatchArgs, CoreHandlers, ExecCommandArgs, FindArgs, FindOutput,
    ReadArgs, ReadOutput, SessionArgs, SessionOutput, ViewImageArgs, ViewImageOutput,
    WriteStdinArgs,
};
use generated::types::{ExecResult, PatchResult};
use tool_api::{Authorized, CallContext, ErrorCode, Reply, ToolError};

use crate::read_state::ReadState;
use confine::path_policy::LiveRoots;

/// Handlers of the Core connector.
#[derive(Debug, Clone)]
pub struct CoreTools {
    roots: Arc<LiveRoots>,
    terminal: Arc<terminal::Registry>,
    recorder: Arc<crate::recorder::Recorder>,
    agents: Arc<::agents::Agents>,
    seen: Arc<ReadState>,
}

impl CoreTools {
    /// Core handlers: files confined by `roots` (what `read` shows noted in `seen`),
    /// commands in `terminal`'s sessions, recorded sessions in `recorder`'s store, worker
    /// agents in `agents`.
    pub fn new(
        roots: Arc<LiveRoots>,
        terminal: Arc<terminal::Registry>,
        recorder: Arc<crate::recorder::Recorder>,
        agents: Arc<::agents::Agents>,
        seen: Arc<ReadState>,
    ) -> Self {
        Self {
            roots,
            terminal,
            recorder,
            agents,
            seen,
        }
    }
}

/// Handlers of the Files connector.
#[derive(Debug, Clone)]
pub struct FilesTools {
    roots: Arc<LiveRoots>,
    seen: Arc<ReadState>,
}

impl FilesTools {
    /// Files handlers: files confined by `roots`; edits by line checked against `seen`.
    pub fn new(roots: Arc<LiveRoots>, seen: Arc<ReadState>) -> Self {
        Self { roots, seen }
    }
}

impl generated::files::FilesHandlers for FilesTools {
    async fn file(
        &self,
        call: Authorized<generated::files::FileArgs>,
        cx: &CallContext,
    ) -> Result<Reply<generated::files::FileOutput>, ToolError> {
        let roots = self.roots.get();
        let seen = self.seen.clone();
        let cx = cx.clone();
        let args = call.into_inner();
        blocking(move || file::run(&roots, &cx, &seen, args)).await?
    }
}

/// Runs blocking filesystem work. On the multi-threaded runtime (HTTP), the current worker
/// hands its other tasks off and runs the work in place (no thread hop: a `read` of a small
/// file costs tens of microseconds, a hop to the blocking pool as much again); on the
/// current-thread runtime (stdio) it goes to the blocking pool, so the one thread keeps
/// reading requests.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ToolError> {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        return Ok(tokio::task::block_in_place(work));
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::new(ErrorCode::Internal, format!("worker failed: {e}")))
}

/// A name as one line of a rendering: control characters (a newline in a file name could
/// forge a line of its own) are shown escaped, as `ls -b` does.
pub(super) fn printable(name: &str) -> std::borrow::Cow<'_, str> {
    if name.chars().any(char::is_control) {
        std::borrow::Cow::Owned(
            name.chars()
                .map(|c| {
                    if c.is_control() {
                        c.escape_default().to_string()
                    } else {
                        c.to_string()
                    }
                })
                .collect(),
        )
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

impl CoreHandlers for CoreTools {
    async fn read(
        &self,
        call: Authorized<ReadArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ReadOutput>, ToolError> {
        let args = call.into_inner();
        if read::is_quick(&args) {
            // A few plain files: cheaper to read right here than to hand the worker off.
            return read::run(&self.roots.get(), &self.terminal, &self.seen, cx, args);
        }
        let roots = self.roots.get();
        let outputs = self.terminal.clone();
        let seen = self.seen.clone();
        let cx = cx.clone();
        blocking(move || read::run(&roots, &outputs, &seen, &cx, args)).await?
    }

    async fn view_image(
        &self,
        call: Authorized<ViewImageArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ViewImageOutput>, ToolError> {
        let roots = self.roots.get();
        let cx = cx.clone();
        let args = call.into_inner();
        blocking(move || view_image::run(&roots, &cx, args)).await?
    }

    async fn find(
        &self,
        call: Authorized<FindArgs>,
        cx: &CallContext,
    ) -> Result<Reply<FindOutput>, ToolError> {
        let roots = self.roots.get();
        let cx = cx.clone();
        let args = call.into_inner();
        blocking(move || find::run(&roots, &cx, args)).await?
    }

    async fn exec_command(
        &self,
        call: Authorized<ExecCommandArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ExecResult>, ToolError> {
        exec::exec_command(&self.terminal, &self.roots.get(), cx, call.into_inner()).await
    }

    async fn write_stdin(
        &self,
        call: Authorized<WriteStdinArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ExecResult>, ToolError> {
        exec::write_stdin(&self.terminal, cx, call.into_inner()).await
    }

    async fn apply_patch(
        &self,
        call: Authorized<ApplyPatchArgs>,
        cx: &CallContext,
    ) -> Result<Reply<PatchResult>, ToolError> {
        let args = call.into_inner();
        let roots = self.roots.get();
        apply_patch::apply(roots, cx, &apply_patch::CORE, args.patch, args.workdir).await
    }

    async fn session(
        &self,
        call: Authorized<SessionArgs>,
        cx: &CallContext,
    ) -> Result<Reply<SessionOutput>, ToolError> {
        let roots = self.roots.get();
        let recorder = self.recorder.clone();
        let cx = cx.clone();
        let args = call.into_inner();
        blocking(move || session::run(&recorder, &roots, &cx, args)).await?
    }

    async fn agents(
        &self,
        call: Authorized<AgentsArgs>,
        cx: &CallContext,
    ) -> Result<Reply<AgentsOutput>, ToolError> {
        agents::run(&self.agents, cx, call.into_inner()).await
    }
}

pub use desktop::DesktopTools;
pub use gateway::GatewayTools;
pub use hosts::{HUB_CALL_META, HostsTools};
pub use shell::ShellTools;
pub use zodex::ZodexTools;
