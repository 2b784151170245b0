//! `gantry-conformance [--port N] [--state-dir DIR]`: serves the fixture surface over
//! stateless Streamable HTTP on 127.0.0.1 and prints `conformance <url>`, for
//! `conformance/run`.

use std::process::ExitCode;
use std::sync::Arc;

use conformance::FixtureApp;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let mut port = 0u16;
    let mut state_dir =
        std::env::temp_dir().join(format!("gantry-conformance-{}", std::process::id()));
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--port", Some(p)) => match p.parse() {
                Ok(p) => port = p,
                Err(_) => {
                    eprintln!("gantry-conformance: --port `{p}` is not a port");
                    return ExitCode::from(2);
                }
            },
            ("--state-dir", Some(d)) => state_dir = d.into(),
            _ => {
                eprintln!("usage: gantry-conformance [--port N] [--state-dir DIR]");
                return ExitCode::from(2);
            }
        }
    }
    let app = match FixtureApp::new() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("gantry-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&state_dir) {
        eprintln!("gantry-conformance: {}: {e}", state_dir.display());
        return ExitCode::from(2);
    }
    let options = transport::http::HttpOptions {
        host: "127.0.0.1".into(),
        port,
        state_dir,
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
        public_host: None,
        auth: Vec::new(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gantry-conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let token = CancellationToken::new();
        let stop = token.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        });
        transport::http::serve(
            server::server::Connectors(app),
            conformance::CONNECTORS.iter().collect(),
            options,
            token,
        )
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry-conformance: {e}");
            ExitCode::FAILURE
        }
    }
}
