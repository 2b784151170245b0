//! Load over HTTP: 200 concurrent MCP clients (rmcp, stateless Streamable HTTP), each making
//! 50 `read` calls of a 1 KB file against one `gantry serve`. Reports errors (must be 0),
//! p50/p99 latency and calls per second. Baseline from the same run: the same 10 000 calls
//! made by one client, one at a time.
//!
//! `cargo bench -p gantry --bench load`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;

use support::{Sandbox, gantry, http_client as client, http_server};

const CLIENTS: usize = 200;
const CALLS: usize = 50;

async fn read(client: &RunningService<RoleClient, ()>) -> Result<Duration, String> {
    let args = serde_json::json!({ "paths": ["1k.txt"] });
    let serde_json::Value::Object(args) = args else {
        unreachable!()
    };
    let started = Instant::now();
    let r = client
        .call_tool(CallToolRequestParams::new("read").with_arguments(args))
        .await
        .map_err(|e| e.to_string())?;
    // One header line, then the file verbatim.
    let text = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .and_then(|t| t.text.split_once('\n'))
        .map(|(_, body)| body.len());
    if r.is_error == Some(true) || text != Some(1024) {
        return Err(format!("bad result: {:?}", r.content));
    }
    Ok(started.elapsed())
}

fn report(name: &str, mut lat: Vec<Duration>, errors: usize, wall: Duration) -> f64 {
    lat.sort();
    let rate = lat.len() as f64 / wall.as_secs_f64();
    println!(
        "{name:<44} calls {:>6}  errors {errors:>3}  p50 {:>8.2} ms  p99 {:>8.2} ms  {:>8.0} calls/s",
        lat.len(),
        support::percentile(&lat, 0.50).as_secs_f64() * 1e3,
        support::percentile(&lat, 0.99).as_secs_f64() * 1e3,
        rate
    );
    rate
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let rt = support::multi_thread_runtime();
    rt.block_on(async {
        let sb = Sandbox::new();
        std::fs::write(
            sb.root().join("1k.txt"),
            format!("{}\n", "0123456789abcdef".repeat(64))
                .repeat(1)
                .get(..1024)
                .unwrap_or_default(),
        )
        .unwrap();
        let cmd = sb.serve_as_user(Path::new(gantry()), &["--port", "0"]);
        let mut server = http_server(cmd).await;
        let url: Arc<str> = Arc::from(server.url(generated::core::NAME));

        // Baseline: one client, one call at a time.
        let single = client(&url).await;
        for _ in 0..50 {
            read(&single).await.unwrap();
        }
        let started = Instant::now();
        let mut lat = Vec::new();
        for _ in 0..CLIENTS * CALLS {
            lat.push(read(&single).await.unwrap());
        }
        let base = report("1 client, sequential (baseline)", lat, 0, started.elapsed());
        single.cancel().await.unwrap();

        // 200 clients at once.
        let mut connecting = Vec::new();
        for _ in 0..CLIENTS {
            let url = url.clone();
            connecting.push(tokio::spawn(async move { client(&url).await }));
        }
        let mut clients = Vec::new();
        for c in connecting {
            clients.push(c.await.unwrap());
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in clients {
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(CALLS);
                let mut errors = Vec::new();
                for _ in 0..CALLS {
                    match read(&c).await {
                        Ok(d) => lat.push(d),
                        Err(e) => errors.push(e),
                    }
                }
                let _ = c.cancel().await;
                (lat, errors)
            }));
        }
        let mut lat = Vec::new();
        let mut errors = Vec::new();
        for t in tasks {
            let (l, e) = t.await.unwrap();
            lat.extend(l);
            errors.extend(e);
        }
        let wall = started.elapsed();
        let rate = report(
            &format!("{CLIENTS} clients x {CALLS} calls"),
            lat,
            errors.len(),
            wall,
        );
        println!("throughput: {:.2}x the sequential baseline", rate / base);
        if let Some(e) = errors.first() {
            println!("first error: {e}");
        }
        let health = reqwest::get(format!(
            "{}/healthz",
            url.split('/').take(3).collect::<Vec<_>>().join("/")
        ))
        .await
        .unwrap();
        println!("healthz after the load: {}", health.status());
        assert!(errors.is_empty(), "{} errors", errors.len());
        let _ = server.child.kill().await;
    });
}
