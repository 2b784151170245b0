//! `gantry hosts`: the user's other machines. Keys are pinned only here, shown and confirmed
//! by the user, never during a model's call.

use std::io::{BufRead as _, Write as _};
use std::process::ExitCode;

use config::Settings;
use config::cli::HostsCommand;
use config::edit::{Change, apply};
use config::machines::MachineConfig;

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("gantry hosts: {message}");
    ExitCode::from(2)
}

fn settings(common: &config::cli::CommonArgs) -> Result<Settings, ExitCode> {
    Settings::resolve(common).map_err(|e| {
        for p in e {
            eprintln!("gantry: {p}");
        }
        ExitCode::from(2)
    })
}

fn configured<'s>(settings: &'s Settings, name: &str) -> Result<&'s MachineConfig, ExitCode> {
    settings
        .machines
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, m)| m)
        .ok_or_else(|| {
            fail(format!(
                "there is no [hosts.{name}] in {}; give `user@host` to write one",
                settings.config_path.display()
            ))
        })
}

/// Whether the user confirms `question` (a `y`/`yes` line on stdin), or `yes` was given.
fn confirmed(question: &str, yes: bool) -> bool {
    if yes {
        return true;
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Starts the machine's gantry over a one-off ssh connection and asks its version: the
/// real handshake a call would make.
fn answers(machine: &remote::Machine<'_>) -> Result<String, String> {
    machine.prepare().map_err(|e| e.to_string())?;
    let command = machine.serve_command(remote::Sharing::Join);
    let wait = std::time::Duration::from_secs(20);
    let waits = upstream::Waits {
        max_message: 1 << 20,
        start: wait,
        list: wait,
        call: wait,
        first_retry: wait,
        last_retry: wait,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    machine.fresh_log();
    runtime.block_on(async {
        let up = upstream::Upstream::new(machine.name.to_string(), command, waits, None)
            .keeping_stderr()
            .strict_json();
        let outcome = up.server_version().await;
        let said = match &outcome {
            Ok(_) => String::new(),
            Err(_) => up.said_settled(std::time::Duration::from_secs(2)).await,
        };
        up.stop().await;
        outcome.map_err(|e| {
            let ssh_said = std::fs::read_to_string(machine.ssh_log()).unwrap_or_default();
            if said.trim().is_empty() && ssh_said.trim().is_empty() {
                e.message.replacen("upstream `", "host `", 1)
            } else {
                remote::explain(machine.name, &ssh_said, &said).1
            }
        })
    })
}

/// Runs a `gantry hosts` command.
pub fn run(command: HostsCommand) -> ExitCode {
    match command {
        HostsCommand::Add {
            name,
            destination,
            ssh_port,
            identity_file,
            gantry,
            yes,
            common,
        } => {
            let settings = match settings(&common) {
                Ok(s) => s,
                Err(code) => return code,
            };
            if common.port.is_some() {
                return fail(
                    "--port is the port gantry serves on; the machine's SSH port is --ssh-port",
                );
            }
            let (machine_config, write) = match destination {
                Some(ssh) => (
                    MachineConfig {
                        ssh,
                        port: ssh_port,
                        identity_file,
                        gantry,
                    },
                    true,
                ),
                None => match configured(&settings, &name) {
                    Ok(m) => (m.clone(), false),
                    Err(code) => return code,
                },
            };
            if !config::machines::name_ok(&name) {
                return fail(format!(
                    "`{name}` cannot name a host: 1 to 32 letters, digits, `-` or `_`"
                ));
            }
            if let Some(why) = machine_config.problem() {
                return fail(why);
            }
            let machine = remote::Machine {
                name: &name,
                config: &machine_config,
                state_dir: &settings.state_dir,
            };
            let keys = match remote::scan(&machine) {
                Ok(k) => k,
                Err(e) => return fail(e),
            };
            let before = remote::pinned(&machine).unwrap_or_default();
            if !before.is_empty() && !keys.iter().all(|k| before.contains(&k.line)) {
                eprintln!(
                    "host `{name}` shows keys other than the {} pinned for it: pinning these replaces them",
                    before.len()
                );
            }
            eprintln!(
                "host `{name}` ({}) shows these SSH host keys:",
                machine_config.ssh
            );
            for k in &keys {
                eprintln!("  {}", k.fingerprint);
            }
            eprintln!(
                "Compare them with what the machine itself prints (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` there)."
            );
            if !confirmed(&format!("Trust these keys for `{name}`?"), yes) {
                return fail("not confirmed: nothing was pinned or written");
            }
            if write
                && let Err(e) = apply(
                    &settings.config_path,
                    &Change::SetMachine(name.clone(), machine_config.clone()),
                    &settings.roots,
                )
            {
                return fail(e);
            }
            if let Err(e) = remote::pin(&machine, &keys) {
                return fail(e);
            }
            println!(
                "pinned {} key(s) of `{name}` in {}",
                keys.len(),
                remote::known_hosts(&settings.state_dir).display()
            );
            match answers(&machine) {
                Ok(version) => {
                    println!("`{name}`: its gantry answers (version {version})");
                    ExitCode::SUCCESS
                }
                Err(why) => {
                    println!(
                        "`{name}`: the key is pinned, but its gantry does not answer yet: {why}"
                    );
                    ExitCode::from(1)
                }
            }
        }
        HostsCommand::List { common } => {
            let settings = match settings(&common) {
                Ok(s) => s,
                Err(code) => return code,
            };
            if settings.machines.is_empty() {
                println!(
                    "no [hosts] in {}; add one with `gantry hosts add NAME user@host`",
                    settings.config_path.display()
                );
            }
            for (name, config) in &settings.machines {
                let machine = remote::Machine {
                    name,
                    config,
                    state_dir: &settings.state_dir,
                };
                let pinned = remote::pinned(&machine).map_or(0, |p| p.len());
                println!(
                    "{name}\t{}{}\t{}\t{}",
                    config.ssh,
                    config
                        .port
                        .map(|p| format!(" port {p}"))
                        .unwrap_or_default(),
                    config.gantry(),
                    if pinned == 0 {
                        "no key pinned: run `gantry hosts add ".to_string() + name + "`"
                    } else {
                        format!("{pinned} key(s) pinned")
                    }
                );
            }
            ExitCode::SUCCESS
        }
        HostsCommand::Remove { name, common } => {
            let settings = match settings(&common) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let config = match configured(&settings, &name) {
                Ok(m) => m,
                Err(code) => return code,
            };
            let machine = remote::Machine {
                name: &name,
                config,
                state_dir: &settings.state_dir,
            };
            // Another entry may reach the same machine (another key, another login): its keys
            // stay pinned.
            let ours = remote::pinned(&machine).unwrap_or_default();
            let sharing: Vec<&str> = settings
                .machines
                .iter()
                .filter(|(n, _)| *n != name)
                .filter(|(n, c)| {
                    let other = remote::Machine {
                        name: n,
                        config: c,
                        state_dir: &settings.state_dir,
                    };
                    remote::pinned(&other).is_ok_and(|p| p.iter().any(|l| ours.contains(l)))
                })
                .map(|(n, _)| n.as_str())
                .collect();
            if sharing.is_empty() {
                if let Err(e) = remote::unpin(&machine) {
                    return fail(e);
                }
            } else {
                println!(
                    "kept the machine's pinned keys: {} reach(es) it too",
                    sharing.join(", ")
                );
            }
            if let Err(e) = apply(
                &settings.config_path,
                &Change::RemoveMachine(name.clone()),
                &settings.roots,
            ) {
                return fail(e);
            }
            println!("removed `{name}`");
            ExitCode::SUCCESS
        }
        HostsCommand::Check { name, common } => {
            let settings = match settings(&common) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let mut all = true;
            let mut any = false;
            for (n, config) in &settings.machines {
                if name.as_ref().is_some_and(|only| only != n) {
                    continue;
                }
                any = true;
                let machine = remote::Machine {
                    name: n,
                    config,
                    state_dir: &settings.state_dir,
                };
                match answers(&machine) {
                    Ok(v) => println!("{n}: answers (gantry {v})"),
                    Err(why) => {
                        all = false;
                        println!("{n}: does not answer: {why}");
                    }
                }
            }
            if !any {
                return fail(match name {
                    Some(n) => format!("there is no [hosts.{n}] in the config"),
                    None => "no [hosts] in the config".into(),
                });
            }
            if all {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        HostsCommand::Install { name, to, common } => {
            let settings = match settings(&common) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let config = match configured(&settings, &name) {
                Ok(m) => m.clone(),
                Err(code) => return code,
            };
            let machine = remote::Machine {
                name: &name,
                config: &config,
                state_dir: &settings.state_dir,
            };
            let binary = match std::env::current_exe() {
                Ok(b) => b,
                Err(e) => return fail(format!("cannot find this gantry's own binary: {e}")),
            };
            match remote::install(&machine, &binary, &to) {
                Ok(digest) => println!("`{name}`: {to} is this gantry now (SHA-256 {digest})"),
                Err(e) => return fail(e),
            }
            if config.gantry.is_none() {
                let mut with = config.clone();
                with.gantry = Some(to.clone());
                if let Err(e) = apply(
                    &settings.config_path,
                    &Change::SetMachine(name.clone(), with),
                    &settings.roots,
                ) {
                    return fail(e);
                }
                println!("[hosts.{name}] gantry = \"{to}\"");
            }
            ExitCode::SUCCESS
        }
    }
}
