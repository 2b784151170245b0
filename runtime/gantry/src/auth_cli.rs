//! `gantry auth`: the user's side of the public connectors' sign-in, from a terminal (a
//! machine without a browser approves here what the control page would show).

use config::Settings;
use config::cli::AuthCommand;
use oauth::{Approval, Auth};

fn open(settings: &Settings) -> Result<Auth, String> {
    let path = settings.state_dir.join(oauth::AUTH_DB);
    if !path.exists() {
        return Err(format!(
            "no sign-in store at {}: no server with a public host (--public-host) has run with this state directory",
            path.display()
        ));
    }
    Auth::open(&path).map_err(|e| e.to_string())
}

fn audit(settings: &Settings, connector: &str, what: &'static str, client: &str) {
    match audit::Audit::open(&settings.state_dir, settings.audit_command_lines) {
        Ok(log) => server::server::audit_sign_in(
            &log,
            &transport::signin::Event {
                connector,
                what,
                client,
                outcome: "ok",
            },
        ),
        Err(e) => eprintln!("gantry: the audit log could not be opened: {e}"),
    }
}

/// Runs one `gantry auth` command; what it did goes to stdout, problems to the error.
pub fn run(command: AuthCommand) -> Result<(), String> {
    let (AuthCommand::List { common }
    | AuthCommand::Approve { common, .. }
    | AuthCommand::Deny { common, .. }
    | AuthCommand::Revoke { common, .. }) = &command;
    let settings = Settings::resolve(common).map_err(|e| {
        e.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    if matches!(command, AuthCommand::Approve { .. })
        && let Some(why) = transport::peer::this_process_started_by_gantry()
    {
        // A tripwire like the control page's, not a boundary (a command can detach itself):
        // it stops a model asked to approve its own way in.
        return Err(format!(
            "gantry auth approve refuses to run inside a command gantry started ({why}): approving a sign-in is the user's act, never the model's; run it in your own terminal"
        ));
    }
    let store = open(&settings)?;
    match &command {
        AuthCommand::List { .. } => {
            let pending = store.pending().map_err(|e| e.to_string())?;
            println!("waiting for approval: {}", pending.len());
            // No codes: approve the one your own sign-in page shows, never one read here
            // (anyone who reaches the public host can make a request and name it anything).
            for p in &pending {
                println!(
                    "  {} asks for {} (its redirect host {}), since {}",
                    oauth::described(&p.client_name, p.client_site.as_deref()),
                    p.connector,
                    p.redirect_host,
                    audit::rfc3339_seconds(p.created_ms)
                );
            }
            let grants = store.grants().map_err(|e| e.to_string())?;
            println!("grants in force: {}", grants.len());
            for g in &grants {
                println!(
                    "  {}  {} on {}, signed in {}, last used {}",
                    g.id,
                    oauth::described(&g.client_name, g.client_site.as_deref()),
                    g.connector,
                    audit::rfc3339_seconds(g.created_ms),
                    audit::rfc3339_seconds(g.last_used_ms)
                );
            }
        }
        AuthCommand::Approve { code, .. } | AuthCommand::Deny { code, .. } => {
            let (approval, what, said) = match command {
                AuthCommand::Approve { .. } => (Approval::Approve, "approve", "approved"),
                _ => (Approval::Deny, "deny", "refused"),
            };
            let p = store.decide(code, approval).map_err(|e| e.to_string())?;
            audit(&settings, &p.connector, what, &p.client_name);
            println!(
                "{said}: {} ({}) for {}; its page moves on within seconds",
                p.client_name, p.redirect_host, p.connector
            );
        }
        AuthCommand::Revoke { grant, .. } => {
            let g = store.revoke(grant).map_err(|e| e.to_string())?;
            audit(&settings, &g.connector, "revoke", &g.client_name);
            println!(
                "revoked: {} on {}; its tokens stop working at their next request",
                g.client_name, g.connector
            );
        }
    }
    Ok(())
}
