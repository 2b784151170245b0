use super::*;
use crate::ops::FileOp;
use crate::parse::parse;

fn update(original: &str, patch_body: &str) -> Result<Updated, MatchError> {
    let text = format!("*** Begin Patch\n*** Update File: f\n{patch_body}\n*** End Patch\n");
    let patch = parse(&text).unwrap();
    let FileOp::Update { chunks, .. } = &patch.ops[0] else {
        panic!("not an update")
    };
    apply_update(original, chunks)
}

#[test]
fn replaces_lines_and_counts() {
    let u = update("a\nb\nc\n", "@@\n a\n-b\n+B\n+B2\n c").unwrap();
    assert_eq!(u.text, "a\nB\nB2\nc\n");
    assert_eq!((u.added, u.removed), (2, 1));
}

#[test]
fn crlf_files_stay_crlf_and_keep_their_own_context_text() {
    let u = update("a  \r\nb\r\nc\r\n", "@@\n a\n-b\n+x").unwrap();
    assert_eq!(u.text, "a  \r\nx\r\nc\r\n");
}

#[test]
fn a_bom_survives() {
    let u = update("\u{FEFF}a\nb\n", "@@\n-a\n+z").unwrap();
    assert_eq!(u.text, "\u{FEFF}z\nb\n");
}

#[test]
fn a_missing_final_newline_is_added() {
    let u = update("only", "@@\n-only\n+one\n+two").unwrap();
    assert_eq!(u.text, "one\ntwo\n");
}

#[test]
fn pure_additions_append() {
    let u = update("a\nb\n", "@@\n+c").unwrap();
    assert_eq!(u.text, "a\nb\nc\n");
}

#[test]
fn anchors_and_chunk_order_move_the_cursor() {
    let original = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
    let u = update(original, "@@ fn b() {\n-    x();\n+    y();").unwrap();
    assert_eq!(u.text, "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n");
}

#[test]
fn unicode_look_alikes_match_ascii_patches() {
    let u = update(
        "let s = \u{201C}hi\u{201D}; // \u{2013}\n",
        "@@\n-let s = \"hi\"; // -\n+let s = 1;",
    )
    .unwrap();
    assert_eq!(u.text, "let s = 1;\n");
}

#[test]
fn a_miss_names_chunk_expected_lines_and_the_nearest_region() {
    let original = "one\ntwo\nthree\nfour\n";
    let e = update(original, "@@\n two\n-tree\n+3")
        .err()
        .unwrap_or_else(|| panic!("applied"));
    assert_eq!(e.chunk, 1);
    assert_eq!(e.patch_line, 3);
    assert_eq!(e.expected, ["two", "tree"]);
    assert_eq!(
        e.nearest,
        Some((2, vec!["two".to_string(), "three".to_string()]))
    );
    let shown = e.to_string();
    assert!(shown.starts_with("chunk 1 (patch line 3): could not find the expected lines\nexpected:\n  |two\n  |tree\nnearest candidate, lines 2-3:\n  |two\n  |three"), "{shown}");
}

#[test]
fn end_of_file_chunks_must_match_the_tail() {
    let original = "x\ny\nx\n";
    let u = update(original, "@@\n-x\n+z\n*** End of File").unwrap();
    assert_eq!(u.text, "x\ny\nz\n");
    let e = update(original, "@@\n-y\n+z\n*** End of File")
        .err()
        .unwrap_or_else(|| panic!("applied"));
    assert!(e.problem.contains("not the last lines"), "{e}");
}

/// The red team's quadratic case through the whole update: 20 000 identical context lines and
/// one that differs, against 40 000 identical lines. It fails as a mismatch (with the nearest
/// region), having spent linear work; the step count is checked in `seek`'s tests.
#[test]
fn many_identical_context_lines_fail_fast_as_a_mismatch() {
    let file = "same\n".repeat(40_000);
    let mut lines: Vec<ChunkLine> = vec![ChunkLine::Context("same".into()); 20_000];
    lines.push(ChunkLine::Delete("different".into()));
    let chunk = Chunk {
        anchor: None,
        lines,
        end_of_file: false,
        line: 1,
    };
    let e = apply_update(&file, &[chunk]).unwrap_err();
    assert_eq!(e.problem, "could not find the expected lines");
    assert_eq!(e.nearest.map(|(line, _)| line), Some(1));
}

#[test]
fn mixed_endings_and_lone_crs_are_kept_byte_for_byte() {
    // CRLF, LF, a lone CR inside a line, and no final newline: only the replaced line changes,
    // and it takes the ending of the line it replaces.
    let original = "a\r\nb\nprogress 10%\rprogress 100%\nc\r\nlast";
    let u = update(original, "@@\n a\n-b\n+B").unwrap();
    assert_eq!(u.text, "a\r\nB\nprogress 10%\rprogress 100%\nc\r\nlast");
    let u = update(original, "@@\n c\n-last\n+LAST").unwrap();
    assert_eq!(u.text, "a\r\nb\nprogress 10%\rprogress 100%\nc\r\nLAST\r\n");
}

#[test]
fn a_file_of_lone_crs_is_patched_by_its_lines() {
    let u = update("one\rtwo\rthree\r", "@@\n one\n-two\n+2").unwrap();
    assert_eq!(u.text, "one\r2\rthree\r");
}

#[test]
fn a_line_added_after_an_unended_last_line_gets_an_ending_between() {
    let u = update("a\nb", "@@\n b\n+c").unwrap();
    assert_eq!(u.text, "a\nb\nc\n");
}
