//! File tools through a real MCP client (rmcp) over stdio against the real `gantry` binary,
//! each beside a baseline measured in the same run:
//!
//! - `read` of a 1 KB and a 256 KB file, against the protocol floor (a call refused at decode,
//!   so the same round trip without any file work) and against `std::fs::read` in-process;
//! - `find` of a literal over a generated tree (20 000 files, 200 MB), against `rg` on the same
//!   tree (skipped, loudly, when `rg` is not installed);
//! - `find` of a rare literal over real source files (the crates in the user's cargo registry,
//!   `~/.cargo/registry/src`, or `GANTRY_BENCH_SOURCES=DIR`), against `rg -F` on the same tree;
//! - `apply_patch` of 100 hunks to a 50 000-line file, against parsing and applying the same
//!   patch in memory.
//!
//! `cargo bench -p gantry --bench files` (set `GANTRY_BENCH_TREE=DIR` to reuse a tree).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use support::{Sandbox, gantry, stdio_client};

struct Server {
    client: RunningService<RoleClient, ()>,
    /// Keeps the sandbox (config, state, home) alive as long as the server.
    _sandbox: Sandbox,
}

impl Server {
    async fn start(sandbox: Sandbox, exec: bool) -> Server {
        sandbox.config(&format!("[permissions]\nexec = {exec}\n"));
        let cmd = sandbox.serve_as_user(Path::new(gantry()), &["--stdio"]);
        Server {
            client: stdio_client(cmd).await.1,
            _sandbox: sandbox,
        }
    }

    async fn call(&self, name: &'static str, args: Value) -> rmcp::model::CallToolResult {
        let Value::Object(args) = args else { panic!() };
        self.client
            .call_tool(CallToolRequestParams::new(name).with_arguments(args))
            .await
            .unwrap()
    }
}

fn tree(dir: &Path) {
    if dir.join(".complete").exists() {
        return;
    }
    // 20 000 files of 10 KB in 200 directories; one file in 200 holds the needle.
    let filler: String = (0..160)
        .map(|i| format!("{i:04} the quick brown fox jumps over the lazy dog {i:04}\n"))
        .collect();
    for d in 0..200 {
        let sub = dir.join(format!("d{d:03}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            let mut body = filler.clone();
            if (d * 100 + f) % 200 == 7 {
                body.push_str("here is the needle_2026 we look for\n");
            }
            body.truncate(10_240);
            std::fs::write(sub.join(format!("f{f:03}.txt")), body).unwrap();
        }
    }
    std::fs::write(dir.join(".complete"), "").unwrap();
}

/// A 50 000-line file and two patches of `hunks` one-line changes: one forward, one back, so
/// the benchmark can alternate them forever.
fn patch_pair(lines: usize, hunks: usize) -> (String, String, String) {
    let line = |i: usize| format!("line {i} of the big file");
    let original: String = (0..lines).map(|i| line(i) + "\n").collect();
    let header = "*** Begin Patch\n*** Update File: big.txt\n";
    let (mut forward, mut back) = (header.to_string(), header.to_string());
    for h in 0..hunks {
        let at = h * (lines / hunks) + 10;
        let (before, after, new) = (line(at - 1), line(at + 1), line(at).to_uppercase());
        forward.push_str(&format!("@@\n {before}\n-{}\n+{new}\n {after}\n", line(at)));
        back.push_str(&format!("@@\n {before}\n-{new}\n+{}\n {after}\n", line(at)));
    }
    forward.push_str("*** End Patch\n");
    back.push_str("*** End Patch\n");
    (original, forward, back)
}

fn benches(c: &mut Criterion) {
    let rt = support::current_thread_runtime();
    let sb = Sandbox::new();
    let root = sb.root();
    std::fs::write(root.join("1k.txt"), "0123456789abcdef\n".repeat(60)).unwrap();
    std::fs::write(
        root.join("256k.txt"),
        format!("{}\n", "z".repeat(1023)).repeat(256),
    )
    .unwrap();
    let (original, forward, back) = patch_pair(50_000, 100);
    std::fs::write(root.join("big.txt"), &original).unwrap();

    let server = rt.block_on(Server::start(sb, true));
    let mut g = c.benchmark_group("read");
    g.bench_function("protocol floor: call refused at decode", |b| {
        b.iter(|| black_box(rt.block_on(server.call("read", json!({})))))
    });
    g.bench_function("fs::read 1 KB in-process", |b| {
        b.iter(|| black_box(std::fs::read(root.join("1k.txt")).unwrap()))
    });
    g.bench_function("read 1 KB over stdio", |b| {
        b.iter(|| black_box(rt.block_on(server.call("read", json!({ "paths": ["1k.txt"] })))))
    });
    g.bench_function("fs::read 256 KB in-process", |b| {
        b.iter(|| black_box(std::fs::read(root.join("256k.txt")).unwrap()))
    });
    g.bench_function("read 256 KB over stdio", |b| {
        b.iter(|| black_box(rt.block_on(server.call("read", json!({ "paths": ["256k.txt"] })))))
    });
    g.finish();

    let mut g = c.benchmark_group("apply_patch");
    g.sample_size(20);
    g.bench_function("in-memory parse + apply (100 hunks, 50k lines)", |b| {
        b.iter(|| {
            let p = patch::parse(&forward).unwrap();
            let patch::FileOp::Update { chunks, .. } = &p.ops[0] else {
                panic!()
            };
            black_box(patch::apply_update(&original, chunks).unwrap())
        })
    });
    let mut flip = false;
    g.bench_function("apply_patch over stdio (100 hunks, 50k lines)", |b| {
        b.iter(|| {
            flip = !flip;
            let patch = if flip { &forward } else { &back };
            let r = rt.block_on(server.call("apply_patch", json!({ "patch": patch })));
            assert_ne!(r.is_error, Some(true), "{:?}", r.content);
            black_box(r)
        })
    });
    g.finish();
    drop(server);

    let scratch = tempfile::tempdir().unwrap();
    let tree_dir: PathBuf = std::env::var_os("GANTRY_BENCH_TREE")
        .map_or_else(|| scratch.path().join("tree"), PathBuf::from);
    tree(&tree_dir);
    let finder = rt.block_on(Server::start(Sandbox::rooted_at(&tree_dir), false));
    let mut g = c.benchmark_group("find 20k files / 200 MB");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let rg = Command::new("rg")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if rg {
        g.bench_function("rg (baseline)", |b| {
            b.iter(|| {
                let out = Command::new("rg")
                    .args(["--no-heading", "-n", "needle_2026"])
                    .arg(&tree_dir)
                    .output()
                    .unwrap();
                assert!(out.stdout.len() > 1000);
                black_box(out)
            })
        });
    } else {
        eprintln!(
            "\n!!! rg is not installed: the find baseline is SKIPPED (apt-get install ripgrep) !!!\n"
        );
    }
    g.bench_function("find over stdio", |b| {
        b.iter(|| {
            let r = rt.block_on(finder.call("find", json!({ "query": "needle_2026" })));
            assert_eq!(support::facts(&r)["matches"], 100);
            black_box(r)
        })
    });
    g.finish();
}

/// `find` over real source files against `rg -F`, both warm, both walking the same tree with
/// the same rules (hidden files and ignore files honoured).
fn real_sources(c: &mut Criterion) {
    let dir = std::env::var_os("GANTRY_BENCH_SOURCES").map_or_else(
        || {
            let home = std::env::var_os("CARGO_HOME").map_or_else(
                || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo"),
                PathBuf::from,
            );
            home.join("registry/src")
        },
        PathBuf::from,
    );
    if !dir.is_dir() || Command::new("rg").arg("--version").output().is_err() {
        eprintln!(
            "\n!!! no source tree at {} or no rg: the real-sources find bench is SKIPPED !!!\n",
            dir.display()
        );
        return;
    }
    let files = Command::new("rg")
        .arg("--files")
        .arg(&dir)
        .output()
        .map(|o| o.stdout.iter().filter(|b| **b == b'\n').count())
        .unwrap_or(0);
    let rt = support::current_thread_runtime();
    let finder = rt.block_on(Server::start(Sandbox::rooted_at(&dir), false));
    let mut g = c.benchmark_group(format!("find rare literal, {files} real source files"));
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    const RARE: &str = "gantry_rare_literal_7f3a";
    g.bench_function("rg -F (baseline)", |b| {
        b.iter(|| {
            let out = Command::new("rg")
                .args(["-F", "--no-heading", "-n", RARE])
                .arg(&dir)
                .output()
                .unwrap();
            black_box(out)
        })
    });
    g.bench_function("find over stdio", |b| {
        b.iter(|| {
            let r = rt.block_on(finder.call("find", json!({ "query": RARE })));
            assert_ne!(r.is_error, Some(true), "{:?}", r.content);
            black_box(r)
        })
    });
    g.finish();
}

criterion_group!(group, benches, real_sources);
criterion_main!(group);
