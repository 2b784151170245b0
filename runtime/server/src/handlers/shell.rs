//! The Shell connector (seed 002, chatgpt-mcp): dotted tools on Core's path policy,
//! permissions and Cedar rules. Files through `ops::fs` with permits on the resolved paths;
//! `shell.exec` through `ops::program`, one allow-listed program and its argv, no shell.

use std::sync::Arc;

use generated::resources::{Process, Program};
use generated::shell::{
    AppCloseArgs, AppCloseOutput, AppLaunchArgs, AppLaunchOutput, BrowserOpenArgs,
    BrowserOpenOutput, FsDeleteArgs, FsDeleteOutput, FsListArgs, FsListOutput, FsMkdirArgs,
    FsMkdirOutput, FsMoveArgs, FsMoveOutput, FsReadArgs, FsReadOutput, FsWriteArgs,
    FsWriteArgsMode, FsWriteOperation, FsWriteOutput, InputClickArgs, InputKeyArgs, InputMoveArgs,
    InputTypeArgs, ProcessKillArgs, ProcessKillArgsSignal, ProcessKillOutput, ProcessListArgs,
    ProcessListOutput, ScreenCaptureArgs, ScreenCaptureOutput, ServiceControlArgs,
    ServiceControlOutput, ServiceStatusArgs, ServiceStatusOutput, ShellExecArgs, ShellExecOutput,
    ShellHandlers, SystemInfoArgs, SystemInfoOutput, actions, limits,
};
use generated::types::{FsEntry, FsEntryType, ProcessInfo, ProcessInfoKind};
use tool_api::{Authorized, CallContext, ErrorCode, Reply, ToolError};

use crate::ops::exec::DISPLAY_VARS;
use crate::ops::fs::{self, WritePermit};
use crate::ops::path_policy::{Kind, Resolved, Roots};
use crate::ops::program::{self, ProgramRun, Programs};
use confine::path_policy::LiveRoots;

/// Handlers of the Shell connector.
#[derive(Debug, Clone)]
pub struct ShellTools {
    roots: Arc<LiveRoots>,
    terminal: Arc<terminal::Registry>,
    programs: Arc<Programs>,
    /// `[shell] allowed_commands`; `*` allows any.
    allowed: Arc<Vec<String>>,
    /// `[shell] runs_files`: programs that run what the working tree says.
    runs_files: Arc<Vec<String>>,
    /// `[shell] display_programs`: programs that capture the screen or drive its input.
    display_programs: Arc<Vec<String>>,
    /// The desktop the screen and input tools reach.
    desktop: super::DesktopTools,
    /// `[browser]`: what browser.open starts and may open.
    browser: Arc<config::browser::BrowserConfig>,
    /// `[apps]`, and the applications gantry launched.
    apps: Arc<super::apps::AppTools>,
    /// `[services]`: the services the service tools may reach.
    services: Arc<super::services::ServiceTools>,
}

impl ShellTools {
    /// Shell handlers: files confined by `roots`, sessions of `terminal` listed, programs
    /// from `allowed` run.
    pub fn new(
        roots: Arc<LiveRoots>,
        terminal: Arc<terminal::Registry>,
        desktop: super::DesktopTools,
        settings: &config::Settings,
    ) -> Self {
        Self {
            roots,
            terminal,
            programs: Arc::default(),
            allowed: Arc::new(settings.shell_allowed_commands.clone()),
            runs_files: Arc::new(settings.shell_runs_files.clone()),
            display_programs: Arc::new(settings.shell_display_programs.clone()),
            desktop,
            browser: Arc::new(settings.browser.clone()),
            apps: Arc::new(super::apps::AppTools::new(
                settings.apps.clone(),
                settings.shell_runs_files.clone(),
            )),
            services: Arc::new(super::services::ServiceTools::new(
                settings.services.clone(),
            )),
        }
    }

    /// Ends every application gantry launched (server shutdown).
    pub fn stop(&self) {
        self.apps.shutdown();
    }

    /// Whether `command`, which starts `program`, is on the allow-list (by Windows' own
    /// naming rules there: see [`terminal::programs::allow_list_names`]).
    fn allows(&self, command: &str, program: &std::path::Path) -> bool {
        self.allowed
            .iter()
            .any(|a| a == "*" || terminal::programs::allow_list_names(a, command, program))
    }

    /// Whether the program, by the name given or the file it resolves to, is one that runs
    /// files of the working tree (see [`config::runs_files`]).
    fn runs_files(&self, given: &str, program: &std::path::Path) -> bool {
        [std::path::Path::new(given), program]
            .iter()
            .any(|p| config::names_program(&self.runs_files, p))
    }

    /// Whether the program (by the name given or its file) captures the screen or drives its
    /// input, or one of `args` asks it for a capture (see [`config::DEFAULT_DISPLAY_PROGRAMS`]).
    fn captures_display(&self, given: &str, program: &std::path::Path, args: &[String]) -> bool {
        [std::path::Path::new(given), program]
            .iter()
            .any(|p| config::names_program(&self.display_programs, p))
            || args.iter().any(|a| {
                config::asks_for_a_capture(a)
                    || [std::path::Path::new(given), program]
                        .iter()
                        .any(|p| config::asks_magick_for_the_screen(p, a))
            })
    }
}

fn with_path(given: &str, roots: &Roots, e: ToolError) -> ToolError {
    let roots = if e.code == ErrorCode::PathNotAllowed {
        format!(" ({} approved root(s))", roots.len())
    } else {
        String::new()
    };
    ToolError::new(e.code, format!("{given}: {}{roots}", e.message))
}

/// Resolves and authorizes `given` for reading with `action`.
fn readable(
    roots: &Roots,
    cx: &CallContext,
    action: tool_api::ActionId,
    given: &str,
) -> Result<Authorized<Resolved>, ToolError> {
    let resolved = roots.resolve(given, None)?;
    cx.authorize(action, &resolved.resource(), resolved)
        .map_err(|e| with_path(given, roots, e))
}

fn permit(
    roots: &Roots,
    cx: &CallContext,
    action: tool_api::TypedAction<tool_api::Writes>,
    target: Resolved,
) -> Result<WritePermit, ToolError> {
    let given = target.given.clone();
    WritePermit::authorize(cx, action, target).map_err(|e| with_path(&given, roots, e))
}

fn io(given: &str, what: &str, e: &std::io::Error) -> ToolError {
    match e.kind() {
        std::io::ErrorKind::AlreadyExists => {
            ToolError::invalid_input(format!("{given}: {what}: it already exists"))
        }
        std::io::ErrorKind::NotFound => ToolError::new(
            ErrorCode::NotFound,
            format!("{given}: {what}: no such file or directory"),
        ),
        std::io::ErrorKind::FileTooLarge => ToolError::new(
            ErrorCode::OutputLimit,
            format!("{given}: {what}: too large"),
        ),
        std::io::ErrorKind::ResourceBusy => ToolError::new(
            ErrorCode::Busy,
            format!("{given}: {what}: the server is at its memory ceiling; retry shortly"),
        ),
        _ => ToolError::os(format!("{given}: {what}"), e),
    }
}

/// A tool of this connector as `system.info` names it, and whether its action is permitted.
fn capabilities(cx: &CallContext) -> std::collections::BTreeMap<String, String> {
    generated::TOOLS
        .iter()
        .filter(|t| t.connector == generated::shell::NAME)
        .map(|t| {
            let on = cx.permits(tool_api::ActionId::new(t.id), &tool_api::Host);
            (
                t.name.to_string(),
                if on { "on" } else { "off" }.to_string(),
            )
        })
        .collect()
}

impl ShellHandlers for ShellTools {
    async fn app_launch(
        &self,
        call: Authorized<AppLaunchArgs>,
        cx: &CallContext,
    ) -> Result<Reply<AppLaunchOutput>, ToolError> {
        let roots = self.roots.get();
        self.apps
            .launch(&roots, &self.terminal, cx, call.into_inner())
            .await
    }

    async fn app_close(
        &self,
        call: Authorized<AppCloseArgs>,
        cx: &CallContext,
    ) -> Result<Reply<AppCloseOutput>, ToolError> {
        self.apps.close(cx, call.into_inner()).await
    }

    async fn service_status(
        &self,
        call: Authorized<ServiceStatusArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ServiceStatusOutput>, ToolError> {
        self.services.status(cx, call.into_inner()).await
    }

    async fn service_control(
        &self,
        call: Authorized<ServiceControlArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ServiceControlOutput>, ToolError> {
        let roots = self.roots.get();
        self.services.control(&roots, cx, call.into_inner()).await
    }

    async fn browser_open(
        &self,
        call: Authorized<BrowserOpenArgs>,
        cx: &CallContext,
    ) -> Result<Reply<BrowserOpenOutput>, ToolError> {
        let roots = self.roots.get();
        super::browser::open(&self.browser, &roots, cx, call.into_inner()).await
    }

    async fn screen_capture(
        &self,
        call: Authorized<ScreenCaptureArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ScreenCaptureOutput>, ToolError> {
        super::shell_input::screen_capture(&self.desktop, cx, call.into_inner()).await
    }

    async fn input_click(
        &self,
        call: Authorized<InputClickArgs>,
        cx: &CallContext,
    ) -> Result<Reply<tool_api::NoOutput>, ToolError> {
        super::shell_input::input_click(&self.desktop, cx, call.into_inner()).await
    }

    async fn input_move(
        &self,
        call: Authorized<InputMoveArgs>,
        cx: &CallContext,
    ) -> Result<Reply<tool_api::NoOutput>, ToolError> {
        super::shell_input::input_move(&self.desktop, cx, call.into_inner()).await
    }

    async fn input_type(
        &self,
        call: Authorized<InputTypeArgs>,
        cx: &CallContext,
    ) -> Result<Reply<tool_api::NoOutput>, ToolError> {
        super::shell_input::input_type(&self.desktop, cx, call.into_inner()).await
    }

    async fn input_key(
        &self,
        call: Authorized<InputKeyArgs>,
        cx: &CallContext,
    ) -> Result<Reply<tool_api::NoOutput>, ToolError> {
        super::shell_input::input_key(&self.desktop, cx, call.into_inner()).await
    }

    async fn system_info(
        &self,
        _call: Authorized<SystemInfoArgs>,
        cx: &CallContext,
    ) -> Result<Reply<SystemInfoOutput>, ToolError> {
        let roots = self.roots.get();
        let host = crate::ops::host::facts();
        Ok(Reply::new(SystemInfoOutput {
            hostname: host.hostname,
            platform: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            os_release: host.release,
            uptime_s: host.uptime_s,
            cwd: roots.first().display().to_string(),
            roots: roots
                .all()
                .iter()
                .map(|r| r.display().to_string())
                .collect(),
            capabilities: capabilities(cx),
        }))
    }

    async fn fs_list(
        &self,
        call: Authorized<FsListArgs>,
        cx: &CallContext,
    ) -> Result<Reply<FsListOutput>, ToolError> {
        let roots = self.roots.get();
        let args = call.into_inner();
        let dir = readable(&roots, cx, actions::FS_LIST, &args.path)?;
        if dir.kind != Kind::Dir {
            return Err(ToolError::invalid_input(format!(
                "{}: not a directory",
                args.path
            )));
        }
        let max = limits::fs_list::MAX_ENTRIES;
        let (entries, total) = super::blocking(move || fs::list_dir(&dir, max))
            .await?
            .map_err(|e| io(&args.path, "cannot list", &e))?;
        let entries: Vec<FsEntry> = entries
            .into_iter()
            .map(|e| FsEntry {
                r#type: match e.kind {
                    Kind::File => FsEntryType::File,
                    Kind::Dir => FsEntryType::Directory,
                    Kind::Link => FsEntryType::Symlink,
                    Kind::Special | Kind::Missing => FsEntryType::Other,
                },
                name: e.name,
                size: e.size.and_then(|s| i64::try_from(s).ok()),
                mtime: e.mtime,
            })
            .collect();
        Ok(Reply::new(FsListOutput {
            path: args.path,
            truncated: total > entries.len(),
            entries,
        }))
    }

    async fn fs_read(
        &self,
        call: Authorized<FsReadArgs>,
        cx: &CallContext,
    ) -> Result<Reply<FsReadOutput>, ToolError> {
        let roots = self.roots.get();
        let args = call.into_inner();
        let file = readable(&roots, cx, actions::FS_READ, &args.path)?;
        if file.kind != Kind::File {
            return Err(ToolError::invalid_input(format!(
                "{}: not a file",
                args.path
            )));
        }
        let cap = limits::fs_read::MAX_READ.as_usize();
        let max = args
            .max_bytes
            .and_then(|m| usize::try_from(m).ok())
            .map_or(cap, |m| m.min(cap));
        let path = args.path.clone();
        let (bytes, size) = super::blocking(move || -> std::io::Result<(Vec<u8>, u64)> {
            use std::io::Read as _;
            let (f, _, size) = fs::open(&file)?;
            let mut bytes = Vec::with_capacity(max.min(usize::try_from(size).unwrap_or(max)));
            f.take(max as u64).read_to_end(&mut bytes)?;
            Ok((bytes, size))
        })
        .await?
        .map_err(|e| io(&path, "cannot read", &e))?;
        if bytes.contains(&0) {
            return Err(ToolError::invalid_input(format!("{path}: not a text file")));
        }
        let content = match String::from_utf8(bytes) {
            Ok(s) => s,
            // A cut may split the last character: keep what is whole.
            Err(e) if e.utf8_error().error_len().is_none() => {
                let valid = e.utf8_error().valid_up_to();
                let mut b = e.into_bytes();
                b.truncate(valid);
                String::from_utf8(b).unwrap_or_default()
            }
            Err(_) => return Err(ToolError::invalid_input(format!("{path}: not UTF-8 text"))),
        };
        Ok(Reply::new(FsReadOutput {
            truncated: (content.len() as u64) < size,
            size: i64::try_from(size).unwrap_or(i64::MAX),
            path,
            content,
        }))
    }

    async fn fs_write(
        &self,
        call: Authorized<FsWriteArgs>,
        cx: &CallContext,
    ) -> Result<Reply<FsWriteOutput>, ToolError> {
        let roots = self.roots.get();
        let args = call.into_inner();
        if args.content.len() > limits::fs_write::MAX_WRITE.as_usize() {
            return Err(ToolError::new(
                ErrorCode::OutputLimit,
                format!("content: over the limit of {}", limits::fs_write::MAX_WRITE),
            ));
        }
        let target = roots.resolve(&args.path, None)?;
        let mode = args.mode.unwrap_or(FsWriteArgsMode::Create);
        let kind = target.kind;
        let op = match mode {
            FsWriteArgsMode::Create => FsWriteOperation::Create,
            FsWriteArgsMode::Overwrite => FsWriteOperation::Overwrite,
            FsWriteArgsMode::Append => FsWriteOperation::Append,
        };
        // Decided before anything is said about what is there.
        let permit = permit(&roots, cx, op.write_action(), target)?;
        match (mode, kind) {
            (_, Kind::Dir) => {
                return Err(ToolError::invalid_input(format!(
                    "{}: is a directory",
                    args.path
                )));
            }
            (_, Kind::Special | Kind::Link) => {
                return Err(ToolError::new(
                    ErrorCode::PathNotAllowed,
                    format!("{}: not a regular file", args.path),
                ));
            }
            (FsWriteArgsMode::Create, Kind::File) => {
                return Err(ToolError::invalid_input(format!(
                    "{}: already exists; write it with mode overwrite or append",
                    args.path
                )));
            }
            (FsWriteArgsMode::Overwrite | FsWriteArgsMode::Append, Kind::Missing) => {
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    format!("{}: no such file; create it with mode create", args.path),
                ));
            }
            _ => {}
        }
        let path = args.path.clone();
        let written = args.content.len();
        super::blocking(move || -> Result<(), ToolError> {
            // A replaced file keeps its permission bits (never setuid, setgid or sticky).
            let (contents, file_mode) = match mode {
                FsWriteArgsMode::Append => {
                    let max = limits::fs_write::MAX_WRITE.get() * 4;
                    let whole = fs::read_all(permit.target(), max, 2)
                        .map_err(|e| io(&path, "cannot read", &e))?;
                    let mut bytes = whole.bytes;
                    bytes.reserve_exact(args.content.len());
                    bytes.extend_from_slice(args.content.as_bytes());
                    (bytes, Some(whole.mode & 0o777).filter(|m| *m != 0))
                }
                FsWriteArgsMode::Overwrite => {
                    let (_, bits, _) =
                        fs::open(permit.target()).map_err(|e| io(&path, "cannot open", &e))?;
                    (
                        args.content.into_bytes(),
                        Some(bits & 0o777).filter(|m| *m != 0),
                    )
                }
                // Made by someone else since the check: theirs, not replaced.
                FsWriteArgsMode::Create => {
                    return fs::write_new(&permit, args.content.as_bytes()).map_err(|e| {
                        if e.kind() == std::io::ErrorKind::AlreadyExists {
                            ToolError::invalid_input(format!("{path}: {e}"))
                        } else {
                            io(&path, "cannot write", &e)
                        }
                    });
                }
            };
            fs::write_atomic(&permit, &contents, file_mode)
                .map_err(|e| io(&path, "cannot write", &e))
        })
        .await??;
        Ok(Reply::new(FsWriteOutput {
            path: args.path,
            bytes_written: i64::try_from(written).unwrap_or(i64::MAX),
        }))
    }

    async fn fs_mkdir(
        &self,
        call: Authorized<FsMkdirArgs>,
        cx: &CallContext,
    ) -> Result<Reply<FsMkdirOutput>, ToolError> {
        let roots = self.roots.get();
        let args = call.into_inner();
        let target = roots.resolve(&args.path, None)?;
        let permit = permit(&roots, cx, actions::FS_MKDIR_WRITE, target)?;
        let parents = args.recursive == Some(true);
        let path = args.path.clone();
        let created = super::blocking(move || fs::make_dir(&permit, parents))
            .await?
            .map_err(|e| io(&path, "cannot make the directory", &e))?;
        Ok(Reply::new(FsMkdirOutput {
            path: args.path,
            created,
        }))
    }

    async fn fs_move(
        &self,
        call: Authorized<FsMoveArgs>,
        cx: &CallContext,
    ) -> Result<Reply<FsMoveOutput>, ToolError> {
        let roots = self.roots.get();
        let args = call.into_inner();
        let write = actions::FS_MOVE_WRITE;
        let from = roots.resolve_entry(&args.source, None)?;
        let to = roots.resolve_entry(&args.destination, None)?;
        let (from_kind, to_kind) = (from.kind, to.kind);
        let from = permit(&roots, cx, write, from)?;
        let to = permit(&roots, cx, write, to)?;
        match (from_kind, to_kind) {
            (Kind::File | Kind::Link, Kind::Missing) => {}
            (Kind::Missing, _) => {
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    format!("{}: no such file", args.source),
                ));
            }
            (Kind::Dir, _) => {
                return Err(ToolError::invalid_input(format!(
                    "{}: is a directory; fs.move moves files and links",
                    args.source
                )));
            }
            (Kind::Special, _) => {
                return Err(ToolError::new(
                    ErrorCode::PathNotAllowed,
                    format!("{}: not a regular file", args.source),
                ));
            }
            (_, _) => {
                return Err(ToolError::invalid_input(format!(
                    "{}: already exists; fs.move never replaces",
                    args.destination
                )));
            }
        }
        let source = args.source.clone();
        super::blocking(move || fs::move_entry(&from, &to))
            .await?
            .map_err(|e| io(&source, "cannot move", &e))?;
        Ok(Reply::new(FsMoveOutput {
            source: args.source,
            destination: args.destination,
        }))
    }

    async fn fs_delete(
        &self,
        call: Authorized<FsDeleteArgs>,
        cx: &CallContext,
    ) -> Result<Reply<FsDeleteOutput>, ToolError> {
        let roots = self.roots.get();
        let args = call.into_inner();
        let target = roots.resolve_entry(&args.path, None)?;
        let kind = target.kind;
        let permit = permit(&roots, cx, actions::FS_DELETE_WRITE, target)?;
        let path = args.path.clone();
        let removed = match kind {
            Kind::File => super::blocking(move || fs::remove_file(&permit)).await?,
            Kind::Link => super::blocking(move || fs::remove_link(&permit)).await?,
            Kind::Missing => {
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    format!("{path}: no such file"),
                ));
            }
            Kind::Dir => {
                return Err(ToolError::invalid_input(format!(
                    "{path}: is a directory; the write_delete permission deletes files and links only"
                )));
            }
            Kind::Special => {
                return Err(ToolError::new(
                    ErrorCode::PathNotAllowed,
                    format!("{path}: not a regular file"),
                ));
            }
        };
        removed.map_err(|e| io(&path, "cannot delete", &e))?;
        Ok(Reply::new(FsDeleteOutput { path: args.path }))
    }

    async fn shell_exec(
        &self,
        call: Authorized<ShellExecArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ShellExecOutput>, ToolError> {
        let roots = self.roots.get();
        let args = call.into_inner();
        if args.command.is_empty() || args.command.contains('\0') {
            return Err(ToolError::invalid_input("command: name a program"));
        }
        let cwd = match &args.cwd {
            Some(c) => {
                let dir = readable(&roots, cx, actions::SHELL_EXEC, c)?;
                if dir.kind != Kind::Dir {
                    return Err(ToolError::invalid_input(format!(
                        "cwd: `{c}` is not a directory"
                    )));
                }
                dir.into_inner().path
            }
            None => roots.first().to_path_buf(),
        };
        let env = args.env.unwrap_or_default();
        check_program_env(&env)?;
        // The program as it will start: found on gantry's own PATH (the call cannot change
        // it), or the absolute path given. One inside the roots is the model's to write.
        let program = program::resolve(&args.command).ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                format!("command: `{}` is not a program on PATH", args.command),
            )
        })?;
        let inside_root = roots.contains(&program);
        let allowed = self.allows(&args.command, &program);
        let runs_files = self.runs_files(&args.command, &program);
        let program_args = args.args.unwrap_or_default();
        let captures_display = self.captures_display(&args.command, &program, &program_args);
        let display_env = env.keys().any(|k| DISPLAY_VARS.contains(&k.as_str()));
        let probe = Program {
            id: args.command.clone(),
            allowed,
            inside_root,
            display_env: true,
            runs_files,
            any_program: self.allowed.iter().any(|a| a == "*"),
            captures_display,
        };
        let env_remove = if cx.permits(actions::SHELL_EXEC, &probe) {
            Vec::new()
        } else {
            DISPLAY_VARS.iter().map(|v| (*v).to_string()).collect()
        };
        let timeout = args
            .timeout_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .map_or(
                limits::shell_exec::DEFAULT_TIMEOUT.duration(),
                std::time::Duration::from_millis,
            )
            .min(limits::shell_exec::MAX_TIMEOUT.duration());
        let run = ProgramRun {
            program,
            name: args.command.clone(),
            args: program_args,
            cwd,
            env,
            env_remove,
            timeout,
            max_output: limits::shell_exec::MAX_OUTPUT.as_usize(),
            launcher: self.terminal.launcher(),
            group: self.terminal.new_group(),
        };
        let resource = Program {
            id: args.command,
            allowed,
            inside_root,
            display_env,
            runs_files,
            any_program: self.allowed.iter().any(|a| a == "*"),
            captures_display,
        };
        let run = cx.authorize(actions::SHELL_EXEC, &resource, run)?;
        let o = program::run(&self.programs, run).await?;
        Ok(Reply::new(ShellExecOutput {
            exit_code: o.exit_code.map(i64::from),
            stdout: o.stdout,
            stderr: o.stderr,
            duration_ms: i64::try_from(o.duration.as_millis()).unwrap_or(i64::MAX),
            timed_out: o.timed_out,
            truncated: o.truncated,
        }))
    }

    async fn process_list(
        &self,
        _call: Authorized<ProcessListArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ProcessListOutput>, ToolError> {
        // This connector's own: another connector's sessions answer only to it.
        let owner = cx.owner();
        let mut processes: Vec<ProcessInfo> = self
            .terminal
            .list()
            .into_iter()
            .filter(|s| !s.exited && s.owner == owner)
            .map(|s| ProcessInfo {
                pid: i64::from(s.pid),
                ppid: Some(i64::from(std::process::id())),
                user: None,
                command: s.command,
                args: None,
                kind: ProcessInfoKind::Session,
            })
            .collect();
        processes.extend(
            self.programs
                .list()
                .into_iter()
                .map(|(pid, command, args)| ProcessInfo {
                    pid: i64::from(pid),
                    ppid: Some(i64::from(std::process::id())),
                    user: None,
                    command,
                    args: Some(args),
                    kind: ProcessInfoKind::Program,
                }),
        );
        Ok(Reply::new(ProcessListOutput { processes }))
    }

    async fn process_kill(
        &self,
        call: Authorized<ProcessKillArgs>,
        cx: &CallContext,
    ) -> Result<Reply<ProcessKillOutput>, ToolError> {
        let args = call.into_inner();
        let pid = u32::try_from(args.pid)
            .ok()
            .filter(|p| *p > 1)
            .ok_or_else(|| {
                ToolError::invalid_input(format!("pid: {} is not a process id", args.pid))
            })?;
        // gantry itself, and what started it (a stdio client), are never signalled.
        if pid == std::process::id() || Some(pid) == crate::ops::host::parent_pid() {
            return Err(ToolError::invalid_input(format!(
                "pid: {pid} is gantry or the program that started it"
            )));
        }
        let signal = args.signal.unwrap_or(ProcessKillArgsSignal::Term);
        let owner = cx.owner();
        let session = self
            .terminal
            .list()
            .into_iter()
            .find(|s| s.pid == pid && !s.exited && s.owner == owner);
        let program = self.programs.contains(pid);
        let resource = Process {
            id: pid.to_string(),
            started_by_gantry: session.is_some() || program,
        };
        let pid = cx
            .authorize(actions::PROCESS_KILL, &resource, pid)?
            .into_inner();
        match session {
            // A command session ends as a whole, with its process tree.
            Some(s) => {
                self.terminal.end_any(s.id).await;
            }
            None => program::signal(pid, signal.as_str(), program)?,
        }
        Ok(Reply::new(ProcessKillOutput {
            pid: i64::from(pid),
            signal: signal.as_str().to_string(),
        }))
    }
}

/// Variables a call may give a program: locale and terminal ones, and the desktop's (which
/// the policies decide). Anything else could choose what runs (`PATH`, `LD_PRELOAD`,
/// `BASH_ENV`, `GIT_CONFIG_*`...), which the allow-list is there to decide.
fn check_program_env(env: &std::collections::BTreeMap<String, String>) -> Result<(), ToolError> {
    const PLAIN: &[&str] = &[
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "COLUMNS",
        "LINES",
    ];
    super::exec::check_env(env)?;
    for k in env.keys() {
        let ok = PLAIN.contains(&k.as_str())
            || k.starts_with("LC_")
            || DISPLAY_VARS.contains(&k.as_str());
        if !ok {
            return Err(ToolError::invalid_input(format!(
                "env: `{k}` cannot be set for a program (only locale and terminal variables: LANG, LC_*, TZ, TERM, NO_COLOR, COLUMNS, LINES)"
            )));
        }
    }
    Ok(())
}
