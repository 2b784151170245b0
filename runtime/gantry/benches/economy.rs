//! What a model pays to read gantry's results: for each tool call and each way a host turns a
//! result into model input (ChatGPT reads every text block and `structuredContent`; Codex
//! prefers `structuredContent`; Claude reads content only), the bytes the model receives over
//! the bytes of payload (the file, the command's output). 1.00 is the payload alone; a result
//! that carried its payload twice would be above 2.
//!
//! The release server over stdio with rmcp's client, the machine's real HOME and shell
//! profile (exec runs in the user's shell), files of 1 KB, 10 KB and 256 KB, and a command
//! printing 10 KB. It also checks that every host's model sees the payload exactly once.
//!
//! `cargo bench -p gantry --bench economy`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use rmcp::model::CallToolResult;
use serde_json::json;
use support::{Host, Sandbox, call, gantry, stdio_client};

/// Text that looks like source: numbered lines of words, so nothing compresses to a pattern.
fn payload(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 80);
    let mut n = 0;
    while out.len() < bytes {
        n += 1;
        out.push_str(&format!(
            "    let value_{n} = compute(input_{n}, \"field {n}\"); // step {n} of the pipeline\n"
        ));
    }
    let mut cut = bytes;
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    out.truncate(cut);
    out.pop();
    out.push('\n');
    out
}

fn row(what: &str, result: &CallToolResult, payload: &str) {
    for host in Host::ALL {
        let view = host.model_view(result);
        let copies = view.matches(payload).count();
        assert_eq!(
            copies,
            1,
            "{what}: {} sees the payload {copies} times",
            host.name()
        );
        println!(
            "{what:<26} {:<28} model bytes {:>8}  payload {:>8}  ratio {:.3}",
            host.name(),
            view.len(),
            payload.len(),
            view.len() as f64 / payload.len() as f64
        );
    }
}

fn main() {
    let rt = support::current_thread_runtime();
    rt.block_on(async {
        let sb = Sandbox::new();
        let root = sb.root().canonicalize().unwrap();
        let (_pid, client) =
            stdio_client(sb.serve_as_user(Path::new(gantry()), &["--stdio"])).await;

        println!("\nbytes a model receives / bytes of payload, per tool and per host behaviour");
        for (name, size) in [
            ("1k.txt", 1024),
            ("10k.txt", 10 * 1024),
            ("256k.txt", 256 * 1024),
        ] {
            let text = payload(size);
            std::fs::write(root.join(name), &text).unwrap();
            let r = call(&client, "read", json!({ "paths": [name] })).await;
            row(&format!("read {name}"), &r, &text);
        }
        let r = call(
            &client,
            "exec_command",
            json!({ "cmd": "cat 10k.txt", "workdir": root.display().to_string() }),
        )
        .await;
        row("exec_command cat 10k.txt", &r, &payload(10 * 1024));

        let tools = client.list_all_tools().await.unwrap();
        let bytes = serde_json::to_vec(&json!({ "tools": tools }))
            .unwrap()
            .len();
        println!(
            "\ntools/list of core, as this config publishes it: {bytes} bytes, {} tools",
            tools.len()
        );
        client.cancel().await.unwrap();
    });
}
