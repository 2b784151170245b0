//! `gantry check`: the surface, the policies and the config, validated together.

use std::path::Path;

use config::Settings;

/// What `gantry check` found.
#[derive(Debug, Default)]
pub struct Report {
    /// Every problem (empty when all is well).
    pub problems: Vec<String>,
    /// What was checked.
    pub summary: Vec<String>,
    /// What works but is probably not what the user meant.
    pub warnings: Vec<String>,
}

/// Runs every check and reports every problem found. `policies_flag` is used when the config
/// itself is broken, so one problem never hides another.
pub fn run(
    settings: Result<Settings, Vec<String>>,
    policies_flag: Option<&Path>,
    surface: Option<&Path>,
) -> Report {
    let mut problems = Vec::new();
    let mut summary = Vec::new();
    let mut warnings = Vec::new();
    if let Some(path) = surface {
        match std::fs::read_to_string(path) {
            Ok(text) => match surface::Surface::parse(&path.display().to_string(), &text) {
                Ok(s) => summary.push(format!(
                    "surface {}: {} tools, {} permissions",
                    path.display(),
                    s.tools.len(),
                    s.permissions.len()
                )),
                Err(d) => problems.extend(d.0.iter().map(ToString::to_string)),
            },
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    let settings = match settings {
        Ok(s) => {
            summary.push(format!(
                "config {}{}",
                s.config_path.display(),
                if s.config_exists {
                    ""
                } else {
                    " (absent: fresh defaults)"
                }
            ));
            Some(s)
        }
        Err(e) => {
            problems.extend(e);
            None
        }
    };
    let policies_dir = match &settings {
        Some(s) => s.policies_dir.clone(),
        None => policies_flag.map(Path::to_path_buf),
    };
    match server::policy_set::load(policies_dir.as_deref()) {
        Ok(engine) => summary.push(format!(
            "policies {}: {} valid",
            policies_dir
                .as_deref()
                .map_or("(built in)".to_string(), |d| d.display().to_string()),
            engine.policy_ids().len()
        )),
        Err(e) => problems.extend(e),
    }
    if let Some(s) = &settings {
        problems.extend(s.default_root_problem());
        match confine::path_policy::Roots::new(&s.roots) {
            Ok(r) => {
                let list: Vec<String> = r.all().iter().map(|p| p.display().to_string()).collect();
                summary.push(format!("approved root(s): {}", list.join(", ")));
                summary.push(format!("state directory {}", s.state_dir.display()));
                let kinds: Vec<&str> = s.agents.kinds.iter().map(|k| k.name.as_str()).collect();
                let from = if s.agents.kinds_from_path {
                    "found on PATH"
                } else {
                    "from the config"
                };
                if kinds.is_empty() {
                    warnings.push(format!(
                        "worker agents: no kind (none of {} is on PATH, and the config declares none under [agents.kinds.NAME]); `agents` spawn says so",
                        config::worker_kinds::known_names().join(", ")
                    ));
                } else {
                    summary.push(format!(
                        "worker kinds ({from}): {}; {} slot(s), ceiling {} tokens",
                        kinds.join(", "),
                        s.agents.slots,
                        s.agents.ceiling_tokens
                    ));
                }
                warnings.extend(config::worker_kinds::kind_problems(&s.agents, &r));
                for (name, config) in &s.machines {
                    let machine = remote::Machine {
                        name,
                        config,
                        state_dir: &s.state_dir,
                    };
                    if remote::pinned(&machine).map_or(true, |p| p.is_empty()) {
                        warnings.push(format!(
                            "[hosts.{name}]: no SSH host key is pinned for it, so every call to it is refused; run `gantry hosts add {name}` and confirm its key"
                        ));
                    }
                }
            }
            Err(e) => problems.push(e),
        }
    }
    if let Some(s) = &settings {
        summary.extend(reach(s));
        warnings.extend(warnings_about(s));
    }
    Report {
        problems,
        summary,
        warnings,
    }
}

/// What the config lets reach beyond files and commands: the desktop session (the
/// `host_display` master switch) and the services.
fn reach(s: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    let display = generated::Permission::HostDisplay;
    if display
        .spec()
        .platforms
        .contains(&tool_api::Platform::current())
    {
        out.push(if s.permissions.get(display.name()) == Some(&true) {
            "desktop session: on (`host_display`)".to_string()
        } else {
            "desktop session: off (`host_display`): screenshots, input, the clipboard, apps and the browser are refused and not listed, and commands run without the display's variables".to_string()
        });
    }
    out.push(if s.services.allowed.is_empty() {
        "services: none allowed ([services] allowed), so service.status and service.control are not listed".to_string()
    } else {
        let manager = if cfg!(windows) {
            "the Service Control Manager"
        } else if s.services.user_manager() {
            "the user's manager"
        } else {
            "the system manager"
        };
        format!("services ({manager}): {}", s.services.allowed.join(", "))
    });
    out
}

/// Settings that work but expose more, or do less, than they seem to.
fn warnings_about(s: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    let loopback = s.host == "localhost"
        || s.host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        out.push(format!(
            "host {} is not a loopback address: anyone who can reach it and holds a connector URL can use gantry",
            s.host
        ));
    }
    let platform = tool_api::Platform::current();
    let mut need_desktop = Vec::new();
    for p in generated::Permission::ALL {
        let spec = p.spec();
        if s.permissions.get(p.name()) != Some(&true) {
            continue;
        }
        if !spec.platforms.contains(&platform) {
            out.push(format!(
                "permission `{}` is on in {} but has no effect on {}",
                p.name(),
                s.config_path.display(),
                platform.name()
            ));
        } else if server::permissions::desktop_bound(p.name()) {
            need_desktop.push(format!("`{}`", p.name()));
        }
    }
    let on = |p: generated::Permission| s.permissions.get(p.name()) == Some(&true);
    let desktop = if need_desktop.is_empty() {
        Ok(())
    } else {
        desktop::Desktop::connect().map(|_| ())
    };
    if on(generated::Permission::Control)
        && desktop.is_ok()
        && !on(generated::Permission::Exec)
        && generated::Permission::Control
            .spec()
            .platforms
            .contains(&platform)
    {
        out.push(
            "`control` is on and `exec` off: a model that can type can still run commands in a terminal window and edit any file you can (gantry's config included); turn `control` off too if that matters"
                .to_string(),
        );
    }
    // A program that runs what the working tree says is as strong as any program: on an
    // allow-list without "*" the base rule refuses it, and the user should know why before a
    // call does.
    if !s.shell_allowed_commands.iter().any(|c| c == "*") {
        let runs: Vec<&String> = s
            .shell_allowed_commands
            .iter()
            .filter(|c| {
                config::names_program(&s.shell_runs_files, std::path::Path::new(c.as_str()))
            })
            .collect();
        if !runs.is_empty() {
            out.push(format!(
                "[shell] allowed_commands names {}, which run what the working tree or its config says (a Makefile, .git/config, package.json scripts): the model can write those files, so allowing one is allowing any program, and shell.exec refuses them unless allowed_commands is [\"*\"] (or you take them off [shell] runs_files)",
                runs.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if let Err(why) = desktop {
        out.push(format!(
            "permission(s) {} (on by default or in {}) have no effect here: {why}",
            need_desktop.join(", "),
            s.config_path.display()
        ));
    }
    out
}
