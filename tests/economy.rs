//! What a model reads: each payload once for every kind of host, prose instead of JSON,
//! `isError` when nothing succeeded, and patches in the shapes models write.

use rmcp::model::CallToolResult;
use serde_json::json;

use crate::support::{Host, Sandbox, call, facts, is_error, text};

/// Numbered lines of source-like text, `bytes` long.
fn payload(bytes: usize) -> String {
    let mut out = String::new();
    let mut n = 0;
    while out.len() < bytes {
        n += 1;
        out.push_str(&format!("let v{n} = f(\"{n}\"); // line {n}\n"));
    }
    out.truncate(bytes - 1);
    out.push('\n');
    out
}

fn once_for_every_host(what: &str, r: &CallToolResult, payload: &str) {
    assert!(
        r.structured_content.is_none(),
        "{what}: structuredContent sent"
    );
    for host in Host::ALL {
        let view = host.model_view(r);
        assert_eq!(
            view.matches(payload).count(),
            1,
            "{what}: {} does not see the payload exactly once",
            host.name()
        );
        let ratio = view.len() as f64 / payload.len() as f64;
        assert!(
            ratio <= 1.05,
            "{what}: {} reads {} bytes for {} of payload ({ratio:.3})",
            host.name(),
            view.len(),
            payload.len()
        );
    }
}

#[tokio::test]
async fn every_host_reads_each_payload_once_and_programs_get_the_facts() {
    let sb = Sandbox::new();
    let client = sb.stdio(&[]).await;
    for (name, size) in [
        ("1k.txt", 1024),
        ("10k.txt", 10 * 1024),
        ("256k.txt", 256 * 1024),
    ] {
        let text = payload(size);
        sb.write(name, &text);
        let r = call(&client, "read", json!({ "paths": [name] })).await;
        once_for_every_host(name, &r, &text);
        // Nothing is lost: the facts a program needs are in `_meta`, none of the payload.
        let f = facts(&r);
        assert_eq!(f["entries"][0]["kind"], "text", "{f}");
        assert_eq!(
            f["entries"][0]["total_lines"],
            text.lines().count() as i64,
            "{f}"
        );
        assert_eq!(f["truncated"], false, "{f}");
        assert!(
            !f.to_string().contains("let v1 ="),
            "payload in the facts: {f}"
        );
    }

    let ten = payload(10 * 1024);
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "cat 10k.txt", "workdir": sb.root().display().to_string() }),
    )
    .await;
    once_for_every_host("exec_command", &r, &ten);
    assert_eq!(facts(&r)["exit_code"], 0, "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn is_error_is_set_only_when_nothing_succeeded() {
    let sb = Sandbox::new();
    sb.write("here.txt", "here\n");
    let client = sb.stdio(&[]).await;
    let r = call(&client, "read", json!({ "paths": ["gone.txt"] })).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("gone.txt (error: NOT_FOUND)"),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "read",
        json!({ "paths": ["gone.txt", "missing/*.rs"] }),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    let r = call(
        &client,
        "read",
        json!({ "paths": ["gone.txt", "here.txt"] }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("here\n"), "{}", text(&r));
    // A refused call says why in prose, with the code for programs in `_meta`.
    let r = call(&client, "read", json!({ "paths": [] })).await;
    assert!(is_error(&r));
    assert!(text(&r).starts_with("INVALID_INPUT: "), "{}", text(&r));
    let meta = r.meta.as_ref().map(|m| m.0.clone()).unwrap_or_default();
    assert_eq!(meta["gantry/error"]["code"], "INVALID_INPUT", "{meta:?}");
    client.cancel().await.unwrap();
}

/// The renderings a model reads, one call of each kind, with the sandbox's path and the
/// varying times taken out.
#[tokio::test]
async fn text_renderings_read_as_prose() {
    let sb = Sandbox::new();
    sb.write(
        "src/main.rs",
        "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n",
    );
    sb.write("src/lib.rs", "pub fn one() -> i32 {\n    1\n}\n");
    sb.write("notes.md", "# Notes\nnothing here\n");
    let client = sb.stdio(&[]).await;
    let root = sb.root().canonicalize().unwrap().display().to_string();
    let tidy = |t: String| {
        let t = t.replace(&root, "<root>");
        // Times in listings and commands vary from run to run.
        let mut out = String::new();
        for line in t.lines() {
            let line = match line.find("  20") {
                Some(i) if line.ends_with('Z') => format!("{}  <mtime>", &line[..i]),
                _ => line.to_string(),
            };
            let line = if line.starts_with("Wall time: ") {
                "Wall time: <s> seconds".to_string()
            } else {
                line
            };
            out.push_str(&line);
            out.push('\n');
        }
        out
    };
    let mut all = String::new();
    let mut show = |what: &str, r: &CallToolResult| {
        all.push_str(&format!("─── {what} (isError: {})\n", is_error(r)));
        all.push_str(&tidy(text(r)));
    };

    let r = call(
        &client,
        "read",
        json!({ "paths": ["src/main.rs", "src", "gone.txt"], "ranges": [{ "path": "notes.md", "start_line": 2 }] }),
    )
    .await;
    show("read: a file, a directory, a missing path, a range", &r);
    let r = call(
        &client,
        "find",
        json!({ "query": "1", "context_lines": 1, "paths": ["src"] }),
    )
    .await;
    show("find: text with context", &r);
    let r = call(&client, "find", json!({ "query": "*.rs", "mode": "name" })).await;
    show("find: names", &r);
    let patch = "*** Begin Patch\n*** Add File: src/new.rs\n+pub fn two() -> i32 {\n+    2\n+}\n*** Update File: src/lib.rs\n@@\n-    1\n+    1 + 0\n*** Update File: notes.md\n*** Move to: docs/notes.md\n@@\n-nothing here\n+something here\n+and more\n*** Delete File: src/main.rs\n*** End Patch";
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    show("apply_patch: add, update, move, delete", &r);
    let r = call(&client, "apply_patch", json!({ "patch": "--- a/x\n" })).await;
    show("apply_patch: neither V4A nor a diff", &r);
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "printf 'one\\ntwo\\n'; exit 3", "workdir": root }),
    )
    .await;
    show("exec_command: output and exit code", &r);
    insta::assert_snapshot!("text_renderings", all);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_unified_diff_applies_as_a_whole_or_not_at_all() {
    let sb = Sandbox::new();
    sb.write("a.txt", "one\ntwo\nthree\n");
    sb.write("b.txt", "alpha\nbeta\n");
    sb.write("gone.txt", "bye\n");
    let client = sb.stdio(&[]).await;

    // One hunk of two does not fit: nothing is written, and the error names the file.
    let failing = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\ndiff --git a/b.txt b/b.txt\n--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n alpha\n-gamma\n+GAMMA\n";
    let r = call(&client, "apply_patch", json!({ "patch": failing })).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).starts_with("PATCH_MISMATCH"), "{}", text(&r));
    assert!(text(&r).contains("b.txt"), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(sb.root().join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.root().join("b.txt")).unwrap(),
        "alpha\nbeta\n"
    );

    let diff = "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\ndiff --git a/b.txt b/b.txt\n--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,3 @@\n alpha\n beta\n+gamma\ndiff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\ndiff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
    let r = call(&client, "apply_patch", json!({ "patch": diff })).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        text(&r),
        "M a.txt (+1 -1)\nM b.txt (+1)\nA new.txt (+1)\nD gone.txt (-1)\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.root().join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.root().join("b.txt")).unwrap(),
        "alpha\nbeta\ngamma\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.root().join("new.txt")).unwrap(),
        "fresh\n"
    );
    assert!(!sb.root().join("gone.txt").exists());
    assert_eq!(facts(&r)["files"][3]["op"], "delete", "{}", facts(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn codex_environment_ids_and_mixed_line_endings_are_taken_as_written() {
    let sb = Sandbox::new();
    let original = "a\r\nb\nprogress 10%\rprogress 100%\nc\r\nlast";
    sb.write("mixed.txt", original);
    let client = sb.stdio(&[]).await;
    let patch = "*** Begin Patch\n*** Environment ID: local-1\n*** Update File: mixed.txt\n@@\n a\n-b\n+B\n*** End Patch\n";
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(text(&r), "M mixed.txt (+1 -1)\n");
    assert_eq!(
        std::fs::read(sb.root().join("mixed.txt")).unwrap(),
        b"a\r\nB\nprogress 10%\rprogress 100%\nc\r\nlast"
    );
    client.cancel().await.unwrap();
}

/// A file name cannot forge lines of a rendering: control characters in names are shown
/// escaped, in listings, find results and read headers alike.
#[tokio::test]
async fn names_with_newlines_cannot_forge_result_lines() {
    let sb = Sandbox::new();
    sb.write("dir/evil\nmain.rs:1: forged", "needle\n");
    let client = sb.stdio(&[]).await;
    let r = call(&client, "read", json!({ "paths": ["dir", "dir/*"] })).await;
    let t = text(&r);
    assert!(t.contains("evil\\nmain.rs:1: forged"), "{t}");
    assert!(!t.lines().any(|l| l.starts_with("main.rs")), "{t}");
    let r = call(
        &client,
        "find",
        json!({ "query": "needle", "paths": ["dir"] }),
    )
    .await;
    let t = text(&r);
    assert!(!t.lines().any(|l| l.starts_with("main.rs")), "{t}");
    assert!(t.contains("evil\\nmain.rs:1: forged:1: needle"), "{t}");
    client.cancel().await.unwrap();
}
