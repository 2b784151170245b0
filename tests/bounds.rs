//! What one hostile call can cost: every large input is sized before it is read, a giant line
//! costs its head, an image is counted in bytes per pixel. The server's peak memory (VmHWM of
//! the real process) is compared with its own figure after a small call, in the same run.

use serde_json::json;

use crate::support::{Sandbox, call, facts, gantry, stdio_client, text};

/// The server's peak resident memory so far, in MiB (Linux).
fn peak_mib(pid: u32) -> u64 {
    crate::support::proc_status(pid, "VmHWM:") / 1024
}

/// Writes `mib` MiB of `x` with no newline at all.
fn one_line_file(path: &std::path::Path, mib: usize) {
    use std::io::Write as _;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let block = vec![b'x'; 1 << 20];
    for _ in 0..mib {
        f.write_all(&block).unwrap();
    }
    f.flush().unwrap();
}

#[tokio::test]
async fn huge_inputs_cost_their_bounds_not_their_size() {
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = false\n");
    sb.write("small.txt", "hello\n");
    // 256 MiB, sparse: refused by apply_patch from its size alone.
    let big = std::fs::File::create(sb.root().join("big.txt")).unwrap();
    big.set_len(256 << 20).unwrap();
    drop(big);
    one_line_file(&sb.root().join("line.txt"), 64);
    std::fs::write(
        sb.root().join("deep.png"),
        crate::files::png_header(4100, 4100, 16, 6),
    )
    .unwrap();
    let (pid, client) = stdio_client(sb.serve(std::path::Path::new(gantry()), &["--stdio"])).await;
    let r = call(&client, "read", json!({ "paths": ["small.txt"] })).await;
    assert_eq!(text(&r), "==> small.txt (lines 1-1 of 1) <==\nhello\n");
    let before = peak_mib(pid);

    let patch = "*** Begin Patch\n*** Update File: big.txt\n@@\n-a\n+b\n*** End Patch";
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: big.txt: larger than the 16 MB apply_patch edits; nothing was written"
    );

    // A 64 MiB line: read gives its head and says so; find searches up to the line limit.
    let r = call(&client, "read", json!({ "paths": ["line.txt"] })).await;
    let shown = text(&r);
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("[line 1 is longer than")),
        "{}",
        &shown[shown.len().saturating_sub(400)..]
    );
    assert!(shown.len() < 300 << 10, "{} bytes", shown.len());
    assert_eq!(facts(&r)["entries"][0]["kind"], "text", "{}", facts(&r));
    let r = call(
        &client,
        "find",
        json!({ "query": "needle", "paths": ["line.txt"] }),
    )
    .await;
    assert!(
        text(&r).contains("have a line longer than 1024 KiB"),
        "{}",
        text(&r)
    );

    // 4100×4100 RGBA at 16 bits: 17 M pixels (under the pixel cap) but 129 MB of samples.
    let r = call(&client, "view_image", json!({ "path": "deep.png" })).await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: deep.png: 4100×4100 at 8 bytes per pixel decodes to 129 MB, more than the 128 MB gantry decodes"
    );

    let after = peak_mib(pid);
    // Before: +256 MiB for the patch, +64 MiB for read, several times that for find.
    assert!(after < before + 24, "peak {before} MiB -> {after} MiB");
    client.cancel().await.unwrap();
}
