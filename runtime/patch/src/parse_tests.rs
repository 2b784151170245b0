use super::*;

#[test]
fn every_operation_parses() {
    let p = parse("*** Begin Patch\n*** Add File: a.txt\n+x\n+y\n*** Delete File: b.txt\n*** Update File: c.txt\n*** Move to: d/c.txt\n@@ fn main\n ctx\n-old\n+new\n*** End of File\n*** End Patch\n").unwrap();
    assert_eq!(p.ops.len(), 3);
    assert_eq!(
        p.ops[0],
        FileOp::Add {
            path: "a.txt".into(),
            contents: "x\ny\n".into(),
            line: 2
        }
    );
    assert_eq!(
        p.ops[1],
        FileOp::Delete {
            path: "b.txt".into(),
            line: 5
        }
    );
    let FileOp::Update {
        path,
        move_to,
        chunks,
        line,
    } = &p.ops[2]
    else {
        panic!()
    };
    assert_eq!(
        (path.as_str(), move_to.as_deref(), *line),
        ("c.txt", Some("d/c.txt"), 6)
    );
    assert_eq!(chunks[0].anchor.as_deref(), Some("fn main"));
    assert!(chunks[0].end_of_file);
    assert_eq!(chunks[0].old_lines(), ["ctx", "old"]);
}

#[test]
fn markers_may_be_padded_and_crlf_is_fine() {
    let p = parse(
        "  *** Begin Patch \r\n  *** Update File: f.txt\r\n@@\r\n-a\r\n+b\r\n *** End Patch\r\n",
    );
    assert!(p.is_ok(), "{p:?}");
}

#[test]
fn heredoc_wrappers_are_dropped() {
    for open in ["<<EOF", "<<'EOF'", "<<\"EOF\""] {
        let text = format!("{open}\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF\n");
        assert!(parse(&text).is_ok(), "{open}");
    }
}

#[test]
fn errors_name_the_line() {
    let e = parse("bad")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.starts_with("line 1: the first line of the patch must be '*** Begin Patch'"),
        "{e}"
    );
    // The expected envelope, so the next attempt can get it right.
    assert!(
        e.contains("\n*** Begin Patch\n*** Update File: <path>") && e.contains("\n*** End Patch\n"),
        "{e}"
    );
    assert_eq!(parse("*** Begin Patch\nbad").err().map(|e| e.line), Some(2));
    let e = parse("*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch")
        .err()
        .unwrap_or_else(|| panic!("parsed"));
    assert_eq!(e.line, 2);
    assert!(
        e.message
            .starts_with("'*** Frobnicate File: foo' is not a valid hunk header"),
        "{e}"
    );
    let e = parse("*** Begin Patch\n*** Update File: foo.txt\n*** End Patch")
        .err()
        .unwrap_or_else(|| panic!("parsed"));
    assert_eq!(
        e.to_string(),
        "line 2: update of 'foo.txt' has no change (an update needs at least one @@ chunk)"
    );
    let e = parse("*** Begin Patch\n*** End Patch")
        .err()
        .unwrap_or_else(|| panic!("parsed"));
    assert_eq!(e.to_string(), "the patch changes no file");
}

#[test]
fn later_chunks_need_their_marker() {
    let e =
        parse("*** Begin Patch\n*** Update File: f\n-a\n+b\n*** End Patch").map(|p| p.ops.len());
    assert_eq!(e, Ok(1));
    let e = parse("*** Begin Patch\n*** Update File: f\n@@\n-a\nbad line\n*** End Patch").err();
    assert!(e.is_some_and(|e| e.message.starts_with("expected a chunk to start with '@@'")));
}

#[test]
fn an_environment_id_after_begin_is_accepted_once() {
    let p = parse("*** Begin Patch\n*** Environment ID: env-1\n*** Delete File: x\n*** End Patch")
        .unwrap();
    assert_eq!(
        p.ops,
        [FileOp::Delete {
            path: "x".into(),
            line: 3
        }]
    );
    let empty = parse("*** Begin Patch\n*** Environment ID:  \n*** Delete File: x\n*** End Patch");
    assert_eq!(empty.err().map(|e| e.line), Some(2));
    let twice = parse(
        "*** Begin Patch\n*** Environment ID: a\n*** Delete File: x\n*** Environment ID: b\n*** End Patch",
    );
    let e = twice.err().unwrap_or_else(|| panic!("parsed"));
    assert_eq!(e.line, 4, "{e}");
}

#[test]
fn a_git_diff_reads_as_the_same_operations() {
    let diff = "diff --git a/src/a.rs b/src/a.rs
index 1111111..2222222 100644
--- a/src/a.rs
+++ b/src/a.rs
@@ -1,3 +1,3 @@ fn main
 one
-two
+TWO
 three
@@ -10,2 +10,3 @@
 ten
+ten and a half
 eleven
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
";
    let p = parse(diff).unwrap();
    assert_eq!(p.ops.len(), 3);
    let FileOp::Update {
        path,
        move_to,
        chunks,
        line,
    } = &p.ops[0]
    else {
        panic!("{:?}", p.ops[0])
    };
    assert_eq!((path.as_str(), move_to, *line), ("src/a.rs", &None, 3));
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[0].old_lines(), ["one", "two", "three"]);
    assert_eq!(chunks[0].counts(), (1, 1));
    assert_eq!(chunks[1].old_lines(), ["ten", "eleven"]);
    assert_eq!(
        p.ops[1],
        FileOp::Add {
            path: "new.txt".into(),
            contents: "hello\nworld\n".into(),
            line: 16
        }
    );
    assert_eq!(
        p.ops[2],
        FileOp::Delete {
            path: "old.txt".into(),
            line: 23
        }
    );
}

#[test]
fn a_plain_diff_u_changes_the_new_name_and_only_git_renames_move() {
    // `diff -u a.txt b.txt`: timestamps after a tab, no a/ b/ prefixes; the new name is the
    // file to change, nothing is moved or deleted.
    let diff = "--- a.txt\t2026-12-03 12:00:00.000000000 +0000\n+++ b.txt\t2026-12-03 12:01:00.000000000 +0000\n@@ -1,2 +1,2 @@\n-x\n+y\n \n";
    let p = parse(diff).unwrap();
    let FileOp::Update {
        path,
        move_to,
        chunks,
        ..
    } = &p.ops[0]
    else {
        panic!()
    };
    assert_eq!((path.as_str(), move_to.as_deref()), ("b.txt", None));
    // The blank context line at the very end survives the trim of the patch text.
    assert_eq!(chunks[0].old_lines(), ["x", ""]);

    // a/ and b/ on both sides are git's prefixes even without a `diff --git` line.
    let p = parse("--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1 +1 @@\n-x\n+y\n").unwrap();
    assert_eq!(p.ops[0].path(), "src/x.rs");

    // A git rename with changes is a move.
    let p = parse("diff --git a/old.rs b/new.rs\nsimilarity index 90%\nrename from old.rs\nrename to new.rs\n--- a/old.rs\n+++ b/new.rs\n@@ -1 +1 @@\n-x\n+y\n").unwrap();
    let FileOp::Update { path, move_to, .. } = &p.ops[0] else {
        panic!()
    };
    assert_eq!(
        (path.as_str(), move_to.as_deref()),
        ("old.rs", Some("new.rs"))
    );
}

#[test]
fn a_hunk_longer_than_its_counts_is_refused_not_cut() {
    let e = parse("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n+d\n")
        .err()
        .unwrap_or_else(|| panic!("parsed"));
    assert_eq!(e.line, 7, "{e}");
    assert!(e.message.contains("past the line counts"), "{e}");
    // The next file's header right after a hunk is not taken for a hunk line.
    assert!(
        parse("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-c\n+d\n")
            .is_ok()
    );
}

#[test]
fn a_diff_whose_hunk_is_cut_short_or_has_no_anchor_is_refused() {
    let short = parse("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n");
    let e = short.err().unwrap_or_else(|| panic!("parsed"));
    assert!(e.message.contains("cut short"), "{e}");
    let bare = parse("--- a/f\n+++ b/f\n@@ -5,0 +6,1 @@\n+new\n");
    let e = bare.err().unwrap_or_else(|| panic!("parsed"));
    assert!(
        e.message.contains("neither context nor removed lines"),
        "{e}"
    );
    let early = parse("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\nzzz\n");
    let e = early.err().unwrap_or_else(|| panic!("parsed"));
    assert_eq!(e.line, 5, "{e}");
}
