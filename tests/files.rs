//! `read`, `view_image` and `find` end to end, through a real MCP client over stdio.

use crate::support::{Sandbox, call, facts, is_error, text};
use base64::Engine as _;
use serde_json::json;

/// One path's part of `read`'s text: its header line, its body verbatim, its `[note]` lines.
#[derive(Debug, Default)]
struct Section {
    /// The header without `==> ` and ` <==`, e.g. `a.txt (lines 1-2 of 2)`.
    header: String,
    body: String,
    notes: Vec<String>,
}

/// `read`'s text cut into its sections; notes after the last one (the call's own) stay with
/// it. A note is a trailing line in brackets, which the files these tests read never hold.
fn sections(result: &rmcp::model::CallToolResult) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    for line in text(result).split_inclusive('\n') {
        let bare = line.strip_suffix('\n').unwrap_or(line);
        if let Some(h) = bare
            .strip_prefix("==> ")
            .and_then(|h| h.strip_suffix(" <=="))
        {
            out.push(Section {
                header: h.to_string(),
                ..Section::default()
            });
        } else {
            let s = out.last_mut().expect("text before the first header");
            s.body.push_str(line);
        }
    }
    for s in &mut out {
        while let Some(last) = s
            .body
            .strip_suffix('\n')
            .and_then(|b| b.rsplit('\n').next())
            && last.starts_with('[')
            && last.ends_with(']')
        {
            s.notes.insert(0, last[1..last.len() - 1].to_string());
            let cut = s.body.len() - last.len() - 1;
            s.body.truncate(cut);
        }
    }
    out
}

/// `path:line` of each match line in `find`'s grep-style text.
fn match_lines(result: &rmcp::model::CallToolResult) -> Vec<String> {
    text(result)
        .lines()
        .filter(|l| !l.starts_with('['))
        .filter_map(|l| {
            let (path, rest) = l.split_once(':')?;
            let (line, _) = rest.split_once(": ")?;
            Some(format!("{path}:{line}"))
        })
        .collect()
}

#[tokio::test]
async fn read_batches_paths_ranges_and_directories() {
    let sb = Sandbox::new();
    sb.write("b.txt", "b1\nb2\nb3\nb4\n");
    sb.write("dir/z.txt", "z");
    sb.write("dir/a.txt", "a");
    std::fs::create_dir_all(sb.root().join("dir/sub")).unwrap();
    let client = sb.stdio(&[]).await;
    let r = call(&client, "read", json!({ "paths": ["dir"], "ranges": [{ "path": "b.txt", "start_line": 2, "end_line": 3 }, { "path": "b.txt", "start_line": 4 }] })).await;
    let s = facts(&r);
    let parts = sections(&r);
    assert_eq!(parts[0].header, "dir/ (directory)");
    assert_eq!(s["entries"][0]["kind"], "directory");
    assert_eq!(s["entries"][0]["entries"], 3);
    // One entry a line: `name/` for a directory, then size (files) and mtime.
    let listing: Vec<Vec<&str>> = parts[0]
        .body
        .lines()
        .map(|l| l.split("  ").collect())
        .collect();
    let names: Vec<&str> = listing.iter().map(|l| l[0]).collect();
    assert_eq!(names, ["a.txt", "sub/", "z.txt"]);
    assert_eq!((listing[0][1], listing[2][1]), ("1", "1"), "sizes");
    assert_eq!(listing[1].len(), 2, "no size for a directory: {listing:?}");
    for l in &listing {
        let mtime = l.last().unwrap();
        assert!(mtime.len() == 20 && mtime.ends_with('Z'), "{l:?}");
    }
    assert_eq!(parts[1].body, "b2\nb3\n");
    assert_eq!(
        (
            s["entries"][1]["start_line"].as_i64(),
            s["entries"][1]["end_line"].as_i64()
        ),
        (Some(2), Some(3))
    );
    assert_eq!(parts[2].body, "b4\n");
    assert_eq!(s["entries"][2]["total_lines"], 4);
    // Files verbatim, not escaped in JSON.
    let t = text(&r);
    assert!(
        t.ends_with("==> b.txt (lines 2-3 of 4) <==\nb2\nb3\n==> b.txt (lines 4-4 of 4) <==\nb4\n"),
        "{t}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_large_file_is_cut_on_a_line_boundary_with_the_line_to_continue_from() {
    let sb = Sandbox::new();
    // 10 000 lines of 64 bytes: 640 KB.
    let line = format!("{}\n", "x".repeat(63));
    sb.write("big.txt", &line.repeat(10_000));
    sb.write("small.txt", "tiny\n");
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "read",
        json!({ "paths": ["big.txt", "small.txt"] }),
    )
    .await;
    let s = facts(&r);
    let parts = sections(&r);
    let big = &s["entries"][0];
    assert_eq!(parts[0].body.len(), 262_144);
    assert_eq!(parts[0].header, "big.txt (lines 1-4096 of 10000)");
    assert_eq!(big["next_start_line"], 4097);
    assert_eq!(big["total_lines"], 10_000);
    assert_eq!(
        parts[0].notes,
        [
            "cut at the 256 KB per-file cap; read on with ranges [{\"path\": \"big.txt\", \"start_line\": 4097}]"
        ]
    );
    assert_eq!(parts[1].body, "tiny\n");
    assert_eq!(s["truncated"], true);
    assert!(
        text(&r).ends_with(
            "\n[cut at the 256 KB per-file cap; read on with ranges [{\"path\": \"big.txt\", \"start_line\": 4097}]]\n==> small.txt (lines 1-1 of 1) <==\ntiny\n"
        ),
        "{}",
        &text(&r)[text(&r).len() - 200..]
    );
    // Continuing from the line given reads the next window exactly.
    let r = call(
        &client,
        "read",
        json!({ "ranges": [{ "path": "big.txt", "start_line": 4097 }] }),
    )
    .await;
    let next = &facts(&r)["entries"][0];
    assert_eq!(next["start_line"], 4097);
    assert_eq!(next["end_line"], 8192);
    assert_eq!(sections(&r)[0].body, line.repeat(4096));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_call_budget_is_shared_between_files() {
    let sb = Sandbox::new();
    let line = format!("{}\n", "y".repeat(1023));
    for name in ["1.txt", "2.txt", "3.txt"] {
        sb.write(name, &line.repeat(200)); // 200 KB each
    }
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "read",
        json!({ "paths": ["1.txt", "2.txt", "3.txt"] }),
    )
    .await;
    let parts = sections(&r);
    let total: usize = parts.iter().map(|p| p.body.len()).sum();
    assert!(total <= 524_288, "{total}");
    assert_eq!(parts[2].body, line.repeat(112));
    assert_eq!(
        parts[2].notes,
        [
            "cut at the call's 512 KB; read on with ranges [{\"path\": \"3.txt\", \"start_line\": 113}]"
        ]
    );
    assert_eq!(facts(&r)["entries"][2]["next_start_line"], 113);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn encodings_are_decoded_and_binaries_described() {
    let sb = Sandbox::new();
    std::fs::write(sb.root().join("bom.txt"), "\u{FEFF}hello\n").unwrap();
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain("héllo\nworld\n".encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    std::fs::write(sb.root().join("utf16.txt"), utf16).unwrap();
    std::fs::write(sb.root().join("blob.bin"), [0u8, 1, 2, 3, 0, 9]).unwrap();
    std::fs::write(
        sb.root().join("latin1.txt"),
        [b'c', b'a', b'f', 0xE9, b'\n'],
    )
    .unwrap();
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "read",
        json!({ "paths": ["bom.txt", "utf16.txt", "blob.bin", "latin1.txt"] }),
    )
    .await;
    let s = facts(&r);
    let parts = sections(&r);
    assert_eq!(parts[0].body, "hello\n");
    assert_eq!(parts[1].body, "héllo\nworld\n");
    assert_eq!(parts[1].notes, ["decoded from UTF-16"]);
    assert_eq!(s["entries"][2]["kind"], "binary");
    assert_eq!(s["entries"][2]["size"], 6);
    assert_eq!(parts[2].header, "blob.bin (binary)");
    assert_eq!(parts[2].body, "", "no text of a binary");
    assert_eq!(s["entries"][3]["kind"], "binary");
    assert_eq!(
        parts[3].notes,
        ["binary or non-UTF-8 file, 5 bytes; not shown as text"]
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn globs_expand_bounded_and_say_when_they_were_cut() {
    let sb = Sandbox::new();
    for i in 0..250 {
        sb.write(&format!("many/f{i:03}.txt"), "x");
    }
    sb.write("src/a.rs", "fn a() {}\n");
    sb.write("src/deep/b.rs", "fn b() {}\n");
    sb.write("src/c.txt", "no");
    let client = sb.stdio(&[]).await;
    let r = call(&client, "read", json!({ "paths": ["src/**/*.rs"] })).await;
    let paths: Vec<String> = facts(&r)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(paths, ["src/a.rs", "src/deep/b.rs"]);
    let r = call(&client, "read", json!({ "paths": ["many/*.txt"] })).await;
    let s = facts(&r);
    assert_eq!(s["entries"].as_array().unwrap().len(), 200);
    assert_eq!(sections(&r).len(), 200);
    assert!(
        text(&r)
            .ends_with("\n[`many/*.txt` matched 250 files; the first 200 (by name) are read]\n"),
        "{}",
        text(&r)
    );
    assert_eq!(s["truncated"], true);
    let r = call(
        &client,
        "read",
        json!({ "paths": ["nothing/*.x", "*.none"] }),
    )
    .await;
    assert_eq!(facts(&r)["entries"][0]["error_code"], "NOT_FOUND");
    let parts = sections(&r);
    assert_eq!(parts[1].header, "*.none (error: NOT_FOUND)");
    assert_eq!(parts[1].notes, ["*.none: the glob matched no file"]);
    assert!(is_error(&r), "no path was read: {}", text(&r));
    client.cancel().await.unwrap();
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// A PNG whose header claims `width`×`height` and carries a few bytes of compressed data: a
/// decoder that trusted it would allocate width × height × 3 bytes.
fn png_header_only(width: u32, height: u32) -> Vec<u8> {
    png_header(width, height, 8, 2)
}

/// A PNG header of any bit depth and colour type (2 RGB, 6 RGBA) and no real pixels.
pub(crate) fn png_header(width: u32, height: u32, depth: u8, color: u8) -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for b in data {
            crc ^= u32::from(*b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    0xEDB8_8320 ^ (crc >> 1)
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend(width.to_be_bytes());
    ihdr.extend(height.to_be_bytes());
    ihdr.extend([depth, color, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |body: &[u8]| {
        out.extend(((body.len() - 4) as u32).to_be_bytes());
        out.extend(body);
        out.extend(crc32(body).to_be_bytes());
    };
    chunk(&ihdr);
    chunk(b"IDAT\x78\x9c\x03\x00\x00\x00\x00\x01");
    chunk(b"IEND");
    out
}

#[tokio::test]
async fn view_image_returns_a_bounded_image_with_a_description() {
    let sb = Sandbox::new();
    std::fs::write(sb.root().join("wide.png"), png(3000, 1000)).unwrap();
    std::fs::write(sb.root().join("small.png"), png(40, 30)).unwrap();
    std::fs::write(
        sb.root().join("bomb.png"),
        png_header_only(100_000, 100_000),
    )
    .unwrap();
    std::fs::write(sb.root().join("fake.png"), b"not an image at all").unwrap();
    let client = sb.stdio(&[]).await;

    let r = call(&client, "view_image", json!({ "path": "wide.png" })).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        text(&r),
        "wide.png: PNG image, 3000×1000 pixels, shown downscaled to 2048×683"
    );
    let image = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("image content");
    assert_eq!(image.mime_type, "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&image.data)
        .unwrap();
    let decoded = image::load_from_memory(&bytes).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (2048, 683));
    assert_eq!(r.structured_content, None);
    assert_eq!(
        facts(&r),
        json!({ "path": "wide.png", "mime": "image/png", "width": 2048, "height": 683, "original_width": 3000, "original_height": 1000 })
    );

    let r = call(&client, "view_image", json!({ "path": "small.png" })).await;
    assert_eq!(text(&r), "small.png: PNG image, 40×30 pixels");

    let r = call(&client, "view_image", json!({ "path": "bomb.png" })).await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: bomb.png: 100000×100000 is 10000000000 pixels, more than the 50000000 gantry decodes (possible decompression bomb)"
    );
    let r = call(&client, "view_image", json!({ "path": "fake.png" })).await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: fake.png: not a PNG, JPEG, GIF or WebP image"
    );
    let r = call(&client, "view_image", json!({ "path": "../outside.png" })).await;
    assert!(
        text(&r).starts_with("PATH_NOT_ALLOWED: ../outside.png: "),
        "{}",
        text(&r)
    );

    // Images among read's paths come back as image content too.
    let r = call(&client, "read", json!({ "paths": ["small.png"] })).await;
    assert_eq!(facts(&r)["entries"][0]["kind"], "image");
    assert_eq!(
        text(&r),
        "==> small.png (image) <==\n[small.png: PNG image, 40×30 pixels]\n"
    );
    assert_eq!(
        r.content.iter().filter(|c| c.as_image().is_some()).count(),
        1
    );
    client.cancel().await.unwrap();
}

async fn find_client(sb: &Sandbox) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    // find is published when exec is off.
    sb.config("[permissions]\nexec = false\n");
    sb.stdio(&[]).await
}

#[tokio::test]
async fn find_searches_text_with_context_and_honours_gitignore() {
    let sb = Sandbox::new();
    sb.write(
        "src/main.rs",
        "fn main() {\n    let needle = 1;\n    println!(\"{needle}\");\n}\n",
    );
    sb.write("src/lib.rs", "// no match here\n");
    sb.write("target/gen.rs", "needle in build output\n");
    sb.write(".gitignore", "target/\n");
    std::fs::create_dir_all(sb.root().join(".git")).unwrap();
    let client = find_client(&sb).await;
    let r = call(
        &client,
        "find",
        json!({ "query": "needle", "context_lines": 1 }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(r.structured_content, None);
    // grep's layout: `path:line: text` for a match, `path-line- text` for context.
    assert_eq!(
        text(&r),
        "src/main.rs-1- fn main() {\nsrc/main.rs:2:     let needle = 1;\nsrc/main.rs:3:     println!(\"{needle}\");\nsrc/main.rs-4- }\n"
    );
    assert_eq!(facts(&r), json!({ "matches": 2, "files": 2 }));
    let r = call(
        &client,
        "find",
        json!({ "query": "n[e]+dle = \\d", "mode": "regex", "paths": ["src"] }),
    )
    .await;
    assert_eq!(text(&r), "src/main.rs:2:     let needle = 1;\n");
    assert_eq!(facts(&r)["matches"], 1);
    let r = call(&client, "find", json!({ "query": "*.rs", "mode": "name" })).await;
    assert_eq!(text(&r), "src/lib.rs\nsrc/main.rs\n");
    assert_eq!(facts(&r)["matches"], 2);
    let r = call(&client, "find", json!({ "query": "(", "mode": "regex" })).await;
    assert!(
        text(&r).starts_with("INVALID_INPUT: query: "),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn find_pages_with_a_cursor_without_losing_or_repeating_results() {
    let sb = Sandbox::new();
    for f in 0..30 {
        let body: String = (0..20).map(|l| format!("hit {f} {l}\n")).collect();
        sb.write(&format!("d/f{f:02}.txt"), &body);
    }
    let client = find_client(&sb).await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({ "query": "hit" });
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let r = call(&client, "find", args).await;
        let s = facts(&r);
        let page = match_lines(&r);
        assert_eq!(s["matches"], page.len(), "{}", text(&r));
        seen.extend(page);
        pages += 1;
        match s["next_cursor"].as_str() {
            Some(c) => {
                // The text says how to go on, with the same cursor.
                assert!(
                    text(&r).ends_with(&format!("\n[more results follow: call find again with the same arguments and cursor \"{c}\"]\n")),
                    "{}",
                    text(&r)
                );
                cursor = Some(c.to_string());
            }
            None => {
                assert!(!text(&r).contains("more results follow"), "{}", text(&r));
                break;
            }
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 600);
    let mut dedup = seen.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), 600);
    let r = call(
        &client,
        "find",
        json!({ "query": "hit", "cursor": "garbage" }),
    )
    .await;
    assert_eq!(
        text(&r),
        "INVALID_INPUT: cursor: not a cursor from a previous find result"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn find_leaves_out_files_a_policy_forbids_without_a_trace() {
    let sb = Sandbox::new();
    sb.write("open/a.txt", "token\n");
    sb.write("secret/key.txt", "token\napi_key = \"abc\"\n");
    let dir = sb.path("policies");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = sb.root().join("secret/key.txt").canonicalize().unwrap();
    std::fs::write(dir.join("local.cedar"), format!("@id(\"local.secret\")\nforbid (principal, action, resource is Path) when {{ resource == Path::\"{}\" }};\n", secret.display())).unwrap();
    sb.config("[permissions]\nexec = false\n");
    let client = sb.stdio(&["--policies", &dir.display().to_string()]).await;
    let r = call(&client, "find", json!({ "query": "token" })).await;
    assert_eq!(text(&r), "open/a.txt:1: token\n");
    assert_eq!(facts(&r)["matches"], 1);
    // Guessing at the forbidden file's contents gets the same answer, right or wrong.
    let right = call(
        &client,
        "find",
        json!({ "query": "api_key = \"a", "mode": "text" }),
    )
    .await;
    let wrong = call(
        &client,
        "find",
        json!({ "query": "api_key = \"z", "mode": "text" }),
    )
    .await;
    assert_eq!(text(&right), text(&wrong));
    assert_eq!(facts(&right), facts(&wrong));
    // Nor does the count of files searched: the forbidden file is not one of them.
    assert!(
        text(&right).starts_with("[no match in 1 file(s)"),
        "{}",
        text(&right)
    );
    assert_eq!(facts(&right)["files"], 1, "{}", facts(&right));
    assert!(facts(&right)["next_cursor"].is_null());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_text_block_names_empty_files_and_ranges_past_the_end() {
    let sb = Sandbox::new();
    sb.write("empty.txt", "");
    sb.write("three.txt", "1\n2\n3\n");
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "read",
        json!({ "paths": ["empty.txt"], "ranges": [{ "path": "three.txt", "start_line": 9 }] }),
    )
    .await;
    let s = facts(&r);
    assert_eq!(s["entries"][0]["total_lines"], 0);
    assert_eq!(s["entries"][1]["total_lines"], 3);
    assert_eq!(
        text(&r),
        "==> empty.txt (empty) <==\n==> three.txt (no line 9: 3 lines) <==\n"
    );
    client.cancel().await.unwrap();
}

/// gantry's own files (config, state with its tokens and audit, policies) cannot be read,
/// searched, edited or deleted through the tools, even inside a root; and a config that
/// vanishes while serving refuses every call instead of falling back to fresh defaults.
#[tokio::test]
async fn gantrys_own_files_are_out_of_reach_of_its_tools() {
    let sb = Sandbox::with_own_files_in_root();
    sb.config("[permissions]\nexec = false\n");
    std::fs::write(sb.path("notes.txt"), "mine\n").unwrap();
    // The tokens an HTTP server keeps there (stdio creates none of its own).
    let token = "kq3-secret-token-Xw";
    std::fs::write(
        sb.path("state/tokens.toml"),
        format!("core = \"{token}\"\n"),
    )
    .unwrap();
    let client = sb.stdio(&[]).await;

    let r = call(
        &client,
        "read",
        json!({ "paths": ["state/tokens.toml", "config.toml", "state/audit.jsonl", "notes.txt"] }),
    )
    .await;
    let entries = facts(&r)["entries"].clone();
    let parts = sections(&r);
    for (e, part) in entries.as_array().unwrap().iter().zip(&parts).take(3) {
        assert_eq!(e["error_code"], "PATH_NOT_ALLOWED", "{e}");
        assert!(
            part.notes.len() == 1 && part.notes[0].contains("path.gantry_own_files"),
            "{part:?}"
        );
    }
    assert_eq!(parts[3].body, "mine\n", "other files are readable");
    assert!(!is_error(&r), "one path was read");
    let glob = call(&client, "read", json!({ "paths": ["state/*"] })).await;
    assert!(!text(&glob).contains(token), "no token through a glob");
    let found = call(&client, "find", json!({ "query": token })).await;
    assert!(!text(&found).contains(token), "{}", text(&found));
    // Never read at all, so not even a withheld count answers a guess.
    assert!(!text(&found).contains("withheld"), "{}", text(&found));
    let found = call(
        &client,
        "find",
        json!({ "query": token, "paths": ["state"] }),
    )
    .await;
    assert!(!text(&found).contains(token), "{}", text(&found));

    let found = call(&client, "find", json!({ "query": "exec" })).await;
    assert!(!text(&found).contains("config.toml"), "{}", text(&found));

    let edit = "*** Begin Patch\n*** Update File: config.toml\n@@\n-exec = false\n+exec = true\n*** End Patch";
    let r = call(&client, "apply_patch", json!({ "patch": edit })).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("path.gantry_own_files"), "{}", text(&r));
    let delete = "*** Begin Patch\n*** Delete File: state/audit.jsonl\n*** End Patch";
    assert!(is_error(
        &call(&client, "apply_patch", json!({ "patch": delete })).await
    ));
    let plant = "*** Begin Patch\n*** Add File: state/tokens2.toml\n+x\n*** End Patch";
    assert!(is_error(
        &call(&client, "apply_patch", json!({ "patch": plant })).await
    ));
    assert_eq!(
        std::fs::read_to_string(sb.path("config.toml")).unwrap(),
        "[permissions]\nexec = false\n"
    );
    assert!(sb.path("state/audit.jsonl").exists());
    assert!(!sb.path("state/tokens2.toml").exists());

    // Deleting the config while serving: the next call is refused, not given fresh defaults.
    std::fs::remove_file(sb.path("config.toml")).unwrap();
    let r = call(&client, "read", json!({ "paths": ["notes.txt"] })).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("is gone"), "{}", text(&r));
    sb.config("[permissions]\nexec = false\n");
    let r = call(&client, "read", json!({ "paths": ["notes.txt"] })).await;
    assert!(!is_error(&r), "{}", text(&r));
    client.cancel().await.unwrap();
}

/// Roots are live: a change to `roots` in the config file applies from the next call, and a
/// root that cannot be served refuses every call until fixed.
#[tokio::test]
async fn roots_from_the_config_file_are_live() {
    let sb = Sandbox::new();
    let (a, b) = (sb.path("a"), sb.path("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("x.txt"), "in a\n").unwrap();
    std::fs::write(b.join("y.txt"), "in b\n").unwrap();
    let roots = |dir: &std::path::Path| format!("roots = [{:?}]\n", dir.display().to_string());
    sb.config(&roots(&a));
    let mut cmd = tokio::process::Command::new(crate::support::gantry());
    cmd.args(["serve", "--stdio", "--config"])
        .arg(sb.path("config.toml"))
        .arg("--state-dir")
        .arg(sb.path("state"))
        .current_dir(sb.path("home"))
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "warn")
        .env_remove("GANTRY_ROOTS");
    let (_, client) = crate::support::stdio_client(cmd).await;
    let y = b.join("y.txt").display().to_string();
    let r = call(&client, "read", json!({ "paths": ["x.txt", y] })).await;
    assert_eq!(sections(&r)[0].body, "in a\n");
    assert_eq!(facts(&r)["entries"][1]["error_code"], "PATH_NOT_ALLOWED");

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    sb.config(&roots(&b));
    let x = a.join("x.txt").display().to_string();
    // Replacing a root widens too: refused until the file has settled, then applied.
    let r = call(&client, "read", json!({ "paths": ["y.txt", x] })).await;
    assert!(
        text(&r).contains("roots are being replaced"),
        "{}",
        text(&r)
    );
    tokio::time::sleep(server::app::SETTLE + std::time::Duration::from_millis(300)).await;
    let r = call(&client, "read", json!({ "paths": ["y.txt", x] })).await;
    assert_eq!(sections(&r)[0].body, "in b\n");
    assert_eq!(facts(&r)["entries"][1]["error_code"], "PATH_NOT_ALLOWED");

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    sb.config(&roots(&sb.path("missing")));
    let r = call(&client, "read", json!({ "paths": ["y.txt"] })).await;
    assert!(is_error(&r));
    assert!(text(&r).contains("every call is refused"), "{}", text(&r));
    client.cancel().await.unwrap();
}

/// Outside the roots every tool answers the same whatever is there: an existing file, a
/// missing one, a path through a file, `..` after a missing directory.
#[tokio::test]
async fn errors_say_nothing_about_what_lies_outside_the_roots() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.path("outside/dir")).unwrap();
    std::fs::write(sb.path("outside/f.txt"), "secret\n").unwrap();
    let client = find_client(&sb).await;
    let probes = [
        "../outside/f.txt",
        "../outside/nothing.txt",
        "../outside/f.txt/x",
        "../outside/nothing/x",
        "../outside/dir/../x",
        "../outside/missing/../x",
    ];
    let mut answers = std::collections::BTreeSet::new();
    for given in probes {
        let patch = format!("*** Begin Patch\n*** Update File: {given}\n@@\n-a\n+b\n*** End Patch");
        for (tool, args) in [
            ("read", json!({ "paths": [given] })),
            ("view_image", json!({ "path": given })),
            ("find", json!({ "query": "secret", "paths": [given] })),
            ("apply_patch", json!({ "patch": patch })),
        ] {
            let r = call(&client, tool, args).await;
            assert!(is_error(&r), "{tool} {given}: {}", text(&r));
            // read says it per path, under the path's header.
            let shown = text(&r);
            assert!(
                shown.contains("PATH_NOT_ALLOWED"),
                "{tool} {given}: {shown}"
            );
            answers.insert(format!("{tool}: {}", shown.replace(given, "<path>")));
        }
    }
    // One answer per tool, whatever the probe.
    assert_eq!(answers.len(), 4, "{answers:#?}");
    client.cancel().await.unwrap();
}

/// The red team's race, end to end: a directory inside the root is exchanged with a symlink to
/// outside (`renameat2(RENAME_EXCHANGE)`) in a loop paced by a fixed seed while `find`, a
/// `read` listing and a `read` glob run for a bounded time. No answer may carry an outside
/// name or outside content.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn walks_and_listings_hold_while_a_directory_is_swapped_for_a_symlink() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let sb = Sandbox::new();
    sb.write("d/inside.txt", "needle inside\n");
    sb.write("d/sub/deep.txt", "needle inside\n");
    std::fs::create_dir_all(sb.path("outside/sub")).unwrap();
    std::fs::write(sb.path("outside/outside.txt"), "needle OUTSIDE\n").unwrap();
    std::fs::write(sb.path("outside/sub/deep-outside.txt"), "needle OUTSIDE\n").unwrap();
    std::os::unix::fs::symlink(sb.path("outside"), sb.root().join("l")).unwrap();
    let client = find_client(&sb).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (a, b) = (sb.root().join("d"), sb.root().join("l"));
    let swapper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut x: u64 = 0x5eed;
            while !stop.load(Ordering::Relaxed) {
                let _ = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                std::thread::sleep(std::time::Duration::from_micros(x % 64));
            }
        })
    };
    let started = std::time::Instant::now();
    let mut calls = 0;
    while started.elapsed() < std::time::Duration::from_secs(3) {
        for (tool, args) in [
            ("find", json!({ "query": "needle" })),
            ("read", json!({ "paths": ["d"] })),
            ("read", json!({ "paths": ["d/**/*.txt"] })),
            ("find", json!({ "query": "*.txt", "mode": "name" })),
        ] {
            let r = call(&client, tool, args.clone()).await;
            let all = format!("{}{}", text(&r), facts(&r));
            assert!(!all.contains("OUTSIDE"), "{tool} {args}: {all}");
            assert!(!all.contains("outside.txt"), "{tool} {args}: {all}");
            calls += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(calls > 40, "only {calls} calls ran");
    client.cancel().await.unwrap();
}
