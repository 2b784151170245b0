//! The `gantry` binary.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory as _, FromArgMatches as _};
use config::Settings;
use config::cli::{Cli, Command, TokenCommand};
use server::app::App;
use server::server::Connectors;
use tokio_util::sync::CancellationToken;

fn init_logging() {
    // stdout is the stdio transport (and the URL lines): logs only ever go to stderr.
    // rmcp narrates every stateless request at INFO (a fake handshake, "task cancelled" after
    // each answer); gantry's own line per call says what happened. GANTRY_LOG replaces this.
    let filter = std::env::var("GANTRY_LOG")
        .ok()
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(gantry::log_filter(&f)).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .with_target(false)
        .init();
}

fn fail(problems: &[String]) -> ExitCode {
    for p in problems {
        eprintln!("gantry: {p}");
    }
    ExitCode::from(2)
}

async fn shutdown_signal(token: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                token.cancel();
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("stopping: ending every command session and its processes");
    token.cancel();
}

fn main() -> ExitCode {
    server::ops::process_limits::return_large_blocks();
    // The help's description is the binary's own (its package's), not the config crate's,
    // where the derive lives.
    let parsed = Cli::command()
        .about(env!("CARGO_PKG_DESCRIPTION"))
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let argv: Vec<String> = std::env::args().collect();
            if let Some(why) = config::cli::blame_environment(&e, &argv) {
                eprintln!("gantry: {why}");
                return ExitCode::from(2);
            }
            e.exit()
        }
    };
    init_logging();
    server::ops::process_limits::raise_open_files();
    // The commands that print and exit; `serve` goes on serving when its stdout closes, and
    // `hosts` talks to ssh over pipes whose end it must report, not die of.
    if matches!(
        cli.command,
        Command::Check(_)
            | Command::Config(_)
            | Command::Token(_)
            | Command::Audit(_)
            | Command::Auth(_)
            | Command::Admin(_)
    ) {
        server::ops::process_limits::end_quietly_when_output_closes();
    }
    match cli.command {
        Command::Check(args) => {
            let settings = Settings::resolve(&args.common)
                .map_err(|e| e.iter().map(ToString::to_string).collect());
            let report = gantry::check::run(
                settings,
                args.common.policies.as_deref(),
                args.surface.as_deref(),
            );
            for w in &report.warnings {
                eprintln!("warning: {w}");
            }
            if report.problems.is_empty() {
                for line in report.summary {
                    println!("ok: {line}");
                }
                ExitCode::SUCCESS
            } else {
                for p in &report.problems {
                    eprintln!("{p}");
                }
                eprintln!("gantry check: {} problem(s)", report.problems.len());
                ExitCode::FAILURE
            }
        }
        Command::Audit(args) => {
            let settings = match Settings::resolve(&args.common) {
                Ok(s) => s,
                Err(e) => return fail(&e.iter().map(ToString::to_string).collect::<Vec<_>>()),
            };
            let filter = audit::Filter {
                tool: args.tool,
                decision: args.decision,
            };
            let mut stdout = std::io::stdout().lock();
            match audit::show(
                &settings.state_dir,
                &filter,
                args.lines,
                args.follow,
                &mut stdout,
            ) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&[format!(
                    "audit log {}: {e}",
                    settings.state_dir.join(audit::FILE_NAME).display()
                )]),
            }
        }
        Command::Hosts(command) => gantry::hosts_cli::run(command),
        Command::Admin(args) => {
            let settings = match Settings::resolve(&args.common) {
                Ok(s) => s,
                Err(e) => return fail(&e.iter().map(ToString::to_string).collect::<Vec<_>>()),
            };
            let file = settings.state_dir.join(admin::URL_FILE);
            match std::fs::read_to_string(&file) {
                Ok(url) if admin::answers(url.trim()) => {
                    println!("{}", url.trim());
                    ExitCode::SUCCESS
                }
                _ => fail(&[format!(
                    "no gantry is serving its control page for the state directory {}; start one with `cargo gantry serve` (it prints the page's URL), or give the same --state-dir",
                    settings.state_dir.display()
                )]),
            }
        }
        Command::Auth(command) => match gantry::auth_cli::run(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&[e]),
        },
        Command::Token(TokenCommand::Rotate { connector, common }) => {
            let settings = match Settings::resolve(&common) {
                Ok(s) => s,
                Err(e) => return fail(&e.iter().map(ToString::to_string).collect::<Vec<_>>()),
            };
            let names: Vec<&'static str> = generated::CONNECTORS.iter().map(|c| c.name).collect();
            let rotated = state_dir::ensure(&settings.state_dir)
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    state_dir::Tokens::rotate(&settings.state_dir, &names, connector.as_deref())
                });
            match rotated {
                Ok(list) => {
                    let tokens =
                        state_dir::Tokens::load_or_create(&settings.state_dir, &names).ok();
                    // The URLs as the running server serves them (its port, its public host
                    // unless one is given here), else as the settings say.
                    let running = admin::running(&settings.state_dir);
                    let mut shown = settings.clone();
                    if let Some(r) = &running {
                        shown.port = r.port;
                        if shown.public_host.is_none() {
                            shown.public_host = r.public_host.clone();
                        }
                    }
                    let secrets = state_dir::tokens_path(&settings.state_dir);
                    for c in list {
                        let Some(token) = tokens.as_ref().and_then(|t| t.get(c)) else {
                            continue;
                        };
                        let oauth = shown.public_host.is_some() && shown.auth_of(c).oauth();
                        let said = match (&shown.public_host, &running) {
                            (Some(_), _) if oauth => "it signs in with OAuth while a public host is set, so its URLs below hold no secret and do not change: nothing to change in ChatGPT or in a local client (the new secret applies if it goes back to `url-secret`)".to_string(),
                            (Some(_), _) => format!(
                                "in ChatGPT, edit the connector's URL to the {c}@public one below"
                            ),
                            (None, Some(_)) => "the running server has no public host: clients using the loopback URL below (and a tunnel-client pointed at it) need it".to_string(),
                            (None, None) => "gantry cannot tell your public URL: no running server with a control page was found for this state directory; give --public-host NAME to print it".to_string(),
                        };
                        eprintln!(
                            "gantry: {c}: new secret in {}; the old URL stops working now (a running server takes the new one at its next request); {said}",
                            secrets.display()
                        );
                        for (label, url) in config::urls::urls_of(&shown, c, token) {
                            println!("{label} {url}");
                        }
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&[e]),
            }
        }
        Command::Config(args) => {
            let settings = match Settings::resolve(&args.common) {
                Ok(s) => s,
                Err(e) => return fail(&e.iter().map(ToString::to_string).collect::<Vec<_>>()),
            };
            if let Some(problem) = settings.default_root_problem() {
                return fail(&[problem]);
            }
            let names: Vec<&'static str> = generated::CONNECTORS.iter().map(|c| c.name).collect();
            if !names.contains(&args.connector.as_str()) {
                return fail(&[format!(
                    "unknown connector `{}` (connectors: {})",
                    args.connector,
                    names.join(", ")
                )]);
            }
            if args.connector == generated::hosts::NAME && settings.machines.is_empty() {
                return fail(&[format!(
                    "the hosts connector is served only when the config names a machine: add one with `gantry hosts add NAME user@host` ({} has no [hosts])",
                    settings.config_path.display()
                )]);
            }
            if args.connector == generated::gateway::NAME && settings.gateway_servers.is_empty() {
                return fail(&[format!(
                    "the gateway connector is served only when the config names an upstream MCP server ({} has no [gateway.servers.NAME])",
                    settings.config_path.display()
                )]);
            }
            let tokens = match state_dir::ensure(&settings.state_dir)
                .map_err(|e| e.to_string())
                .and_then(|()| state_dir::Tokens::load_or_create(&settings.state_dir, &names))
            {
                Ok(t) => t,
                Err(e) => return fail(&[e]),
            };
            let exe = std::env::current_exe().unwrap_or_else(|_| "gantry".into());
            let token = tokens.get(&args.connector).unwrap_or_default();
            // The port a running server serves on, unless one is given here.
            let mut settings = settings;
            if args.common.port.is_none()
                && let Some(running) = admin::running(&settings.state_dir)
            {
                settings.port = running.port;
            }
            // A tripwire like `gantry auth approve`'s: a model told to "set up a client with
            // --root ~" does not widen its own roots this way.
            let inside = transport::peer::this_process_started_by_gantry();
            let roots = match config::client_setup::roots_into_config(&settings, inside.as_deref())
            {
                Ok(said) => said,
                Err(e) => return fail(&[e]),
            };
            let (setup, hint) = config::client_setup::render(
                args.client,
                &settings,
                &args.common,
                &args.connector,
                &exe,
                token,
            );
            if let Some(hint) = hint {
                eprintln!("gantry: {hint}");
            }
            eprintln!("gantry: {roots}");
            print!("{setup}");
            ExitCode::SUCCESS
        }
        Command::SandboxExec(args) => {
            let why =
                server::ops::confinement::exec_confined(&args.write, &args.tmp, &args.command);
            fail(&[why])
        }
        Command::Serve(args) => {
            let settings = match Settings::resolve(&args.common) {
                Ok(s) => s,
                Err(e) => return fail(&e.iter().map(ToString::to_string).collect::<Vec<_>>()),
            };
            // The port first: when it is taken, nothing else is set up or written.
            let bound = if args.stdio {
                None
            } else {
                match transport::http::bind(&transport::http::HttpOptions::from(&settings)) {
                    Ok(l) => Some(l),
                    Err(e) => return fail(&[e]),
                }
            };
            let admin_socket = if args.stdio || args.no_admin {
                None
            } else {
                match admin::bind_port(args.admin_port.unwrap_or(0)) {
                    Ok(l) => Some(l),
                    Err(e) => return fail(&[e]),
                }
            };
            // Before any thread: no command, worker or upstream inherits an upstream's token.
            upstream::take_tokens(&settings.gateway_servers);
            let app = match App::start(settings, args.common.clone()) {
                Ok(a) => Arc::new(a),
                Err(e) => return fail(&e),
            };
            if args.stdio
                && let Some((name, why)) = app
                    .not_served()
                    .into_iter()
                    .find(|(name, _)| *name == args.connector)
            {
                app.shutdown();
                return fail(&[format!("the {name} connector is not served: {why}")]);
            }
            // Declared before the runtime, so dropped after it (tasks holding the pipes are
            // gone by then), even when a panic unwinds out of serving.
            let restore = transport::stdio::RestoreOnDrop;
            // One thread for stdio: one client, one pipe, and no wake-ups between workers.
            // Measured against the multi-threaded runtime on 2 cores (peer bench, same
            // machine): server CPU per 1 KB read 25 µs instead of 35–40, and 256 KB reads at
            // the same calls/s. Slow work (globs, big files, patches) still leaves the thread.
            // HTTP serves many clients and keeps the multi-threaded runtime.
            let mut builder = if args.stdio {
                tokio::runtime::Builder::new_current_thread()
            } else {
                tokio::runtime::Builder::new_multi_thread()
            };
            let runtime = match builder.enable_all().build() {
                Ok(r) => r,
                Err(e) => return fail(&[format!("cannot start the async runtime: {e}")]),
            };
            let served = app.clone();
            let result = runtime.block_on(async move {
                let token = CancellationToken::new();
                tokio::spawn(shutdown_signal(token.clone()));
                served.spawn_maintenance();
                let connectors: Vec<_> = served.connectors().collect();
                if let Some(bound) = bound {
                    let options = transport::http::HttpOptions::from(&served.settings);
                    let handlers = Connectors(served.clone());
                    let listening =
                        transport::http::listen(&handlers, &connectors, &options, bound)?;
                    if let Some(socket) = admin_socket {
                        let (control, listener) = admin::start(
                            served.clone(),
                            socket,
                            listening.addr,
                            connectors.clone(),
                        )?;
                        // Not println!: `gantry serve | head -1` closes stdout, and the
                        // server goes on serving.
                        use std::io::Write as _;
                        let _ = writeln!(std::io::stdout(), "admin {}", control.url());
                        tokio::spawn(control.serve(listener, token.clone()));
                    }
                    // Said at the default log level; GANTRY_LOG=warn quiets them with the
                    // log's other news.
                    if tracing::enabled!(tracing::Level::INFO) {
                        use std::io::Write as _;
                        let mut err = std::io::stderr().lock();
                        for line in gantry::start_notes::lines(&served, !args.no_admin) {
                            let _ = writeln!(err, "{line}");
                        }
                    }
                    transport::http::run(&handlers, connectors, options, listening, token).await
                } else {
                    let handlers = Connectors(served.clone());
                    tokio::select! {
                        r = transport::http::serve_stdio(&handlers, &connectors, &args.connector) => r,
                        () = token.cancelled() => Ok(()),
                    }
                }
            });
            // Whatever ended the serving (stdin closed, SIGTERM, SIGINT), no command outlives it.
            app.shutdown();
            // Tasks still holding the stdio pipes end with the runtime; only then is it safe to
            // hand the pipes back in blocking mode.
            runtime.shutdown_timeout(std::time::Duration::from_millis(500));
            // No call is answered any more: what was recorded is stored and the journal goes.
            app.recorder.close();
            drop(restore);
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&[e]),
            }
        }
    }
}
