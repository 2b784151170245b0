//! Peak memory of the real server (release build, served over HTTP, real MCP clients) under
//! the worst calls a model can make, against the ceiling the README states:
//!
//! - baseline: the server's peak (VmHWM) after one small `read`, same run;
//! - the worst single call of each kind: `view_image` of a 16-bit RGBA PNG at the decode cap,
//!   `apply_patch` of a file at the edit cap, `read` and `find` of a 64 MiB one-line file;
//! - then 256 of those calls at once from 256 clients, on the same server.
//!
//! A fresh server for each kind, so each peak belongs to that kind of call.
//!
//! `cargo bench -p gantry --bench memory` (Linux: reads /proc/<pid>/status).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use support::{HttpServer, Sandbox, gantry, http_client as client, http_server};

/// The ceiling the README states for the whole server process.
const CEILING_MIB: u64 = 1024;
const CONCURRENT: usize = 256;

fn peak_mib(server: &HttpServer) -> u64 {
    support::proc_status(server.child.id().unwrap(), "VmHWM:") / 1024
}

async fn call(c: &RunningService<RoleClient, ()>, tool: &'static str, args: Value) -> String {
    let Value::Object(args) = args else {
        unreachable!()
    };
    match c
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
    {
        Ok(r) if r.is_error == Some(true) => {
            let t = r
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone())
                .unwrap_or_default();
            if std::env::var_os("MEMORY_BENCH_VERBOSE").is_some() {
                eprintln!("{tool}: {t}");
            }
            t.split(':').next().unwrap_or_default().to_string()
        }
        Ok(_) => "ok".into(),
        Err(e) => format!("transport: {e}"),
    }
}

/// The test files: a 4000×4000 16-bit RGBA PNG (128 MB of samples, just under the decode cap),
/// a 16 MiB text file (the edit cap) and a 64 MiB file that is one line.
fn files(root: &Path) {
    let img = image::ImageBuffer::<image::Rgba<u16>, _>::from_fn(4000, 4000, |x, y| {
        image::Rgba([
            (x * 16) as u16,
            (y * 16) as u16,
            ((x ^ y) * 16) as u16,
            u16::MAX,
        ])
    });
    let file = std::io::BufWriter::new(std::fs::File::create(root.join("deep.png")).unwrap());
    let encoder = image::codecs::png::PngEncoder::new_with_quality(
        file,
        image::codecs::png::CompressionType::Best,
        image::codecs::png::FilterType::Adaptive,
    );
    image::DynamicImage::ImageRgba16(img)
        .write_with_encoder(encoder)
        .unwrap();
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    std::fs::write(root.join("edit.txt"), line.repeat((16 << 20) / 64 - 16)).unwrap();
    std::fs::write(root.join("line.txt"), "x".repeat(64 << 20)).unwrap();
}

type Worst = (&'static str, &'static str, Value);

fn worst() -> Vec<Worst> {
    vec![
        (
            "view_image 16-bit 4000×4000",
            "view_image",
            json!({ "path": "deep.png" }),
        ),
        (
            "apply_patch on a 16 MiB file",
            "apply_patch",
            json!({ "patch": "*** Begin Patch\n*** Update File: edit.txt\n@@\n-no such line\n+x\n*** End Patch" }),
        ),
        (
            "read of a 64 MiB line",
            "read",
            json!({ "paths": ["line.txt"] }),
        ),
        (
            "find in a 64 MiB line",
            "find",
            json!({ "query": "needle" }),
        ),
    ]
}

fn main() {
    let rt = support::multi_thread_runtime();
    rt.block_on(async {
        let sb = Sandbox::new();
        sb.config("[permissions]\nexec = false\n");
        std::fs::write(sb.root().join("small.txt"), "hello\n").unwrap();
        files(&sb.root());
        println!("ceiling stated in the README: {CEILING_MIB} MiB");
        for (name, tool, args) in worst() {
            // A fresh server per kind, so each peak is that call's own.
            let server = http_server(sb.serve_as_user(Path::new(gantry()), &["--port", "0"])).await;
            let c = client(server.url("core")).await;
            call(&c, "read", json!({ "paths": ["small.txt"] })).await;
            let base = peak_mib(&server);
            let started = Instant::now();
            let one = call(&c, tool, args.clone()).await;
            let single = peak_mib(&server);
            let single_time = started.elapsed();

            let clients: Vec<_> = futures_join(server.url("core"), CONCURRENT).await;
            let started = Instant::now();
            let mut tasks = Vec::new();
            for c in clients {
                let args = args.clone();
                tasks.push(tokio::spawn(async move {
                    let outcome = call(&c, tool, args).await;
                    drop(c);
                    outcome
                }));
            }
            let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
            for t in tasks {
                *outcomes.entry(t.await.unwrap()).or_default() += 1;
            }
            let many = peak_mib(&server);
            println!(
                "{name:<30} baseline {base:>4} MiB | one call {single:>4} MiB ({one}, {:.2} s) | {CONCURRENT} at once {many:>4} MiB in {:.1} s {outcomes:?} | {:.0}% of the ceiling",
                single_time.as_secs_f64(),
                started.elapsed().as_secs_f64(),
                many as f64 * 100.0 / CEILING_MIB as f64
            );
            assert!(many <= CEILING_MIB, "{name}: {many} MiB is over the ceiling");
        }
    });
}

async fn futures_join(url: &str, n: usize) -> Vec<RunningService<RoleClient, ()>> {
    let url: Arc<str> = url.into();
    let mut handles = Vec::new();
    for _ in 0..n {
        let url = url.clone();
        handles.push(tokio::spawn(async move { client(&url).await }));
    }
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
