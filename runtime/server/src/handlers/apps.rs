//! `app.launch` and `app.close` (the Shell connector, seed 002's milestone 2): applications
//! the config declares under `[apps]`, started by their own command line without a shell,
//! tracked by handle in [`crate::ops::apps`] and ended with everything they started.

use generated::resources::App;
use generated::shell::{
    AppCloseArgs, AppCloseOperation, AppCloseOutput, AppLaunchArgs, AppLaunchOutput, actions,
    limits,
};
use tool_api::{CallContext, ErrorCode, Reply, ToolError};

use crate::ops::apps::{Apps, Launch};
use crate::ops::path_policy::Roots;
use crate::ops::program;

/// The applications under `[apps]`, and the ones gantry launched.
#[derive(Debug, Default)]
pub struct AppTools {
    declared: Vec<(String, config::apps::AppConfig)>,
    launched: Apps,
}

impl AppTools {
    /// The applications `declared` may be launched.
    pub fn new(declared: Vec<(String, config::apps::AppConfig)>) -> Self {
        AppTools {
            declared,
            launched: Apps::default(),
        }
    }

    fn declared(&self, name: &str) -> Option<&config::apps::AppConfig> {
        self.declared
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a)
    }

    /// `name` as Cedar sees it.
    fn resource(&self, name: &str) -> App {
        App {
            id: name.to_string(),
            declared: self.declared(name).is_some(),
        }
    }

    pub(super) async fn launch(
        &self,
        roots: &Roots,
        terminal: &terminal::Registry,
        cx: &CallContext,
        args: AppLaunchArgs,
    ) -> Result<Reply<AppLaunchOutput>, ToolError> {
        let launch = cx
            .authorize(actions::APP_LAUNCH, &self.resource(&args.name), ())
            .map_err(|e| e.at(&format!("name `{}`", args.name)))?;
        drop(launch);
        let Some(app) = self.declared(&args.name) else {
            // The base policy refuses undeclared names; this is its fail-closed twin.
            return Err(ToolError::new(
                ErrorCode::CommandNotAllowed,
                format!(
                    "name: `{}` is not declared under [apps] in the config",
                    args.name
                ),
            ));
        };
        let argv = app
            .command_line(&args.args.unwrap_or_default())
            .map_err(|why| ToolError::invalid_input(format!("args: {why}")))?;
        let Some((program_name, rest)) = argv.split_first() else {
            return Err(ToolError::invalid_input(
                "name: the application has no program",
            ));
        };
        let program = program::resolve(program_name).ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                format!(
                    "[apps.{}] command: `{program_name}` is not a program on PATH",
                    args.name
                ),
            )
        })?;
        // One inside the roots is the model's to write.
        if roots.contains(&program) {
            return Err(ToolError::new(
                ErrorCode::CommandNotAllowed,
                format!(
                    "[apps.{}] command: `{}` lies inside the approved roots, where the model can write it; name a program outside them",
                    args.name,
                    program.display()
                ),
            ));
        }
        let launch = Launch {
            name: args.name.clone(),
            program,
            args: rest.to_vec(),
            cwd: roots.first().to_path_buf(),
            group: terminal.new_group(),
        };
        let launch = cx
            .authorize(actions::APP_LAUNCH, &self.resource(&args.name), launch)
            .map_err(|e| e.at(&format!("name `{}`", args.name)))?;
        let (handle, pid) = self.launched.launch(launch, limits::app_launch::MAX_APPS)?;
        Ok(Reply::new(AppLaunchOutput {
            handle,
            pid: i64::from(pid),
        }))
    }

    pub(super) async fn close(
        &self,
        cx: &CallContext,
        args: AppCloseArgs,
    ) -> Result<Reply<AppCloseOutput>, ToolError> {
        let launched = AppCloseOperation::Launched.action();
        let handles = match (&args.handle, &args.name) {
            (Some(handle), _) => {
                let name = self.launched.name_of(handle).ok_or_else(|| {
                    ToolError::new(
                        ErrorCode::NotFound,
                        format!("handle: `{handle}` is no application gantry launched (or it was closed)"),
                    )
                })?;
                cx.authorize(launched, &self.resource(&name), ())
                    .map_err(|e| e.at(&format!("handle `{handle}`")))?;
                vec![handle.clone()]
            }
            (None, Some(name)) => {
                cx.authorize(launched, &self.resource(name), ())
                    .map_err(|e| e.at(&format!("name `{name}`")))?;
                self.launched.handles_of(name)
            }
            (None, None) => return Err(ToolError::invalid_input("give `handle` or `name`")),
        };
        // Other instances are found before any is asked to close, so what gantry launched
        // and ends here is not mistaken for them.
        let others = match (&args.name, args.any) {
            (Some(name), Some(true)) => self.others(cx, name)?,
            _ => Vec::new(),
        };
        let grace = limits::app_close::GRACE.duration();
        let mut closed = Vec::new();
        for handle in handles {
            if self.launched.close(&handle, grace).await {
                closed.push(handle);
            }
        }
        closed.extend(end_others(&others, grace).await);
        Ok(Reply::new(AppCloseOutput { closed }))
    }

    /// The running instances of app `name` gantry did not launch, once `close_any_app`
    /// allows closing them.
    fn others(&self, cx: &CallContext, name: &str) -> Result<Vec<u32>, ToolError> {
        cx.authorize(AppCloseOperation::Any.action(), &self.resource(name), ())
            .map_err(|e| e.at(&format!("name `{name}`")))?;
        let Some(app) = self.declared(name) else {
            return Err(ToolError::new(
                ErrorCode::CommandNotAllowed,
                format!("name: `{name}` is not declared under [apps] in the config"),
            ));
        };
        let Some((first, rest)) = app.command.split_first() else {
            return Ok(Vec::new());
        };
        let Some(program) = program::resolve(first) else {
            return Ok(Vec::new());
        };
        let fixed: Vec<String> = rest
            .iter()
            .take_while(|a| a.as_str() != config::apps::ARGS_PLACEHOLDER)
            .cloned()
            .collect();
        let mut exclude = self.launched.pids();
        exclude.push(std::process::id());
        exclude.extend(crate::ops::host::parent_pid());
        Ok(find_others(&program, &fixed, &exclude))
    }
    /// Ends every application gantry launched (server shutdown).
    pub fn shutdown(&self) {
        self.launched.shutdown();
    }
}

#[cfg(target_os = "linux")]
fn find_others(program: &std::path::Path, fixed: &[String], exclude: &[u32]) -> Vec<u32> {
    terminal::process_tree::instances(program, fixed, exclude)
}

#[cfg(not(target_os = "linux"))]
fn find_others(_: &std::path::Path, _: &[String], _: &[u32]) -> Vec<u32> {
    // `close_any_app` is a Linux permission: elsewhere the decision above already refused.
    Vec::new()
}

/// Ends `pids`; answers each one gone as `pid:N`.
async fn end_others(pids: &[u32], grace: std::time::Duration) -> Vec<String> {
    #[cfg(target_os = "linux")]
    let gone = terminal::process_tree::end_each(pids, grace).await;
    #[cfg(not(target_os = "linux"))]
    let gone: Vec<u32> = {
        let _ = (pids, grace);
        Vec::new()
    };
    gone.into_iter().map(|p| format!("pid:{p}")).collect()
}
