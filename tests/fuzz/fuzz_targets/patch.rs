//! The patch parser and matcher: any text parses or fails cleanly, and any update applies or
//! fails cleanly, within its work budget. Input: a file's text, a NUL, the patch.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (file, patch_text) = text.split_once('\0').unwrap_or(("", &text));
    let Ok(parsed) = patch::parse(patch_text) else {
        return;
    };
    for op in &parsed.ops {
        if let patch::FileOp::Update { chunks, .. } = op {
            match patch::apply_update(file, chunks) {
                Ok(updated) => {
                    // What was counted is what was written.
                    assert!(updated.removed <= file.lines().count() + chunks.len());
                }
                Err(e) => {
                    let shown = e.to_string();
                    assert!(!shown.is_empty());
                    // An error for a caller who may not read never quotes the file.
                    let hidden = e.without_file_text().to_string();
                    assert!(!hidden.contains("nearest candidate"));
                }
            }
        }
    }
});
