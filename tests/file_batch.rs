//! The Files connector's `file` batch (seed 001) through a real MCP client: a batch is
//! checked whole before its first change, runs in order, keeps a file's BOM and line endings,
//! deletes links rather than what they point to, and edits by line only a file gantry showed
//! since it last changed.

use crate::support::{Sandbox, call, facts, is_error, text};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};

async fn files(sb: &Sandbox) -> RunningService<RoleClient, ()> {
    sb.stdio(&["--connector", "files"]).await
}

fn q(kind: &str, path: &str, rest: Value) -> Value {
    let mut v = json!({ "reasoning": "the test asks for it", "type": kind, "path": path });
    if let (Value::Object(o), Value::Object(r)) = (&mut v, rest) {
        o.extend(r);
    }
    v
}

#[tokio::test]
async fn a_batch_edits_writes_and_deletes_in_order_keeping_bom_and_line_endings() {
    let sb = Sandbox::new();
    sb.write("crlf.txt", "\u{feff}one\r\ntwo\r\nthree\r\n");
    sb.write("gone.txt", "bye\n");
    let client = files(&sb).await;
    let r = call(
        &client,
        "file",
        json!({ "queries": [
            q("edit", "crlf.txt", json!({ "old_text": "two\n", "new_text": "TWO\nand a half\n" })),
            q("write", "new/dir/made.txt", json!({ "content": "fresh\n" })),
            q("delete", "gone.txt", json!({})),
        ]}),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        text(&r),
        "0. edited crlf.txt (+2 -1)\n1. wrote new/dir/made.txt (+1 -0)\n2. deleted gone.txt\nAll 3 done.\n"
    );
    assert_eq!(facts(&r)["done"], json!(3));
    assert_eq!(
        std::fs::read(sb.root().join("crlf.txt")).unwrap(),
        "\u{feff}one\r\nTWO\r\nand a half\r\nthree\r\n".as_bytes()
    );
    assert_eq!(
        std::fs::read_to_string(sb.root().join("new/dir/made.txt")).unwrap(),
        "fresh\n"
    );
    assert!(!sb.root().join("gone.txt").exists());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn one_bad_query_changes_nothing() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    sb.write("b.txt", "beta\n");
    let client = files(&sb).await;
    let batches = [
        (
            json!([
                q(
                    "edit",
                    "a.txt",
                    json!({ "old_text": "alpha", "new_text": "ALPHA" })
                ),
                q("write", "c.txt", json!({ "content": "c\n" })),
                q(
                    "edit",
                    "b.txt",
                    json!({ "old_text": "not there", "new_text": "x" })
                ),
            ]),
            "PATCH_MISMATCH: queries[2] (b.txt): old_text is not in the file",
        ),
        (
            json!([
                q("write", "c.txt", json!({ "content": "c\n" })),
                q(
                    "edit",
                    "./a.txt",
                    json!({ "old_text": "alpha", "new_text": "ALPHA" })
                ),
                q("delete", "a.txt", json!({})),
            ]),
            "INVALID_INPUT: queries[2] (a.txt): the same file as queries[1]",
        ),
        (
            json!([
                q("write", "c.txt", json!({ "content": "c\n" })),
                q("delete", "../outside.txt", json!({})),
            ]),
            "PATH_NOT_ALLOWED: queries[1] (../outside.txt)",
        ),
        (
            json!([
                q("write", "c.txt", json!({ "content": "c\n" })),
                q(
                    "write",
                    "b.txt",
                    json!({ "content": "x", "old_text": "beta" })
                ),
            ]),
            "INVALID_INPUT: queries[1] (b.txt): a write takes `content` only",
        ),
    ];
    for (queries, refusal) in batches {
        let r = call(&client, "file", json!({ "queries": queries })).await;
        assert!(is_error(&r));
        assert!(text(&r).starts_with(refusal), "{}", text(&r));
        assert!(text(&r).ends_with("; nothing was changed"), "{}", text(&r));
        assert_eq!(
            std::fs::read_to_string(sb.root().join("a.txt")).unwrap(),
            "alpha\n"
        );
        assert_eq!(
            std::fs::read_to_string(sb.root().join("b.txt")).unwrap(),
            "beta\n"
        );
        assert!(!sb.root().join("c.txt").exists());
    }
    // The schema's own bounds: at most 100 queries, a reasoning of at most 240 characters.
    let many: Vec<Value> = (0..101)
        .map(|i| q("write", &format!("f{i}"), json!({ "content": "x" })))
        .collect();
    let r = call(&client, "file", json!({ "queries": many })).await;
    assert!(text(&r).starts_with("INVALID_INPUT"), "{}", text(&r));
    let mut long = q("write", "f", json!({ "content": "x" }));
    long["reasoning"] = json!("x".repeat(241));
    let r = call(&client, "file", json!({ "queries": [long] })).await;
    assert!(
        text(&r).starts_with("INVALID_INPUT") && text(&r).contains("reasoning"),
        "{}",
        text(&r)
    );
    assert!(!sb.root().join("f").exists() && !sb.root().join("f0").exists());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_link_is_deleted_not_what_it_points_to() {
    let sb = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("target.txt"), "keep me\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("target.txt"), sb.root().join("link")).unwrap();
    let client = files(&sb).await;
    // Through the link, the target is outside the roots: an edit is refused.
    let r = call(
        &client,
        "file",
        json!({ "queries": [q("edit", "link", json!({ "old_text": "keep", "new_text": "lose" }))] }),
    )
    .await;
    assert!(text(&r).starts_with("PATH_NOT_ALLOWED"), "{}", text(&r));
    let r = call(
        &client,
        "file",
        json!({ "queries": [q("delete", "link", json!({}))] }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(std::fs::symlink_metadata(sb.root().join("link")).is_err());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("target.txt")).unwrap(),
        "keep me\n"
    );
    client.cancel().await.unwrap();
}

/// A link to gantry's own state directory (or to anything at or above gantry's files) is
/// never removed: its removal would change where gantry keeps its tokens.
#[tokio::test]
async fn a_link_to_gantrys_own_files_is_never_deleted() {
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(sb.path("state"), sb.root().join("state-link")).unwrap();
    std::os::unix::fs::symlink(sb.path(""), sb.root().join("above-link")).unwrap();
    let client = files(&sb).await;
    for link in ["state-link", "above-link"] {
        let r = call(
            &client,
            "file",
            json!({ "queries": [q("delete", link, json!({}))] }),
        )
        .await;
        assert!(
            text(&r).starts_with("PATH_NOT_ALLOWED"),
            "{link}: {}",
            text(&r)
        );
        assert!(std::fs::symlink_metadata(sb.root().join(link)).is_ok());
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn edits_by_line_need_the_file_as_gantry_last_showed_it() {
    let sb = Sandbox::new();
    sb.write("lines.txt", "1\n2\n3\n4\n");
    let server = sb.http(&[]).await;
    let core = server.client("core").await;
    let files = server.client("files").await;
    let by_line = json!({ "queries": [q("edit", "lines.txt", json!({ "start_line": 2, "end_line": 3, "new_text": "two-three" }))] });

    let r = call(&files, "file", by_line.clone()).await;
    assert!(
        text(&r).starts_with("STALE: queries[0] (lines.txt): gantry has not shown you this file"),
        "{}",
        text(&r)
    );

    let r = call(&core, "read", json!({ "paths": ["lines.txt"] })).await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = call(&files, "file", by_line.clone()).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(sb.root().join("lines.txt")).unwrap(),
        "1\ntwo-three\n4\n"
    );

    // Its own write counts as shown; a change by anyone else does not.
    let again = json!({ "queries": [q("edit", "lines.txt", json!({ "start_line": 1, "new_text": "one" }))] });
    let r = call(&files, "file", again.clone()).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(sb.root().join("lines.txt")).unwrap(),
        "one\ntwo-three\n4\n"
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(sb.root().join("lines.txt"), "someone\nelse\n").unwrap();
    let r = call(&files, "file", again).await;
    assert!(text(&r).starts_with("STALE"), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(sb.root().join("lines.txt")).unwrap(),
        "someone\nelse\n"
    );
    core.cancel().await.unwrap();
    files.cancel().await.unwrap();
}

#[tokio::test]
async fn each_kind_of_change_needs_its_own_permission() {
    let sb = Sandbox::new();
    sb.write("old.txt", "old\n");
    sb.config("[permissions]\nwrite_delete = false\nwrite_edit = false\n");
    let client = files(&sb).await;
    for (query, permission) in [
        (q("delete", "old.txt", json!({})), "write_delete"),
        (
            q("write", "old.txt", json!({ "content": "new\n" })),
            "write_edit",
        ),
        (
            q(
                "edit",
                "old.txt",
                json!({ "old_text": "old", "new_text": "new" }),
            ),
            "write_edit",
        ),
    ] {
        let r = call(
            &client,
            "file",
            json!({ "queries": [q("write", "made.txt", json!({ "content": "x" })), query] }),
        )
        .await;
        assert!(
            text(&r).starts_with("PERMISSION_DENIED")
                && text(&r).contains(&format!("the `{permission}` permission is off")),
            "{}",
            text(&r)
        );
        assert!(!sb.root().join("made.txt").exists());
        assert_eq!(
            std::fs::read_to_string(sb.root().join("old.txt")).unwrap(),
            "old\n"
        );
    }
    // Creating is its own permission, still on.
    let r = call(
        &client,
        "file",
        json!({ "queries": [q("write", "made.txt", json!({ "content": "x" }))] }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    client.cancel().await.unwrap();
}
