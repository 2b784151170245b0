//! Recorded sessions, measured as users get them: the release server over stdio with rmcp's
//! client and the machine's real HOME.
//!
//! 1. Recording overhead: p50/p99 of a 1 KB `read` with `session_recording` on beside the same
//!    server with it off, calls interleaved (which goes first alternates), same run, and each
//!    server's whole CPU per call (the journal writer included). `SESSIONS_BENCH_MB=0` stops
//!    after this part.
//! 2. A store of 100,000 recorded calls plus SESSIONS_BENCH_MB (default 1024) MB of Codex
//!    rollouts: import throughput (MB/s), then `session` search p50/p99 through MCP for a mix
//!    of rare, common and multi-word queries, and newest-first listings.
//!
//! `cargo bench -p gantry --bench sessions`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use support::{Sandbox, gantry, stdio_client};

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> String {
    let Value::Object(args) = args else { panic!() };
    let r = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{:?}", r.content);
    support::text(&r)
}

/// User + system CPU of process `pid` so far, in clock ticks (100 a second here).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let f: Vec<&str> = after.split_whitespace().collect();
    // utime and stime: fields 14 and 15, counted here from the state (field 3) at 0.
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn stats(mut t: Vec<Duration>) -> (f64, f64) {
    t.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(t[t.len() / 2]), ms(t[t.len() * 99 / 100]))
}

/// A deterministic stream of words: a vocabulary of 20,000 made-up words drawn with a skewed
/// (Zipf-like) frequency, so some words are everywhere and most are rare, as in real text.
struct Words {
    state: u64,
    vocab: Vec<String>,
}

impl Words {
    fn new() -> Words {
        let syll = [
            "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu", "pha", "dro",
        ];
        let mut vocab = Vec::new();
        let mut n: usize = 0;
        while vocab.len() < 20_000 {
            let mut w = String::new();
            let mut k = n;
            loop {
                w.push_str(syll[k % syll.len()]);
                k /= syll.len();
                if k == 0 {
                    break;
                }
            }
            n += 1;
            if w.len() >= 4 {
                vocab.push(w);
            }
        }
        Words {
            state: 0x2545_f491_4f6c_dd1d,
            vocab,
        }
    }

    fn next(&mut self) -> &str {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let u = (self.state >> 11) as f64 / (1u64 << 53) as f64;
        // Zipf-ish: rank ~ N^u.
        let rank = ((self.vocab.len() as f64).powf(u) as usize).min(self.vocab.len() - 1);
        &self.vocab[rank]
    }

    fn sentence(&mut self, n: usize) -> String {
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            let w = self.next().to_string();
            s.push_str(&w);
        }
        s
    }
}

/// Writes Codex rollouts totalling about `mb` MB below `dir`; returns the bytes written.
fn write_rollouts(dir: &Path, mb: usize, cwd: &Path, words: &mut Words) -> u64 {
    let mut total = 0u64;
    let mut file_no = 0;
    while total < (mb as u64) << 20 {
        file_no += 1;
        let day = dir.join(format!("2026/11/{:02}", 1 + file_no % 28));
        std::fs::create_dir_all(&day).unwrap();
        let path = day.join(format!(
            "rollout-2026-11-01T00-00-00-0000{file_no:04}-0000-7000-8000-000000000000.jsonl"
        ));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let line = |v: Value, f: &mut std::io::BufWriter<std::fs::File>| {
            let s = v.to_string();
            f.write_all(s.as_bytes()).unwrap();
            f.write_all(b"\n").unwrap();
            s.len() as u64 + 1
        };
        total += line(
            json!({"timestamp":"2026-11-01T00:00:00.000Z","type":"session_meta","payload":{"id":"x","cwd":cwd,"timestamp":"2026-11-01T00:00:00.000Z"}}),
            &mut f,
        );
        // About 5 MB a file: turns of a prompt, a tool call with ~2 KB of output, an answer.
        let mut size = 0u64;
        let mut turn = 0;
        while size < 5 << 20 {
            turn += 1;
            let ts = format!(
                "2026-11-01T{:02}:{:02}:{:02}.000Z",
                (turn / 3600) % 24,
                (turn / 60) % 60,
                turn % 60
            );
            size += line(
                json!({"timestamp":ts,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":words.sentence(25)}]}}),
                &mut f,
            );
            size += line(
                json!({"timestamp":ts,"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":json!({"cmd": words.sentence(6)}).to_string(),"call_id":format!("c{turn}")}}),
                &mut f,
            );
            size += line(
                json!({"timestamp":ts,"type":"response_item","payload":{"type":"function_call_output","call_id":format!("c{turn}"),"output":format!("Process exited with code 0\nOutput:\n{}", words.sentence(300))}}),
                &mut f,
            );
            size += line(
                json!({"timestamp":ts,"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":words.sentence(60)}]}}),
                &mut f,
            );
        }
        total += size;
    }
    total
}

fn main() {
    let rt = support::current_thread_runtime();
    let _runtime = rt.enter();

    // 1. Recording overhead on a 1 KB read, recording off and on, interleaved.
    let off = Sandbox::new();
    let on = Sandbox::new();
    let kb: String = "0123456789abcdef ".repeat(61);
    for sb in [&off, &on] {
        sb.write("one.txt", &kb[..1024]);
    }
    off.config("[permissions]\nsession_recording = false\n");
    let (pid_off, c_off) = rt.block_on(stdio_client(
        off.serve_as_user(Path::new(gantry()), &["--stdio"]),
    ));
    let (pid_on, c_on) = rt.block_on(stdio_client(
        on.serve_as_user(Path::new(gantry()), &["--stdio"]),
    ));
    let args = json!({ "paths": ["one.txt"] });
    for _ in 0..200 {
        rt.block_on(call(&c_off, "read", args.clone()));
        rt.block_on(call(&c_on, "read", args.clone()));
    }
    const CALLS: usize = 5000;
    let (mut t_off, mut t_on) = (Vec::new(), Vec::new());
    let (cpu_off, cpu_on) = (cpu_ticks(pid_off), cpu_ticks(pid_on));
    for i in 0..CALLS {
        // Which server goes first alternates, so neither always runs after the other.
        for which in [i % 2, 1 - i % 2] {
            let (client, times) = if which == 0 {
                (&c_off, &mut t_off)
            } else {
                (&c_on, &mut t_on)
            };
            let t = Instant::now();
            rt.block_on(call(client, "read", args.clone()));
            times.push(t.elapsed());
        }
    }
    // All of each server's CPU over the run, the journal writer's batches included.
    let tick_us = 1e6 / 100.0;
    let per_call = |pid, before| (cpu_ticks(pid) - before) as f64 * tick_us / CALLS as f64;
    let (cpu_off, cpu_on) = (per_call(pid_off, cpu_off), per_call(pid_on, cpu_on));
    let (off50, off99) = stats(t_off);
    let (on50, on99) = stats(t_on);
    println!("\nread of 1 KB over stdio (MCP), real HOME, {CALLS} calls each, interleaved");
    println!(
        "session_recording off   p50 {off50:>7.3} ms  p99 {off99:>7.3} ms  server CPU {cpu_off:>6.1} µs a call"
    );
    println!(
        "session_recording on    p50 {on50:>7.3} ms  p99 {on99:>7.3} ms  server CPU {cpu_on:>6.1} µs a call"
    );
    println!(
        "recording overhead: p50 {:+.1} % of the read ({:+.1} µs); server CPU {:+.1} µs a call\n",
        (on50 / off50 - 1.0) * 100.0,
        (on50 - off50) * 1e3,
        cpu_on - cpu_off
    );
    drop((c_off, c_on));
    if std::env::var("SESSIONS_BENCH_MB").as_deref() == Ok("0") {
        return;
    }

    // 2. A large store: 100,000 recorded calls and the rollouts.
    let mb: usize = std::env::var("SESSIONS_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let big = Sandbox::new();
    let rollouts = big.path("rollouts");
    let mut words = Words::new();
    let t = Instant::now();
    let bytes = write_rollouts(&rollouts, mb, &big.root(), &mut words);
    println!(
        "wrote {:.0} MB of Codex rollouts in {:.1} s",
        bytes as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    let store = recordings::Store::open(&big.path("state/sessions.db")).unwrap();
    let redactor = recordings::Redactor::new(&[], Vec::new()).unwrap();
    let t = Instant::now();
    let mut per_call = Vec::new();
    for i in 0..100_000i64 {
        let args = json!({ "paths": [format!("src/{}.rs", words.next())] }).to_string();
        let result = words.sentence(150);
        let c = Instant::now();
        store
            .record_call(
                &recordings::Call {
                    ts_ms: 1_790_000_000_000 + i * 1000,
                    connector: "core",
                    tool: "read",
                    arguments: &args,
                    result: &result,
                    decision: "allow",
                    error: None,
                    failed: false,
                    grouping: recordings::Grouping::ClientLabel(format!("chat-{}", i / 500)),
                    labels: Vec::new(),
                    hidden: false,
                },
                &redactor,
            )
            .unwrap();
        per_call.push(c.elapsed());
    }
    let (rec50, rec99) = stats(per_call);
    println!(
        "recorded 100,000 calls (~1 KB each) in {:.1} s: p50 {:.3} ms p99 {:.3} ms a call (commit included)",
        t.elapsed().as_secs_f64(),
        rec50,
        rec99
    );
    let t = Instant::now();
    let report = recordings::import::refresh(
        &store,
        &[("codex".into(), rollouts.clone())],
        &redactor,
        Duration::from_secs(3600),
    );
    let secs = t.elapsed().as_secs_f64();
    println!(
        "imported {} files, {:.0} MB, {} entries in {:.1} s: {:.1} MB/s",
        report.files,
        report.bytes as f64 / 1048576.0,
        report.entries,
        secs,
        report.bytes as f64 / 1048576.0 / secs
    );
    drop(store);
    let db = std::fs::metadata(big.path("state/sessions.db"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!("store size {:.0} MB", db as f64 / 1048576.0);

    big.config(&format!(
        "[session]\nall_directories = true\n[session.sources]\nclaude = false\ncodex = {:?}\n",
        rollouts.display().to_string()
    ));
    let (_, client) = rt.block_on(stdio_client(
        big.serve_as_user(Path::new(gantry()), &["--stdio"]),
    ));
    // Common, middling and rare words of the vocabulary, alone and together, and listings.
    let vocab = Words::new().vocab;
    let queries: Vec<Value> = vec![
        json!({ "action": "search", "query": vocab[0] }),
        json!({ "action": "search", "query": vocab[40] }),
        json!({ "action": "search", "query": vocab[900] }),
        json!({ "action": "search", "query": vocab[15_000] }),
        json!({ "action": "search", "query": format!("{} {}", vocab[30], vocab[700]) }),
        json!({ "action": "search", "query": format!("{} {}", vocab[3000], vocab[12_000]) }),
        json!({ "action": "search" }),
        json!({ "action": "search", "source": "codex" }),
    ];
    for q in &queries {
        rt.block_on(call(&client, "session", q.clone()));
    }
    let mut all = Vec::new();
    println!(
        "\nsession search through MCP, {} MB imported + 100,000 calls:",
        mb
    );
    for q in &queries {
        let mut t = Vec::new();
        for _ in 0..40 {
            let s = Instant::now();
            rt.block_on(call(&client, "session", q.clone()));
            t.push(s.elapsed());
        }
        all.extend(t.iter().copied());
        let (p50, p99) = stats(t);
        println!(
            "  {:<60} p50 {p50:>8.2} ms  p99 {p99:>8.2} ms",
            q.to_string()
        );
    }
    let (p50, p99) = stats(all);
    println!("all queries: p50 {p50:.2} ms, p99 {p99:.2} ms (target p50 ≤ 20 ms)");
}
