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
    assert_eq!(
        parse("bad").err().map(|e| e.to_string()),
        Some("line 1: the first line of the patch must be '*** Begin Patch'".into())
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
