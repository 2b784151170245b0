//! Handlers of the Desktop connector: `observe` (screenshots, windows, controls) and
//! `computer` (a batch of steps), and the same for the Shell connector's screen and input
//! tools, decided by their own actions. The desktop itself (pixels, input, AT-SPI, the clipboard) is
//! the `desktop` crate's; here are the frames and refs the model holds, and every decision.

mod computer;
mod observe;

pub(crate) use computer::StepActions;

use std::sync::{Arc, Mutex};

use desktop::model::WindowInfo;
use desktop::{Desktop, DesktopError};
use generated::desktop::{
    ComputerArgs, ComputerOutput, DesktopHandlers, ObserveArgs, ObserveOutput,
};
use generated::resources::Window;
use tool_api::{Authorized, CallContext, ErrorCode, Reply, ToolError};

use config::Settings;

/// What the desktop connector keeps between calls.
#[derive(Debug)]
struct State {
    desktop: Desktop,
    frames: Mutex<desktop::frames::Frames>,
    refs: Mutex<desktop::refs::Refs>,
    /// One batch at a time: two batches' input would interleave.
    batch: tokio::sync::Mutex<()>,
    yield_to_user: bool,
    /// Who last left the pointer where it is, as single steps (Shell input tools) see it.
    left_pointer: Mutex<Option<computer::Left>>,
}

/// Handlers of the Desktop connector; without a reachable desktop the connector is not
/// served, so they are never called.
#[derive(Debug, Clone)]
pub struct DesktopTools {
    state: Option<Arc<State>>,
    /// Why no desktop was reached, when none was.
    off_because: Option<String>,
}

impl DesktopTools {
    /// Connects to this machine's desktop, logging (stderr) what it drives or why none.
    pub fn connect(settings: &Settings) -> DesktopTools {
        match Desktop::connect() {
            Ok(desktop) => {
                tracing::info!(desktop = %desktop.describe(), "desktop connector on");
                DesktopTools {
                    state: Some(Arc::new(State {
                        desktop,
                        frames: Mutex::default(),
                        refs: Mutex::default(),
                        batch: tokio::sync::Mutex::new(()),
                        yield_to_user: settings.desktop_yield_to_user,
                        left_pointer: Mutex::default(),
                    })),
                    off_because: None,
                }
            }
            Err(e) => {
                tracing::info!(why = %e, "desktop connector off");
                DesktopTools {
                    state: None,
                    off_because: Some(e.to_string()),
                }
            }
        }
    }

    /// Whether a desktop was reached.
    pub fn available(&self) -> bool {
        self.state.is_some()
    }

    /// Why no desktop was reached, when none was.
    pub fn off_because(&self) -> Option<&str> {
        self.off_because.as_deref()
    }

    fn state(&self) -> Result<Arc<State>, ToolError> {
        self.state
            .clone()
            .ok_or_else(|| ToolError::new(ErrorCode::OsError, "no desktop can be reached"))
    }

    /// A screenshot of the screen or of `window` kept as a frame, windows `action` forbids
    /// blacked out, with the list of the windows `action` may name.
    pub(crate) async fn capture(
        &self,
        cx: &CallContext,
        action: tool_api::ActionId,
        window: Option<&str>,
    ) -> Result<Reply<ObserveOutput>, ToolError> {
        let state = self.state()?;
        let windows = blocking(&state, |d| d.windows())
            .await
            .map_err(tool_error)?;
        let listed = observe::list(cx, action, &windows);
        let mut shot = observe::screenshot(&state, cx, action, windows, window).await?;
        if let (Some(text), Some(list)) = (shot.text.as_mut(), listed.text) {
            text.push_str(&list);
        }
        Ok(shot)
    }

    /// One desktop step decided by `actions`, as a Shell input tool makes it: the line
    /// saying what it did.
    pub(crate) async fn step(
        &self,
        cx: &CallContext,
        step: &generated::types::ComputerAction,
        actions: StepActions,
    ) -> Result<String, ToolError> {
        computer::one_step(self.state()?, cx, step, actions).await
    }
}

impl DesktopHandlers for DesktopTools {
    async fn observe(
        &self,
        call: Authorized<ObserveArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ObserveOutput>, ToolError> {
        observe::run(self.state()?, cx, call.into_inner()).await
    }

    async fn computer(
        &self,
        call: Authorized<ComputerArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ComputerOutput>, ToolError> {
        computer::run(self.state()?, cx, call.into_inner()).await
    }
}

/// The stable code of a desktop failure.
fn error_code(e: &DesktopError) -> ErrorCode {
    match e {
        DesktopError::Unavailable(_) | DesktopError::Failed(_) => ErrorCode::OsError,
        DesktopError::Gone(_) => ErrorCode::NotFound,
        DesktopError::Input(_) => ErrorCode::InvalidInput,
        DesktopError::Timeout(_) => ErrorCode::Timeout,
    }
}

/// The tool error for a desktop failure.
fn tool_error(e: DesktopError) -> ToolError {
    ToolError::new(error_code(&e), e.to_string())
}

/// Window `w` as Cedar sees it.
fn resource(w: &WindowInfo) -> Window {
    Window {
        id: w.handle(),
        app: w.app.clone(),
    }
}

/// Runs blocking desktop work (X round trips, encoding) off the async thread.
async fn blocking<T: Send + 'static>(
    state: &Arc<State>,
    work: impl FnOnce(&Desktop) -> Result<T, DesktopError> + Send + 'static,
) -> Result<T, DesktopError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || work(&state.desktop))
        .await
        .map_err(|e| DesktopError::Failed(format!("desktop worker failed: {e}")))?
}

/// The window `handle` names, as it is now.
fn find_window(windows: &[WindowInfo], handle: &str) -> Result<WindowInfo, ToolError> {
    let id = desktop::model::parse_window_handle(handle).ok_or_else(|| {
        ToolError::invalid_input(format!(
            "window `{handle}` is not a window id (they look like 0x1a00007; observe lists them)"
        ))
    })?;
    windows.iter().find(|w| w.id == id).cloned().ok_or_else(|| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("window `{handle}` is not open (or not shown); observe lists the windows"),
        )
    })
}

/// A title or name as one quoted string of a rendering: quotes, backslashes, control and
/// line-separator characters escaped, so no window title can forge a line or a field.
fn quoted(text: &str) -> String {
    format!("{text:?}")
}
