//! The config file and the effective settings of a run.
//!
//! A missing config file means a fresh config: every permission at its platform default,
//! read-only off, the current directory as the one approved root. A config file that exists
//! but does not parse, names an unknown permission or has an unknown key stops the server with
//! `file:line:column` and the reason: fail closed, never a silent default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::paths::absolute;

use serde::Deserialize;
use tool_api::Platform;

use crate::cli::CommonArgs;

/// Default HTTP port.
pub const DEFAULT_PORT: u16 = 3210;
/// Default listen address.
pub const DEFAULT_HOST: &str = "127.0.0.1";
/// Default idle time after which a command session is ended.
pub const DEFAULT_SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// A problem with the settings, located as precisely as possible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Something in the config file, at a known place.
    #[error("{file}:{line}:{column}: {reason}")]
    At {
        /// The config file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        reason: String,
    },
    /// A setting that is wrong as a whole (a root that does not exist...).
    #[error("{what}: {reason}")]
    Setting {
        /// Which setting, and where it came from.
        what: String,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    read_only: Option<bool>,
    roots: Option<Vec<String>>,
    host: Option<String>,
    port: Option<u16>,
    state_dir: Option<String>,
    policies: Option<String>,
    public_host: Option<String>,
    allowed_hosts: Option<Vec<String>>,
    allowed_origins: Option<Vec<String>>,
    session_idle: Option<toml::Spanned<String>>,
    audit_command_lines: Option<bool>,
    /// Files MCP clients read to start servers, beyond surface.toml's list.
    #[serde(default)]
    client_launch_files: Vec<String>,
    exec: Option<ExecSection>,
    session: Option<SessionSection>,
    desktop: Option<DesktopSection>,
    zodex: Option<ZodexSection>,
    shell: Option<ShellSection>,
    browser: Option<crate::browser::BrowserConfig>,
    services: Option<crate::services::ServicesConfig>,
    /// The applications `app.launch` may start, by name.
    #[serde(default)]
    apps: BTreeMap<String, crate::apps::AppConfig>,
    gateway: Option<GatewaySection>,
    /// The user's other machines, by name.
    #[serde(default)]
    hosts: BTreeMap<String, crate::machines::MachineConfig>,
    agents: Option<crate::worker_kinds::AgentsSection>,
    /// Per connector: `"all"` (default) or `"progressive"`.
    #[serde(default)]
    disclosure: BTreeMap<String, String>,
    /// Per connector: `"oauth"`, `"url-secret"` or `"both"` (HTTP only).
    #[serde(default)]
    auth: BTreeMap<String, String>,
    #[serde(default)]
    permissions: BTreeMap<toml::Spanned<String>, bool>,
}

/// `[session]`: what recorded sessions hold and show.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionSection {
    /// Regular expressions whose matches are replaced by `[redacted]` when a call is recorded.
    #[serde(default)]
    redact: Vec<String>,
    /// Show imported sessions whatever their working directory (default: only those inside
    /// an approved root).
    all_directories: Option<bool>,
    /// Agents' transcript locations: `codex`, `claude`, `gemini`, `opencode`; `false` turns
    /// one off, a path replaces its default location.
    #[serde(default)]
    sources: BTreeMap<String, SourceSetting>,
}

/// `[desktop]`: how desktop steps share the machine with the person at it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DesktopSection {
    /// Stop a `computer` batch when the user moves the mouse or holds a key (default on).
    yield_to_user: Option<bool>,
}

/// `[zodex]`: what the Zodex connector adds to its answers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ZodexSection {
    /// A workdir's first command also says whether it has AGENTS.md and which skills
    /// `.agents/skills` holds (default on).
    workdir_context: Option<bool>,
}

/// `[shell]`: what the Shell connector's `shell.exec` may run.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellSection {
    /// Programs by the name `shell.exec` is given (`git`, `/usr/bin/make`); `"*"` allows any.
    #[serde(default)]
    allowed_commands: Vec<String>,
    /// Programs that run what the working tree or its config says (replaces the default list).
    runs_files: Option<Vec<String>>,
    /// Programs that capture the screen or drive its input (replaces the default list).
    display_programs: Option<Vec<String>>,
}

/// The programs that execute content from the working tree or its config (a Makefile,
/// `.git/config`'s hooks and fsmonitor, package.json scripts, build scripts, any script
/// file): the default of `[shell] runs_files`. Allowing one in `[shell] allowed_commands`
/// also needs `exec`, since the model can write what it runs.
#[rustfmt::skip]
pub const DEFAULT_RUNS_FILES: &[&str] = &[
    // Build tools and task runners: they run what the tree's build files say.
    "make", "gmake", "bmake", "cmake", "ninja", "meson", "just", "rake", "mvn", "gradle",
    "ant", "sbt", "bazel", "bazelisk", "buck", "buck2", "scons", "waf", "xmake", "task",
    // Version control: hooks, `core.fsmonitor`, filters and aliases from `.git/config`.
    "git", "hg", "svn",
    // Package managers and language runtimes: scripts, build scripts, `*.py`, `*.js`...
    "npm", "npx", "pnpm", "pnpx", "yarn", "corepack", "bun", "bunx", "deno", "node", "nodejs",
    "cargo", "rustc", "go", "python", "python3", "pip", "pip3", "pipx", "uv", "uvx", "poetry",
    "pdm", "hatch", "pytest", "tox", "nox", "ruby", "bundle", "gem", "perl", "php", "composer",
    "lua", "luajit", "r", "rscript", "julia", "java", "dotnet", "mono", "swift", "kotlin",
    "gcc", "cc", "clang", "tclsh", "wish", "expect", "osascript", "sqlite3",
    // Shells, and programs that run what their arguments say.
    "bash", "sh", "dash", "zsh", "fish", "ksh", "mksh", "csh", "tcsh", "busybox", "env",
    "xargs", "find", "awk", "gawk", "mawk", "nawk", "sed", "tar", "zip", "ssh", "rsync", "watch",
    "timeout", "nice", "nohup", "setsid", "sudo", "doas", "su", "runuser", "pkexec", "script",
    "parallel", "vim", "vi", "nvim", "emacs", "ed", "less", "more", "man", "docker", "podman",
    "kubectl", "terraform", "ansible", "nix", "pwsh", "powershell", "cmd", "wsl", "flock",
    "stdbuf", "ld.so", "ld-linux", "strace", "ltrace", "gdb", "lldb", "valgrind", "unshare",
    "nsenter", "chroot", "ionice", "taskset", "chrt", "prlimit", "systemd-run", "firejail",
    "bwrap", "openssl", "time", "at", "batch", "crontab",
];

/// The programs that capture the screen or drive its input: the default of `[shell]
/// display_programs`, which `shell.exec` refuses while `host_display` is off. Without the
/// session's variables most of them cannot reach it anyway; the list is a second fence
/// against the obvious ones, never isolation.
#[rustfmt::skip]
pub const DEFAULT_DISPLAY_PROGRAMS: &[&str] = &[
    // Screenshots and recordings.
    "import", "scrot", "grim", "slurp", "maim", "xwd", "gnome-screenshot", "spectacle",
    "flameshot", "shutter", "ksnip", "xfce4-screenshooter", "mate-screenshot", "deepin-screenshot",
    "screencapture", "screenshot", "wf-recorder", "recordmydesktop", "simplescreenrecorder",
    "vokoscreen", "vokoscreenng", "peek", "kazam", "obs", "x11vnc", "x0vncserver", "wayvnc",
    "vncsnapshot", "grimshot", "grimblast", "xwininfo", "xprop", "xdpyinfo", "xsel", "xclip",
    "copyq", "wl-copy", "wl-paste", "snippingtool", "psr",
    // The session's own controls: windows, access, the compositor, the session bus.
    "xkill", "xhost", "xauth", "i3-msg", "swaymsg", "hyprctl", "gdbus", "dbus-send",
    // Input.
    "xdotool", "ydotool", "wtype", "xte", "xinput", "xmodmap", "xsendkey", "cliclick",
    "nircmd", "autohotkey",
];

/// Arguments that ask an otherwise ordinary program (ffmpeg, gstreamer, vlc...) for a capture
/// of the screen, matched as a part of any argument, any case.
pub const DISPLAY_CAPTURE_ARGUMENTS: &[&str] = &[
    "x11grab",
    "kmsgrab",
    "gdigrab",
    "ddagrab",
    "avfoundation",
    "ximagesrc",
    "pipewiresrc",
    "waylanddisplaysrc",
    "dx9screencapsrc",
    "d3d11screencapturesrc",
    "screen://",
    "d3d12screencapturesrc",
    "dxgiscreencapsrc",
    "gdiscreencapsrc",
    "capture-screen",
    // ffmpeg reading its filter graph (which may name a grabber) from a file the model wrote.
    "filter_complex_script",
    "filter_script",
    "-/filter",
];

/// ImageMagick's and GraphicsMagick's programs: for them an argument starting `x:` (the X
/// coder: `x:root`, `x:0x1a00007`) reads the screen, and so does their `import` command.
pub const MAGICK_PROGRAMS: &[&str] = &[
    "magick",
    "convert",
    "gm",
    "montage",
    "composite",
    "mogrify",
    "stream",
    "compare",
    "identify",
    "display",
    "animate",
    "conjure",
];

/// ImageMagick's X coder, as an argument's start.
const X_CODER: &str = "x:";

/// Whether `arg` asks its program for a capture of the screen ([`DISPLAY_CAPTURE_ARGUMENTS`]),
/// also once the escapes a program undoes itself are taken out (ffmpeg's filter graphs and
/// GStreamer's pipelines read `x11\grab` and `'x11'grab` as `x11grab`).
pub fn asks_for_a_capture(arg: &str) -> bool {
    let (arg, unescaped) = unescaped(arg);
    DISPLAY_CAPTURE_ARGUMENTS
        .iter()
        .any(|a| arg.contains(a) || unescaped.contains(a))
}

/// `arg` in lower case, as given and with backslashes and quotes taken out.
fn unescaped(arg: &str) -> (String, String) {
    let arg = arg.to_lowercase();
    let unescaped = arg
        .chars()
        .filter(|c| !matches!(c, '\\' | '\'' | '"'))
        .collect();
    (arg, unescaped)
}

/// Whether `program` (its file name) is one of [`MAGICK_PROGRAMS`] and `arg` asks it for the
/// screen: its X coder (`x:root`) or its `import` command (`magick import`, `gm import`).
/// Windows has no X coder, and there `x:` starts a drive.
pub fn asks_magick_for_the_screen(program: &std::path::Path, arg: &str) -> bool {
    let name = program
        .file_stem()
        .and_then(|n| n.to_str())
        .map(str::to_lowercase)
        .unwrap_or_default();
    if cfg!(windows) || !MAGICK_PROGRAMS.contains(&name.as_str()) {
        return false;
    }
    let (_, unescaped) = unescaped(arg);
    unescaped.starts_with(X_CODER) || unescaped.contains("'x:") || unescaped == "import"
}

#[cfg(test)]
mod capture_tests {
    use super::asks_for_a_capture;

    #[test]
    fn capture_words_are_found_through_the_escapes_their_programs_undo() {
        for arg in [
            "x11grab",
            "-f=X11GRAB",
            "movie=:0:f=x11\\grab",
            "ximage'src'",
            "-filter_complex_script",
        ] {
            assert!(asks_for_a_capture(arg), "{arg}");
        }
        for arg in ["linux:amd64", "-x", "x:root", "X:\\data", "grab", "x11"] {
            assert!(!asks_for_a_capture(arg), "{arg}");
        }
        let magick = std::path::Path::new("/usr/bin/convert");
        for arg in ["x:root", "X:0x1a00007", "import"] {
            assert_eq!(
                super::asks_magick_for_the_screen(magick, arg),
                !cfg!(windows),
                "{arg}"
            );
        }
        let printf = std::path::Path::new("/usr/bin/printf");
        assert!(!super::asks_magick_for_the_screen(printf, "x: 1"));
        assert!(!super::asks_magick_for_the_screen(magick, "photo.png"));
    }
}

/// `[gateway]`: the upstream MCP servers the Gateway connector serves.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewaySection {
    #[serde(default)]
    servers: BTreeMap<String, crate::upstream::UpstreamConfig>,
}

/// One `[session.sources]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum SourceSetting {
    On(bool),
    At(String),
}

/// `[exec]`: how commands run.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecSection {
    /// `"off"` (default) or `"roots"`.
    confine: Option<toml::Spanned<String>>,
    warm_shell: Option<bool>,
    /// Each session in a cgroup v2 group of its own where one can be created (default on).
    cgroup: Option<bool>,
}

/// The settings of this run, every source merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The config file consulted (it may not exist).
    pub config_path: PathBuf,
    /// Whether it existed.
    pub config_exists: bool,
    /// Whether it set anything (a file that is empty, only comments or only empty tables
    /// sets nothing).
    pub config_has_settings: bool,
    /// The version of the config file read, from the open file (`None`: there was none).
    pub config_stamp: state_dir::Stamp,
    /// Tokens, audit log, spill files.
    pub state_dir: PathBuf,
    /// Approved roots as configured (absolute, not yet resolved).
    pub roots: Vec<PathBuf>,
    /// Policy directory replacing the built-in policies.
    pub policies_dir: Option<PathBuf>,
    /// Listen address.
    pub host: String,
    /// Listen port (0 = any).
    pub port: u16,
    /// Read-only mode.
    pub read_only: bool,
    /// Stored permission choices, every permission of the surface present.
    pub permissions: BTreeMap<&'static str, bool>,
    /// Extra accepted Host header values.
    pub allowed_hosts: Vec<String>,
    /// The tunnel's public authority (`name` or `name:port`), when one was given.
    pub public_host: Option<String>,
    /// Browser origins accepted (any other Origin is refused).
    pub allowed_origins: Vec<String>,
    /// A command session unused this long is ended.
    pub session_idle: std::time::Duration,
    /// Whether audit lines keep command lines (off: the content-safe audit).
    pub audit_command_lines: bool,
    /// Client launch files the config adds (the end of a path, `/`-separated).
    pub client_launch_files: Vec<String>,
    /// Keep one shell started ahead of the next command (bash with a snapshot).
    pub warm_shell: bool,
    /// Each command session in a cgroup of its own where one can be created.
    pub exec_cgroup: bool,
    /// Commands may write only below the roots and a private temp directory.
    pub exec_confine: bool,
    /// Patterns redacted from recorded calls.
    pub session_redact: Vec<String>,
    /// Imported sessions are shown whatever their directory.
    pub session_all_directories: bool,
    /// Transcript sources to import: (source, directory), the ones turned on.
    pub session_sources: Vec<(String, PathBuf)>,
    /// Whether the root is the current directory because none was given.
    pub defaulted_root: bool,
    /// The config file's own `roots`, expanded (`None` when it names none), whatever the
    /// flags or the environment chose for this run.
    pub roots_in_file: Option<Vec<PathBuf>>,
    /// A desktop batch stops when the user moves the mouse or types.
    pub desktop_yield_to_user: bool,
    /// The Zodex connector's first command in a workdir tells of its AGENTS.md and skills.
    pub zodex_workdir_context: bool,
    /// The programs the Shell connector's `shell.exec` may run (`*`: any).
    pub shell_allowed_commands: Vec<String>,
    /// The programs that run files of the working tree (`[shell] runs_files`).
    pub shell_runs_files: Vec<String>,
    /// The programs that capture the screen or drive its input (`[shell] display_programs`).
    pub shell_display_programs: Vec<String>,
    /// What `browser.open` starts and may open (`[browser]`).
    pub browser: crate::browser::BrowserConfig,
    /// The applications `app.launch` may start (`[apps.NAME]`), by name.
    pub apps: Vec<(String, crate::apps::AppConfig)>,
    /// The services `service.status` and `service.control` may reach (`[services]`).
    pub services: crate::services::ServicesConfig,
    /// The Gateway connector's upstream servers, by name.
    pub gateway_servers: Vec<(String, crate::upstream::UpstreamConfig)>,
    /// The Hosts connector's machines, by name.
    pub machines: Vec<(String, crate::machines::MachineConfig)>,
    /// Worker agents: slots, ceiling, kinds.
    pub agents: crate::worker_kinds::AgentsConfig,
    /// Connectors whose stdio connections start with their first tools only.
    pub progressive: Vec<String>,
    /// How each connector's HTTP endpoint is opened; connectors not named use
    /// [`Settings::auth_of`]'s default.
    pub auth: BTreeMap<String, AuthMode>,
}

fn home() -> Option<PathBuf> {
    std::env::var_os(if cfg!(windows) { "USERPROFILE" } else { "HOME" })
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The error for a per-connector table (`[disclosure]`, `[auth]`) naming no connector.
fn not_a_connector(name: &str, what: String) -> Option<ConfigError> {
    (!generated::CONNECTORS.iter().any(|c| c.name == name)).then(|| ConfigError::Setting {
        what,
        reason: format!(
            "not a connector ({})",
            generated::CONNECTORS
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// How a connector's HTTP endpoint is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// A bearer token from gantry's OAuth sign-in, approved by the user; the URL secret
    /// alone opens nothing.
    OAuth,
    /// The secret in the connector's URL (or as a bearer token).
    UrlSecret,
    /// Either, during a change-over.
    Both,
}

impl AuthMode {
    fn parse(s: &str) -> Option<AuthMode> {
        match s {
            "oauth" => Some(AuthMode::OAuth),
            "url-secret" => Some(AuthMode::UrlSecret),
            "both" => Some(AuthMode::Both),
            _ => None,
        }
    }

    /// As the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::OAuth => "oauth",
            AuthMode::UrlSecret => "url-secret",
            AuthMode::Both => "both",
        }
    }

    /// Whether an OAuth access token opens the connector.
    pub fn oauth(self) -> bool {
        matches!(self, AuthMode::OAuth | AuthMode::Both)
    }

    /// Whether the URL secret opens the connector.
    pub fn url_secret(self) -> bool {
        matches!(self, AuthMode::UrlSecret | AuthMode::Both)
    }
}

impl Settings {
    /// How `connector`'s HTTP endpoint is opened: as `[auth]` says, else OAuth when a public
    /// host is set (the connector is then reachable from the internet) and the URL secret
    /// when it is not.
    pub fn auth_of(&self, connector: &str) -> AuthMode {
        match self.auth.get(connector) {
            Some(mode) => *mode,
            None if self.public_host.is_some() => AuthMode::OAuth,
            None => AuthMode::UrlSecret,
        }
    }

    /// How each connector of the surface is opened over HTTP.
    pub fn auth_modes(&self) -> Vec<(&'static str, AuthMode)> {
        generated::CONNECTORS
            .iter()
            .map(|c| (c.name, self.auth_of(c.name)))
            .collect()
    }

    /// The issuer of gantry's sign-in (and the origin of its public URLs): `https://` and
    /// the public host; `http://` when that host is this machine (a test, or a proxy on it).
    pub fn issuer(&self) -> Option<String> {
        self.public_host.as_deref().map(crate::urls::public_origin)
    }
}

impl Settings {
    /// Why the roots cannot be served: none was given and the current directory is the whole
    /// disk or the home directory, where a client that launches gantry would hand the model
    /// everything without anyone choosing it. Serving, `check` and `config` refuse it.
    pub fn default_root_problem(&self) -> Option<String> {
        let cwd = self.roots.first().filter(|_| self.defaulted_root)?;
        too_wide_for_a_default_root(cwd).map(|why| {
            format!(
                "roots: no root was given, and the current directory {} is {why}; choose one with --root DIR (or GANTRY_ROOTS, or `roots` in the config file)",
                cwd.display()
            )
        })
    }
}

/// Why `dir` may not be an approved root unless the user names it: it is a filesystem root
/// (`/`, a drive root) or the home directory.
pub(crate) fn too_wide_for_a_default_root(dir: &Path) -> Option<&'static str> {
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if canonical.parent().is_none() {
        return Some("the root of the filesystem");
    }
    let home = home().and_then(|h| std::fs::canonicalize(h).ok());
    (home.as_deref() == Some(canonical.as_path())).then_some("your home directory")
}

/// Whether the program named by `path` (its file name) is one of `list`'s programs (those
/// that run files, or capture the screen): the name itself (without a Windows extension, any case), or the name and a suffix
/// that is not more of a word: a version (`python3.12`, `perl5.36-x86_64-linux-gnu`) or a
/// variant (`make-first-existing-target`, `git-lfs`), never another word (`shellcheck` is not
/// `sh`).
pub fn names_program(list: &[String], path: &Path) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    let name = name.to_string_lossy().to_lowercase();
    let name = [".exe", ".cmd", ".bat", ".com"]
        .iter()
        .find_map(|x| name.strip_suffix(x))
        .unwrap_or(&name);
    list.iter().any(|entry| {
        name.strip_prefix(&entry.to_lowercase())
            .is_some_and(|rest| rest.chars().next().is_none_or(|c| !c.is_ascii_alphabetic()))
    })
}

/// Whether a table holds a value anywhere (`[permissions]` alone holds none).
fn sets_anything(table: &toml::Table) -> bool {
    table.values().any(|v| match v {
        toml::Value::Table(t) => sets_anything(t),
        _ => true,
    })
}

/// Where the config file lives when no flag or environment names one.
pub fn default_config_path() -> PathBuf {
    let base = match Platform::current() {
        Platform::Windows => env_dir("APPDATA"),
        Platform::Macos => home().map(|h| h.join("Library/Application Support")),
        Platform::Linux => env_dir("XDG_CONFIG_HOME").or_else(|| home().map(|h| h.join(".config"))),
    };
    base.unwrap_or_else(|| PathBuf::from("."))
        .join("gantry")
        .join("config.toml")
}

/// Where state lives when nothing names a state directory.
pub fn default_state_dir() -> PathBuf {
    let base = match Platform::current() {
        Platform::Windows => env_dir("LOCALAPPDATA"),
        Platform::Macos => home().map(|h| h.join("Library/Application Support")),
        Platform::Linux => {
            env_dir("XDG_STATE_HOME").or_else(|| home().map(|h| h.join(".local/state")))
        }
    };
    base.unwrap_or_else(|| PathBuf::from(".")).join("gantry")
}

fn expand(raw: &str, relative_to: &Path) -> PathBuf {
    let path = match raw
        .strip_prefix("~/")
        .or_else(|| (raw == "~").then_some(""))
    {
        Some(rest) => match home() {
            Some(h) => h.join(rest),
            None => PathBuf::from(raw),
        },
        None => PathBuf::from(raw),
    };
    absolute(relative_to, &path)
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        line,
        text.get(start..offset).map_or(1, |s| s.chars().count() + 1),
    )
}

/// Names where a value set by flag or environment came from: the variable when the flag was
/// not on the command line.
pub fn from_env_or_flag(flag: &str, variable: &str) -> String {
    let on_command_line = std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")));
    if !on_command_line && std::env::var_os(variable).is_some() {
        format!("{variable} (environment)")
    } else {
        flag.to_string()
    }
}

impl Settings {
    /// Merges flags and environment (`args`), the config file and the defaults.
    pub fn resolve(args: &CommonArgs) -> Result<Settings, Vec<ConfigError>> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let config_path = args.config.clone().unwrap_or_else(default_config_path);
        let config_path = absolute(&cwd, &config_path);
        let shown = config_path.display().to_string();
        let mut errors = Vec::new();

        let mut config_stamp = None;
        let (file, text, exists) = match state_dir::read_own_input(&config_path) {
            Ok(state_dir::OwnInput { text, stamp }) => match toml::from_str::<ConfigFile>(&text) {
                Ok(file) => {
                    config_stamp = stamp;
                    (file, text, true)
                }
                Err(e) => {
                    let (line, column) = line_column(&text, e.span().map_or(0, |s| s.start));
                    return Err(vec![ConfigError::At {
                        file: shown,
                        line,
                        column,
                        reason: e.message().trim().to_string(),
                    }]);
                }
            },
            Err(state_dir::OwnInputError::Missing) => (ConfigFile::default(), String::new(), false),
            Err(e) => {
                return Err(vec![ConfigError::Setting {
                    what: format!("config file {shown}"),
                    reason: e.to_string(),
                }]);
            }
        };
        let config_dir = config_path
            .parent()
            .map_or_else(|| cwd.clone(), Path::to_path_buf);

        let platform = Platform::current();
        let mut permissions: BTreeMap<&'static str, bool> = generated::PERMISSIONS
            .iter()
            .map(|p| (p.name, p.default.get(platform)))
            .collect();
        for (name, on) in &file.permissions {
            match generated::PERMISSIONS
                .iter()
                .find(|p| p.name == name.get_ref())
            {
                Some(p) => {
                    permissions.insert(p.name, *on);
                }
                None => {
                    let (line, column) = line_column(&text, name.span().start);
                    let known: Vec<&str> = generated::PERMISSIONS.iter().map(|p| p.name).collect();
                    errors.push(ConfigError::At {
                        file: shown.clone(),
                        line,
                        column,
                        reason: format!(
                            "unknown permission `{}` (known: {})",
                            name.get_ref(),
                            known.join(", ")
                        ),
                    });
                }
            }
        }

        let env_roots: Vec<PathBuf> = std::env::var_os("GANTRY_ROOTS")
            .filter(|v| !v.is_empty())
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        let mut defaulted_root = false;
        let roots_in_file: Option<Vec<PathBuf>> = file
            .roots
            .as_ref()
            .map(|list| list.iter().map(|r| expand(r, &config_dir)).collect());
        let roots: Vec<PathBuf> = if !args.roots.is_empty() {
            args.roots.iter().map(|r| absolute(&cwd, r)).collect()
        } else if !env_roots.is_empty() {
            env_roots.into_iter().map(|r| absolute(&cwd, &r)).collect()
        } else if let Some(list) = &roots_in_file {
            list.clone()
        } else {
            defaulted_root = true;
            vec![cwd.clone()]
        };
        if roots.is_empty() {
            errors.push(ConfigError::Setting {
                what: "roots".into(),
                reason: "no approved root; give --root DIR or set roots in the config".into(),
            });
        }

        let state_dir = match (&args.state_dir, &file.state_dir) {
            (Some(d), _) => absolute(&cwd, d),
            (None, Some(d)) => expand(d, &config_dir),
            (None, None) => default_state_dir(),
        };
        let policies_dir = match (&args.policies, &file.policies) {
            (Some(d), _) => Some(absolute(&cwd, d)),
            (None, Some(d)) => Some(expand(d, &config_dir)),
            (None, None) => None,
        };
        let mut allowed_hosts = Vec::new();
        let given_hosts = file
            .allowed_hosts
            .iter()
            .flatten()
            .map(|h| (format!("{shown}: allowed_hosts"), h))
            .chain(
                args.allowed_hosts
                    .iter()
                    .map(|h| ("--allowed-host".to_string(), h)),
            );
        for (what, host) in given_hosts {
            match crate::hosts::AllowedHost::parse(host) {
                Ok(_) => allowed_hosts.push(host.trim().to_string()),
                Err(reason) => errors.push(ConfigError::Setting { what, reason }),
            }
        }
        let public_host = match (&args.public_host, &file.public_host) {
            (Some(h), _) => Some((from_env_or_flag("--public-host", "GANTRY_PUBLIC_HOST"), h)),
            (None, Some(h)) => Some((format!("{shown}: public_host"), h)),
            (None, None) => None,
        }
        .and_then(|(what, h)| match crate::hosts::authority_of(h) {
            Ok(authority) => Some(authority),
            Err(reason) => {
                errors.push(ConfigError::Setting { what, reason });
                None
            }
        });
        if let Some(public) = &public_host {
            allowed_hosts.push(public.clone());
        }
        let mut allowed_origins = file.allowed_origins.clone().unwrap_or_default();
        allowed_origins.extend(args.allowed_origins.iter().cloned());

        let session_idle = match &file.session_idle {
            None => DEFAULT_SESSION_IDLE,
            Some(idle) => match humantime::parse_duration(idle.get_ref()) {
                Ok(d) if d >= std::time::Duration::from_secs(1) => d,
                Ok(_) | Err(_) => {
                    let (line, column) = line_column(&text, idle.span().start);
                    errors.push(ConfigError::At {
                        file: shown.clone(),
                        line,
                        column,
                        reason: format!(
                            "session_idle `{}` is not a duration of at least 1s (e.g. \"30m\")",
                            idle.get_ref()
                        ),
                    });
                    DEFAULT_SESSION_IDLE
                }
            },
        };
        let exec = file.exec.unwrap_or_default();
        let session = file.session.unwrap_or_default();
        if let Err(e) = recordings::Redactor::new(&session.redact, Vec::new()) {
            errors.push(ConfigError::Setting {
                what: format!("{shown}: [session] redact"),
                reason: e.to_string(),
            });
        }
        let mut session_sources = Vec::new();
        for (name, default) in recordings::import::default_sources() {
            match session.sources.get(name) {
                Some(SourceSetting::On(false)) => {}
                Some(SourceSetting::At(dir)) => {
                    session_sources.push((name.to_string(), expand(dir, &config_dir)));
                }
                Some(SourceSetting::On(true)) | None => {
                    if let Some(dir) = default {
                        session_sources.push((name.to_string(), dir));
                    }
                }
            }
        }
        if let Some(unknown) = session.sources.keys().find(|k| {
            !recordings::import::default_sources()
                .iter()
                .any(|(n, _)| n == *k)
        }) {
            errors.push(ConfigError::Setting {
                what: format!("{shown}: [session.sources] {unknown}"),
                reason: format!(
                    "not a known source ({})",
                    recordings::import::default_sources()
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let exec_confine = match exec
            .confine
            .as_ref()
            .map(|c| (c.get_ref().as_str(), c.span()))
        {
            None | Some(("off", _)) => false,
            Some(("roots", _)) => true,
            Some((other, span)) => {
                let (line, column) = line_column(&text, span.start);
                errors.push(ConfigError::At {
                    file: shown.clone(),
                    line,
                    column,
                    reason: format!("[exec] confine `{other}` is not \"off\" or \"roots\""),
                });
                false
            }
        };
        let mut progressive = Vec::new();
        for (connector, how) in &file.disclosure {
            errors.extend(not_a_connector(
                connector,
                format!("{shown}: [disclosure] {connector}"),
            ));
            match how.as_str() {
                "all" => {}
                "progressive" => progressive.push(connector.clone()),
                other => errors.push(ConfigError::Setting {
                    what: format!("{shown}: [disclosure] {connector}"),
                    reason: format!("`{other}` is not \"all\" or \"progressive\""),
                }),
            }
        }
        let mut auth = BTreeMap::new();
        for (connector, how) in &file.auth {
            let what = format!("{shown}: [auth] {connector}");
            errors.extend(not_a_connector(connector, what.clone()));
            match AuthMode::parse(how) {
                Some(mode) if mode.oauth() && public_host.is_none() => {
                    errors.push(ConfigError::Setting {
                        what,
                        reason: format!(
                            "`{how}` needs a public host (--public-host or public_host): OAuth clients find gantry's sign-in pages there"
                        ),
                    });
                }
                Some(mode) => {
                    auth.insert(connector.clone(), mode);
                }
                None => errors.push(ConfigError::Setting {
                    what,
                    reason: format!("`{how}` is not \"oauth\", \"url-secret\" or \"both\""),
                }),
            }
        }
        let apps: Vec<(String, crate::apps::AppConfig)> = file
            .apps
            .iter()
            .map(|(n, a)| (n.clone(), a.clone()))
            .collect();
        for (name, app) in &apps {
            for reason in crate::apps::problems(name, app) {
                errors.push(ConfigError::Setting {
                    what: shown.clone(),
                    reason,
                });
            }
        }
        let browser = file.browser.clone().unwrap_or_default();
        for reason in browser.problems() {
            errors.push(ConfigError::Setting {
                what: shown.clone(),
                reason,
            });
        }
        let services = file.services.clone().unwrap_or_default();
        for reason in services.problems() {
            errors.push(ConfigError::Setting {
                what: shown.clone(),
                reason,
            });
        }
        let mut gateway_servers = Vec::new();
        let servers = file.gateway.map(|g| g.servers).unwrap_or_default();
        if servers.len() > generated::gateway::limits::upstream::MAX_SERVERS {
            errors.push(ConfigError::Setting {
                what: format!("{shown}: [gateway.servers]"),
                reason: format!(
                    "{} servers, at most {}",
                    servers.len(),
                    generated::gateway::limits::upstream::MAX_SERVERS
                ),
            });
        }
        for (name, server) in servers {
            let what = format!("{shown}: [gateway.servers.{name}]");
            let problem = if !crate::upstream::server_name_ok(&name) {
                Some(
                    "a server name is 1 to 32 letters, digits, `-` or `_`, without `__`"
                        .to_string(),
                )
            } else if server.command.is_some() == server.url.is_some() {
                Some(
                    "give exactly one of `command` (a stdio server) and `url` (Streamable HTTP)"
                        .into(),
                )
            } else if server.url.is_some()
                && (!server.args.is_empty() || !server.env.is_empty() || server.cwd.is_some())
            {
                Some("`args`, `env` and `cwd` go with `command`, not `url`".into())
            } else if server.bearer_token_env.is_some()
                && server.url.as_deref().is_some_and(|u| {
                    u.starts_with("http://")
                        && !["http://127.0.0.1", "http://localhost", "http://[::1]"]
                            .iter()
                            .any(|l| {
                                u.strip_prefix(l)
                                    .is_some_and(|r| r.is_empty() || r.starts_with([':', '/']))
                            })
                })
            {
                Some("a bearer token goes only over https://, or http:// to this machine (127.0.0.1, localhost, [::1])".into())
            } else if let Err(e) = server.timeout() {
                Some(e)
            } else if server.command.is_some() && server.bearer_token_env.is_some() {
                Some("`bearer_token_env` goes with `url`".into())
            } else {
                server
                    .url
                    .as_deref()
                    .filter(|u| !(u.starts_with("http://") || u.starts_with("https://")))
                    .map(|url| format!("url `{url}` is not http:// or https://"))
            };
            match problem {
                Some(reason) => errors.push(ConfigError::Setting { what, reason }),
                None => gateway_servers.push((name, server)),
            }
        }
        let mut machines = Vec::new();
        if file.hosts.len() > generated::hosts::limits::list_hosts::MAX_HOSTS {
            errors.push(ConfigError::Setting {
                what: format!("{shown}: [hosts]"),
                reason: format!(
                    "{} machines, at most {}",
                    file.hosts.len(),
                    generated::hosts::limits::list_hosts::MAX_HOSTS
                ),
            });
        }
        for (name, machine) in file.hosts {
            let what = format!("{shown}: [hosts.{name}]");
            let problem = if crate::machines::name_ok(&name) {
                machine.problem()
            } else {
                Some("a machine's name is 1 to 32 letters, digits, `-` or `_`, starting with a letter or digit".into())
            };
            match problem {
                Some(reason) => errors.push(ConfigError::Setting { what, reason }),
                None => machines.push((name, machine)),
            }
        }
        let agents = match crate::worker_kinds::resolve(file.agents, &config_dir) {
            Ok(a) => a,
            Err(problems) => {
                errors.extend(problems.into_iter().map(|p| ConfigError::Setting {
                    what: format!("{shown}: {}", p.what),
                    reason: p.reason,
                }));
                crate::worker_kinds::AgentsConfig::default()
            }
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Settings {
            config_path,
            config_exists: exists,
            config_has_settings: text.parse::<toml::Table>().is_ok_and(|t| sets_anything(&t)),
            config_stamp,
            state_dir,
            roots,
            policies_dir,
            host: args
                .host
                .clone()
                .or(file.host)
                .unwrap_or_else(|| DEFAULT_HOST.to_string()),
            port: args.port.or(file.port).unwrap_or(DEFAULT_PORT),
            read_only: args.read_only.or(file.read_only).unwrap_or(false),
            permissions,
            public_host,
            allowed_hosts,
            allowed_origins,
            session_idle,
            audit_command_lines: file.audit_command_lines.unwrap_or(true),
            client_launch_files: file.client_launch_files,
            warm_shell: exec.warm_shell.unwrap_or(true),
            exec_cgroup: exec.cgroup.unwrap_or(true),
            session_redact: session.redact,
            session_all_directories: session.all_directories.unwrap_or(false),
            session_sources,
            exec_confine,
            defaulted_root,
            roots_in_file,
            desktop_yield_to_user: file
                .desktop
                .as_ref()
                .and_then(|d| d.yield_to_user)
                .unwrap_or(true),
            gateway_servers,
            machines,
            shell_runs_files: file
                .shell
                .as_ref()
                .and_then(|s| s.runs_files.clone())
                .unwrap_or_else(|| {
                    DEFAULT_RUNS_FILES
                        .iter()
                        .map(|p| (*p).to_string())
                        .collect()
                }),
            browser,
            apps,
            services,
            shell_display_programs: file
                .shell
                .as_ref()
                .and_then(|s| s.display_programs.clone())
                .unwrap_or_else(|| {
                    DEFAULT_DISPLAY_PROGRAMS
                        .iter()
                        .map(|p| (*p).to_string())
                        .collect()
                }),
            shell_allowed_commands: file.shell.map(|s| s.allowed_commands).unwrap_or_default(),
            zodex_workdir_context: file
                .zodex
                .as_ref()
                .and_then(|z| z.workdir_context)
                .unwrap_or(true),
            agents,
            progressive,
            auth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_with_config(dir: &Path, text: Option<&str>) -> CommonArgs {
        let path = dir.join("config.toml");
        if let Some(t) = text {
            std::fs::write(&path, t).unwrap();
        }
        CommonArgs {
            config: Some(path),
            roots: vec![dir.to_path_buf()],
            ..CommonArgs::default()
        }
    }

    #[test]
    fn a_fresh_config_turns_core_on_and_desktop_to_the_platform_default() {
        let dir = tempfile::tempdir().unwrap();
        let s = Settings::resolve(&args_with_config(dir.path(), None)).unwrap();
        assert!(!s.config_exists);
        assert!(!s.read_only);
        // Each permission as surface.toml's default for this platform says: Core's on
        // everywhere, the desktop's only where they can work, `kill_any` off.
        for p in generated::Permission::ALL {
            let d = p.spec().default;
            let want = if cfg!(windows) {
                d.windows
            } else if cfg!(target_os = "macos") {
                d.macos
            } else {
                d.linux
            };
            assert_eq!(s.permissions.get(p.name()), Some(&want), "{}", p.name());
        }
        assert_eq!((s.host.as_str(), s.port), (DEFAULT_HOST, DEFAULT_PORT));
    }

    #[test]
    fn stored_choices_are_kept_and_flags_win() {
        let dir = tempfile::tempdir().unwrap();
        let mut args = args_with_config(
            dir.path(),
            Some("read_only = true\nport = 9000\n[permissions]\nexec = false\ncontrol = true\n"),
        );
        let s = Settings::resolve(&args).unwrap();
        let (exec, control) = (
            generated::Permission::Exec.name(),
            generated::Permission::Control.name(),
        );
        assert_eq!(s.permissions.get(exec), Some(&false));
        assert_eq!(s.permissions.get(control), Some(&true));
        assert!(s.read_only);
        assert_eq!(s.port, 9000);
        args.port = Some(0);
        args.read_only = Some(false);
        let s = Settings::resolve(&args).unwrap();
        assert_eq!(s.port, 0);
        assert!(!s.read_only);
    }

    #[test]
    fn malformed_config_fails_closed_with_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let errs = Settings::resolve(&args_with_config(
            dir.path(),
            Some("read_only = true\nport = \"x\"\n"),
        ))
        .err()
        .unwrap_or_default();
        assert_eq!(errs.len(), 1);
        let shown = errs[0].to_string();
        assert!(shown.contains("config.toml:2:8: invalid type"), "{shown}");
    }

    #[test]
    fn unknown_permission_and_unknown_key_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let errs = Settings::resolve(&args_with_config(
            dir.path(),
            Some("[permissions]\nread = true\nexecute = true\n"),
        ))
        .err()
        .unwrap_or_default();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0]
                .to_string()
                .contains("config.toml:3:1: unknown permission `execute`"),
            "{}",
            errs[0]
        );
        let errs = Settings::resolve(&args_with_config(dir.path(), Some("readonly = true\n")))
            .err()
            .unwrap_or_default();
        assert!(
            errs[0].to_string().contains("unknown field `readonly`"),
            "{}",
            errs[0]
        );
    }
}

#[cfg(test)]
mod runs_files_tests {
    use super::*;

    #[test]
    fn programs_that_run_files_are_known_by_name_version_or_variant() {
        let list: Vec<String> = ["make", "perl", "sh", "git"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let runs = |given: &str| names_program(&list, Path::new(given));
        for yes in [
            "make",
            "/usr/bin/make",
            "make-first-existing-target",
            "perl5.36-x86_64-linux-gnu",
            "sh",
            "git-lfs",
            "MAKE.EXE",
        ] {
            assert!(runs(yes), "{yes}");
        }
        for no in ["shellcheck", "makeinfo", "echo", "gitk2"] {
            assert!(!runs(no), "{no}");
        }
        // By the file a name resolves to, too (`shell.exec` asks about both).
        assert!(runs(
            std::path::Path::new("/usr/bin/make").to_str().unwrap()
        ));
    }
}
