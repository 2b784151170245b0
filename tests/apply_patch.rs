//! `apply_patch` end to end: Codex's own scenarios (from ../shared/conformance), the
//! all-or-nothing preflight, per-operation permissions, and what a failed match reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{Sandbox, call, facts, is_error, text};
use serde_json::json;

fn scenarios_dir() -> PathBuf {
    crate::support::workspace("../shared/conformance/apply_patch/scenarios")
}

/// Regular files under `dir`, relative path → bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(
                    rel,
                    if ft.is_file() {
                        std::fs::read(&p).unwrap()
                    } else {
                        b"<not a regular file>".to_vec()
                    },
                );
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for (rel, bytes) in tree(from) {
        let target = to.join(&rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

#[tokio::test]
async fn codex_conformance_scenarios_all_pass() {
    let dir = scenarios_dir();
    if !dir.is_dir() {
        crate::support::cannot_check(&format!(
            "no apply_patch conformance corpus at {}",
            dir.display()
        ));
        return;
    }
    let sb = Sandbox::new();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 23, "{names:?}");
    for name in &names {
        copy_tree(&dir.join(name).join("input"), &sb.root().join(name));
    }
    let client = sb.stdio(&[]).await;
    let mut failures = Vec::new();
    for name in &names {
        let scenario = dir.join(name);
        let patch = std::fs::read_to_string(scenario.join("patch.txt")).unwrap();
        let work = sb.root().join(name).canonicalize().unwrap();
        let result = call(
            &client,
            "apply_patch",
            json!({ "patch": patch, "workdir": work.display().to_string() }),
        )
        .await;
        // gantry preflights the whole patch: where Codex keeps a partial result (015), the
        // tree must stay exactly as it was.
        let must_refuse = [
            "rejects",
            "fails",
            "requires",
            "015_failure_after_partial_success",
        ]
        .iter()
        .any(|k| name.contains(k));
        let expected = if name.starts_with("015_") {
            tree(&scenario.join("input"))
        } else {
            tree(&scenario.join("expected"))
        };
        let actual = tree(&work);
        if actual != expected {
            failures.push(format!(
                "{name}: tree differs ({})\n  expected {:?}\n  actual   {:?}",
                text(&result),
                expected.keys(),
                actual.keys()
            ));
        }
        if must_refuse != is_error(&result) {
            failures.push(format!(
                "{name}: isError = {}, want {must_refuse}: {}",
                is_error(&result),
                text(&result)
            ));
        }
    }
    client.cancel().await.unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
    eprintln!("apply_patch conformance: {} scenarios passed", names.len());
}

#[tokio::test]
async fn a_failing_hunk_writes_nothing_and_shows_the_nearest_region() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\nbeta\n");
    sb.write(
        "src/lib.rs",
        "fn one() {\n    1\n}\n\nfn two() {\n    2\n}\n",
    );
    let before = tree(&sb.root());
    let client = sb.stdio(&[]).await;
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: new.txt\n+hi\n*** Update File: src/lib.rs\n@@\n fn two() {\n-    3\n+    4\n }\n*** End Patch";
    let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(is_error(&result));
    assert_eq!(
        text(&result),
        "PATCH_MISMATCH: src/lib.rs: chunk 1 (patch line 9): could not find the expected lines\nexpected:\n  |fn two() {\n  |    3\n  |}\nnearest candidate, lines 5-7:\n  |fn two() {\n  |    2\n  |}; nothing was written"
    );
    // Programs read the error's code in `_meta`.
    assert_eq!(
        result.meta.as_ref().map(|m| m.0["gantry/error"].clone()),
        Some(json!({ "code": "PATCH_MISMATCH" }))
    );
    assert_eq!(tree(&sb.root()), before, "nothing may change");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn each_operation_needs_its_own_permission() {
    let sb = Sandbox::new();
    sb.write("keep.txt", "k\n");
    sb.write("edit.txt", "e\n");
    sb.config("[permissions]\nwrite_delete = false\n");
    let client = sb.stdio(&[]).await;
    let before = tree(&sb.root());
    let patch = "*** Begin Patch\n*** Update File: edit.txt\n@@\n-e\n+E\n*** Delete File: keep.txt\n*** End Patch";
    let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert_eq!(
        text(&result),
        format!(
            "PERMISSION_DENIED: keep.txt: `apply_patch:delete` denied: the `write_delete` permission is off (policy `permission.write_delete` in the base generated from surface.toml); to allow it, set `write_delete = true` under [permissions] in {} (applies from the next call); nothing was written",
            sb.path("config.toml").display()
        )
    );
    assert_eq!(tree(&sb.root()), before);
    // Without the delete, the edit goes through.
    let patch = "*** Begin Patch\n*** Update File: edit.txt\n@@\n-e\n+E\n*** End Patch";
    let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(result.structured_content, None);
    assert_eq!(
        facts(&result),
        json!({ "files": [{ "path": "edit.txt", "op": "update", "added": 1, "removed": 1 }] })
    );
    assert_eq!(text(&result), "M edit.txt (+1 -1)\n");
    assert_eq!(
        std::fs::read_to_string(sb.root().join("edit.txt")).unwrap(),
        "E\n"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn paths_outside_the_roots_are_refused_before_anything_is_written() {
    let sb = Sandbox::new();
    sb.write("in.txt", "x\n");
    let client = sb.stdio(&[]).await;
    let patch = "*** Begin Patch\n*** Add File: ok.txt\n+fine\n*** Add File: ../escape.txt\n+nope\n*** End Patch";
    let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
    let shown = text(&result);
    assert!(shown.starts_with("PATH_NOT_ALLOWED: ../escape.txt: `apply_patch:add` denied: the path is outside the approved roots"), "{shown}");
    assert!(
        shown.ends_with("(1 approved root(s)); nothing was written"),
        "{shown}"
    );
    assert!(!sb.root().join("ok.txt").exists());
    assert!(!sb.path("escape.txt").exists());
    let outside = sb.path("state").display().to_string();
    let result = call(&client, "apply_patch", json!({ "patch": "*** Begin Patch\n*** Add File: x\n+y\n*** End Patch", "workdir": outside })).await;
    assert!(
        text(&result).starts_with("PATH_NOT_ALLOWED: workdir `"),
        "{}",
        text(&result)
    );
    let result = call(&client, "apply_patch", json!({ "patch": "*** Begin Patch\n*** Add File: x\n+y\n*** End Patch", "workdir": "relative" })).await;
    assert_eq!(
        text(&result),
        "INVALID_INPUT: workdir: `relative` must be an absolute path"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn crlf_bom_and_mode_survive_an_edit() {
    let sb = Sandbox::new();
    std::fs::write(sb.root().join("win.txt"), "\u{FEFF}one\r\ntwo\r\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(sb.root().join("run.sh"), "#!/bin/sh\necho a\n").unwrap();
        std::fs::set_permissions(
            sb.root().join("run.sh"),
            std::fs::Permissions::from_mode(0o751),
        )
        .unwrap();
    }
    let client = sb.stdio(&[]).await;
    let patch =
        "*** Begin Patch\n*** Update File: win.txt\n@@\n one\n-two\n+TWO\n+three\n*** End Patch";
    let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(
        std::fs::read(sb.root().join("win.txt")).unwrap(),
        "\u{FEFF}one\r\nTWO\r\nthree\r\n".as_bytes()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let patch = "*** Begin Patch\n*** Update File: run.sh\n@@\n-echo a\n+echo b\n*** End Patch";
        let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
        assert!(!is_error(&result), "{}", text(&result));
        let mode = std::fs::metadata(sb.root().join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(mode, 0o751);
    }
    client.cancel().await.unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_cannot_carry_a_write_outside() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.path("outside")).unwrap();
    std::fs::write(sb.path("outside/target.txt"), "secret\n").unwrap();
    // A file link and a directory link, both pointing out of the root.
    std::os::unix::fs::symlink(sb.path("outside/target.txt"), sb.root().join("file-link")).unwrap();
    std::os::unix::fs::symlink(sb.path("outside"), sb.root().join("dir-link")).unwrap();
    let client = sb.stdio(&[]).await;
    for patch in [
        "*** Begin Patch\n*** Update File: file-link\n@@\n-secret\n+pwned\n*** End Patch",
        "*** Begin Patch\n*** Add File: dir-link/new.txt\n+pwned\n*** End Patch",
        "*** Begin Patch\n*** Add File: dir-link/../../escape.txt\n+pwned\n*** End Patch",
        "*** Begin Patch\n*** Delete File: dir-link/target.txt\n*** End Patch",
    ] {
        let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
        assert!(
            text(&result).starts_with("PATH_NOT_ALLOWED: "),
            "{patch}: {}",
            text(&result)
        );
    }
    assert_eq!(
        std::fs::read_to_string(sb.path("outside/target.txt")).unwrap(),
        "secret\n"
    );
    assert!(!sb.path("outside/new.txt").exists());
    client.cancel().await.unwrap();
}

/// TOCTOU: a directory checked inside the root is swapped for a symlink to the outside after
/// the decision and before the write. gantry opens every directory below the root with
/// `O_NOFOLLOW` relative to its parent (openat-style descriptors), so the write fails instead
/// of escaping.
#[cfg(unix)]
#[test]
fn a_directory_swapped_for_a_symlink_after_the_check_cannot_redirect_the_write() {
    use server::ops::{fs, path_policy::Roots};
    use std::sync::Arc;

    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.root().join("sub")).unwrap();
    std::fs::create_dir_all(sb.path("outside")).unwrap();
    let roots = Roots::new(&[sb.root()]).unwrap();
    let engine = Arc::new(server::policy_set::load(None).unwrap());
    let snapshot = authz::Snapshot {
        platform: "linux",
        read_only: false,
        permissions: generated::PERMISSIONS
            .iter()
            .map(|p| (p.name, true))
            .collect(),
    };
    let gate = authz::Gate::for_snapshot(engine, "core", &snapshot).unwrap();

    for (name, target) in [
        ("write", "sub/new.txt"),
        ("write into existing", "sub/old.txt"),
        ("remove", "sub/old.txt"),
    ] {
        std::fs::write(sb.root().join("sub/old.txt"), "old\n").unwrap();
        let resolved = roots.resolve(target, None).unwrap();
        let op = generated::core::ApplyPatchOperation::Add;
        let cx = tool_api::CallContext::new(gate.clone());
        let authorized = fs::WritePermit::authorize(&cx, op.write_action(), resolved).unwrap();

        // The swap: `sub` becomes a link to a directory outside the root.
        std::fs::rename(sb.root().join("sub"), sb.root().join("sub-moved")).unwrap();
        std::os::unix::fs::symlink(sb.path("outside"), sb.root().join("sub")).unwrap();
        std::fs::write(sb.path("outside/old.txt"), "outside\n").unwrap();

        let outcome = if name == "remove" {
            fs::remove_file(&authorized)
        } else {
            fs::write_atomic(&authorized, b"pwned\n", None)
        };
        let err = outcome.expect_err(name);
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{name}: {err}"
        );
        assert!(err.to_string().contains("was replaced"), "{name}: {err}");
        assert!(!sb.path("outside/new.txt").exists(), "{name}");
        assert_eq!(
            std::fs::read_to_string(sb.path("outside/old.txt")).unwrap(),
            "outside\n",
            "{name}"
        );
        assert_eq!(
            std::fs::read_dir(sb.path("outside")).unwrap().count(),
            1,
            "{name}: no temp file left outside"
        );

        // Undo the swap for the next case.
        std::fs::remove_file(sb.root().join("sub")).unwrap();
        std::fs::rename(sb.root().join("sub-moved"), sb.root().join("sub")).unwrap();
        std::fs::remove_file(sb.path("outside/old.txt")).unwrap();
    }
}

/// `..` below a directory that does not exist could name an existing file while looking new,
/// turning a create into an overwrite that only `write_create` allowed. It is refused.
#[tokio::test]
async fn dot_dot_through_a_missing_directory_cannot_overwrite_a_file() {
    let sb = Sandbox::new();
    sb.write("a.txt", "precious\n");
    sb.config("[permissions]\nwrite_edit = false\n");
    let client = sb.stdio(&[]).await;
    let patch = "*** Begin Patch\n*** Add File: nope/../a.txt\n+overwritten\n*** End Patch";
    let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert_eq!(
        text(&result),
        "INVALID_INPUT: nope/../a.txt: `..` after a directory that does not exist; nothing was written"
    );
    assert_eq!(
        std::fs::read_to_string(sb.root().join("a.txt")).unwrap(),
        "precious\n"
    );
    // Spelled plainly, the same overwrite needs write_edit, which is off.
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+overwritten\n*** End Patch";
    let result = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(text(&result).starts_with("PERMISSION_DENIED: a.txt: `apply_patch:update` denied: the `write_edit` permission is off"), "{}", text(&result));
    assert_eq!(
        std::fs::read_to_string(sb.root().join("a.txt")).unwrap(),
        "precious\n"
    );
    client.cancel().await.unwrap();
}

/// A mismatching chunk quotes the file only to a caller that may read it.
#[tokio::test]
async fn a_mismatch_quotes_the_file_only_when_read_is_allowed() {
    let sb = Sandbox::new();
    sb.write("secret.txt", "alpha secret\nbeta\ngamma\n");
    let patch = "*** Begin Patch\n*** Update File: secret.txt\n@@\n alpha secret\n-betx\n+z\n gamma\n*** End Patch";

    sb.config("[permissions]\nread = false\nsearch = false\n");
    let client = sb.stdio(&[]).await;
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(is_error(&r));
    let refused = text(&r);
    assert!(refused.starts_with("PATCH_MISMATCH"), "{refused}");
    assert!(!refused.contains("|beta"), "{refused}");
    assert!(refused.contains("not quoted"), "{refused}");
    client.cancel().await.unwrap();

    sb.config("");
    let client = sb.stdio(&[]).await;
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(text(&r).contains("|beta"), "{}", text(&r));
    client.cancel().await.unwrap();
}
