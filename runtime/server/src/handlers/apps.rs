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
    /// `[shell] runs_files`: interpreters and shells, whose instances a name cannot tell.
    runs_files: Vec<String>,
}

impl AppTools {
    /// The applications `declared` may be launched; `runs_files` are interpreters and
    /// shells.
    pub fn new(declared: Vec<(String, config::apps::AppConfig)>, runs_files: Vec<String>) -> Self {
        AppTools {
            declared,
            launched: Apps::default(),
            runs_files,
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
        if args.any.is_some() && args.handle.is_some() {
            return Err(ToolError::invalid_input(
                "any: goes with `name` (a handle is one application gantry launched)",
            ));
        }
        let name = match (&args.handle, &args.name) {
            (Some(handle), _) => self.launched.name_of(handle).ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NotFound,
                    format!(
                        "handle: `{handle}` is no application gantry launched (or it was closed)"
                    ),
                )
            })?,
            (None, Some(name)) => name.clone(),
            (None, None) => return Err(ToolError::invalid_input("give `handle` or `name`")),
        };
        let named = match &args.handle {
            Some(handle) => format!("handle `{handle}`"),
            None => format!("name `{name}`"),
        };
        // The tool's own action and the operation's: a rule on either holds.
        let app = self.resource(&name);
        cx.authorize(actions::APP_CLOSE, &app, ())
            .and_then(|_| cx.authorize(AppCloseOperation::Launched.action(), &app, ()))
            .map_err(|e| e.at(&named))?;
        let handles = match &args.handle {
            Some(handle) => vec![handle.clone()],
            None => self.launched.handles_of(&name),
        };
        // Other instances are found (and held) before any is asked to close.
        let others = if args.any == Some(true) {
            self.others(cx, &name)?
        } else {
            Others::default()
        };
        let grace = limits::app_close::GRACE.duration();
        let mut closed = Vec::new();
        for handle in handles {
            if self.launched.close(&handle, grace).await {
                closed.push(handle);
            }
        }
        closed.extend(others.end(grace).await);
        Ok(Reply::new(AppCloseOutput { closed }))
    }

    /// The running instances of app `name` gantry did not launch, once `close_any_app`
    /// allows closing them.
    fn others(&self, cx: &CallContext, name: &str) -> Result<Others, ToolError> {
        cx.authorize(AppCloseOperation::Any.action(), &self.resource(name), ())
            .map_err(|e| e.at(&format!("name `{name}`")))?;
        let Some(app) = self.declared(name) else {
            return Err(ToolError::new(
                ErrorCode::CommandNotAllowed,
                format!("name: `{name}` is not declared under [apps] in the config"),
            ));
        };
        let Some((first, rest)) = app.command.split_first() else {
            return Ok(Others::default());
        };
        let Some(program) = program::resolve(first) else {
            return Ok(Others::default());
        };
        let fixed: Vec<String> = rest
            .iter()
            .take_while(|a| a.as_str() != config::apps::ARGS_PLACEHOLDER)
            .cloned()
            .collect();
        // An interpreter or a shell with nothing of the app's own before the call's
        // arguments would be every program it runs.
        if fixed.is_empty()
            && [std::path::Path::new(first), program.as_path()]
                .iter()
                .any(|p| config::names_program(&self.runs_files, p))
        {
            return Err(ToolError::new(
                ErrorCode::CommandNotAllowed,
                format!(
                    "any: `{name}` is `{first}` with nothing of its own before the call's arguments, so its other instances cannot be told from any other `{first}` program; only what gantry launched is closed"
                ),
            ));
        }
        Ok(Others::find(&program, &fixed))
    }
    /// Ends every application gantry launched (server shutdown).
    pub fn shutdown(&self) {
        self.launched.shutdown();
    }
}

/// Instances of an application gantry did not launch, held until they are ended.
#[derive(Debug, Default)]
struct Others {
    #[cfg(target_os = "linux")]
    held: Vec<terminal::process_tree::Instance>,
}

impl Others {
    #[cfg(target_os = "linux")]
    fn find(program: &std::path::Path, fixed: &[String]) -> Others {
        Others {
            held: terminal::process_tree::instances(program, fixed),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn find(_: &std::path::Path, _: &[String]) -> Others {
        // `close_any_app` is a Linux permission: elsewhere the decision before already refused.
        Others::default()
    }

    /// Ends them; answers each one gone as `pid:N`.
    async fn end(self, grace: std::time::Duration) -> Vec<String> {
        #[cfg(target_os = "linux")]
        let gone = terminal::process_tree::end_each(&self.held, grace).await;
        #[cfg(not(target_os = "linux"))]
        let gone: Vec<u32> = {
            let _ = grace;
            Vec::new()
        };
        gone.into_iter().map(|p| format!("pid:{p}")).collect()
    }
}
