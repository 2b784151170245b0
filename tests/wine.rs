//! The Windows build, served end to end under Wine: `gantry.exe serve --stdio` started by
//! `wine`, driven by the same real MCP client as the rest of the suite, on Windows paths
//! (Wine's `Z:` drive is this machine's `/`). tests/run builds `gantry.exe` and runs this
//! module with `GANTRY_WINE_EXE` naming it; without that, each test says it checked nothing.
//! Wine is not Windows: what it cannot run is listed in the README, never passed here.

use std::path::{Path, PathBuf};

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::json;

use crate::support::{Sandbox, call, facts, is_error, text};

/// The Windows binary tests/run built, when it did.
fn wine_exe() -> Option<PathBuf> {
    match std::env::var_os("GANTRY_WINE_EXE") {
        Some(exe) => Some(PathBuf::from(exe)),
        None => {
            // Not `cannot_check`: the main suite runs without it, and tests/run's Windows
            // lane runs this module again with it (and fails there if it cannot).
            eprintln!("wine: GANTRY_WINE_EXE is not set; tests/run's Windows lane runs these");
            None
        }
    }
}

/// `path` as a Windows program under Wine names it: `Z:\...`.
fn z(path: &Path) -> String {
    format!("Z:{}", path.display().to_string().replace('/', "\\"))
}

async fn serve(sb: &Sandbox, exe: &Path) -> RunningService<RoleClient, ()> {
    serve_with(sb, exe, &[]).await
}

/// `wine gantry.exe serve` with this sandbox's config, state and root, and `extra` flags.
fn wine_serve(sb: &Sandbox, exe: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("wine");
    cmd.arg(exe)
        .args(["serve", "--config"])
        .arg(z(&sb.path("config.toml")))
        .arg("--state-dir")
        .arg(z(&sb.path("state")))
        .arg("--root")
        .arg(z(&sb.root()))
        .args(extra)
        .env("WINEDEBUG", "-all")
        .env("GANTRY_LOG", "warn")
        .kill_on_drop(true);
    cmd
}

/// `gantry.exe serve --stdio` with this sandbox's config, state and root, and `extra` flags.
async fn serve_with(sb: &Sandbox, exe: &Path, extra: &[&str]) -> RunningService<RoleClient, ()> {
    let mut cmd = wine_serve(sb, exe, &["--stdio"]);
    cmd.args(extra);
    crate::support::stdio_client(cmd).await.1
}

#[tokio::test]
async fn files_are_read_found_and_patched_on_windows_paths() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("");
    sb.write("notes/hello.txt", "hello from wine\r\nsecond\r\n");
    let client = serve(&sb, &exe).await;
    for path in [
        "notes\\hello.txt".to_string(),
        "notes/hello.txt".to_string(),
        z(&sb.root().join("notes/hello.txt")),
        "NOTES\\HELLO.TXT".to_string(),
    ] {
        let r = call(&client, "read", json!({ "paths": [path] })).await;
        assert!(text(&r).contains("hello from wine"), "{path}: {}", text(&r));
    }
    let r = call(&client, "find", json!({ "query": "second" })).await;
    assert!(text(&r).contains("hello.txt"), "{}", text(&r));
    let patch = "*** Begin Patch\n*** Add File: made\\new.txt\n+made under wine\n*** End Patch\n";
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(!is_error(&r), "{}", text(&r));
    let made = std::fs::read_to_string(sb.root().join("made/new.txt")).unwrap();
    assert!(made.starts_with("made under wine"), "{made:?}");
    client.cancel().await.unwrap();
}

/// `gantry.exe serve` over Streamable HTTP on loopback: a real client reads through the
/// printed URL, and a wrong token in the path answers 404 with nothing in it, as on Linux.
#[tokio::test]
async fn http_on_loopback_serves_a_real_client_and_hides_behind_its_token() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("");
    sb.write("notes/hello.txt", "hello over http\r\n");
    let cmd = wine_serve(&sb, &exe, &["--port", "0", "--no-admin"]);
    let server = crate::support::http_server(cmd).await;
    let client = server.client("core").await;
    let r = call(&client, "read", json!({ "paths": ["notes\\hello.txt"] })).await;
    assert!(text(&r).contains("hello over http"), "{}", text(&r));
    client.cancel().await.unwrap();
    let token = server.token("core");
    let wrong = server.url("core").replace(&token, "not-the-token");
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": { "name": "wine-test", "version": "0" } } });
    let r = reqwest::Client::new()
        .post(&wrong)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.unwrap(), "");
}

#[tokio::test]
async fn no_windows_path_form_escapes_a_root_or_tells_what_lies_outside() {
    let Some(exe) = wine_exe() else { return };
    let root = Sandbox::new();
    std::fs::create_dir_all(root.path("inside")).unwrap();
    std::fs::write(root.path("inside/ok.txt"), "ok").unwrap();
    std::fs::write(root.path("secret.txt"), "outside").unwrap();
    let sb_outside = Sandbox::rooted_at(&root.path("inside"));
    sb_outside.config("");
    let client = serve(&sb_outside, &exe).await;
    let outside = z(&root.path("secret.txt"));
    let missing = z(&root.path("missing.txt"));
    let forms = [
        "..\\secret.txt".to_string(),
        outside.clone(),
        format!("\\\\?\\{outside}"),
        format!("\\\\.\\{outside}"),
        outside.replace('\\', "/"),
        format!("{}\\..\\secret.txt", z(&root.path("inside"))),
        "\\\\localhost\\Z$\\etc\\hostname".to_string(),
        "C:\\windows\\win.ini".to_string(),
        "ok.txt:secret".to_string(),
        "ok.txt::$DATA".to_string(),
        "CON".to_string(),
        "NUL.txt".to_string(),
        "COM1".to_string(),
        "ok.txt.".to_string(),
        "ok.txt ".to_string(),
    ];
    for form in &forms {
        let r = call(&client, "read", json!({ "paths": [form] })).await;
        let t = text(&r);
        assert!(
            t.contains("error: PATH_NOT_ALLOWED") || t.contains("error: INVALID_INPUT"),
            "`{form}` was not refused: {t}"
        );
        assert!(
            !t.contains("outside\n"),
            "`{form}` read the outside file: {t}"
        );
    }
    // Refused alike whether the outside file exists or not: no existence oracle.
    let said = |p: String| {
        let client = &client;
        async move {
            let r = call(client, "read", json!({ "paths": [p.clone()] })).await;
            text(&r).replace(&p, "<path>")
        }
    };
    assert_eq!(said(outside.clone()).await, said(missing.clone()).await);
    assert_eq!(
        said(format!("\\\\?\\{outside}")).await,
        said(format!("\\\\?\\{missing}")).await
    );
    // Links made on this machine's side, which Wine shows as plain files and directories:
    // one to a directory outside, one to a file outside. (One to a missing file is, to a
    // Windows program under Wine, no file at all: it reads as missing, like any missing name.)
    std::os::unix::fs::symlink(root.path(""), root.path("inside/up")).unwrap();
    std::os::unix::fs::symlink(root.path("secret.txt"), root.path("inside/to-secret.txt")).unwrap();
    for form in ["up\\secret.txt", "UP\\Secret.TXT", "to-secret.txt"] {
        let r = call(&client, "read", json!({ "paths": [form] })).await;
        assert!(
            text(&r).contains("error: PATH_NOT_ALLOWED") && !text(&r).contains("(lines "),
            "`{form}` went through a link out of the root: {}",
            text(&r)
        );
    }
    let r = call(&client, "find", json!({ "query": "outside" })).await;
    assert!(
        !text(&r).contains(":1: outside"),
        "find followed a link out: {}",
        text(&r)
    );
    client.cancel().await.unwrap();

    // gantry's own files inside a root (the whole sandbox here), by any case.
    let sb = Sandbox::with_own_files_in_root();
    sb.config("");
    let client = serve(&sb, &exe).await;
    for own in [
        "config.toml",
        "CONFIG.TOML",
        "state\\audit.jsonl",
        "STATE\\Audit.JSONL",
    ] {
        let r = call(&client, "read", json!({ "paths": [own] })).await;
        assert!(
            text(&r).contains("error: PATH_NOT_ALLOWED"),
            "`{own}`: {}",
            text(&r)
        );
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn commands_run_in_cmd_under_wine() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = true\n");
    let client = serve(&sb, &exe).await;
    let target = z(&sb.root().join("from-cmd.txt"));
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("echo ran in cmd> {target}") }),
    )
    .await;
    assert!(text(&r).contains("exited with code 0"), "{}", text(&r));
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo wine-exec-ok" }),
    )
    .await;
    assert!(
        crate::support::command_output(&r).contains("wine-exec-ok"),
        "{}",
        text(&r)
    );
    let written = std::fs::read_to_string(sb.root().join("from-cmd.txt")).unwrap_or_default();
    assert!(
        written.starts_with("ran in cmd"),
        "{written:?}: {}",
        text(&r)
    );
    let r = call(&client, "exec_command", json!({ "cmd": "exit /b 7" })).await;
    assert!(text(&r).contains("exited with code 7"), "{}", text(&r));
    client.cancel().await.unwrap();
}

/// The Windows short (8.3) name Wine gives `path`, as cmd.exe's `%~s` prints it.
fn short_name(path: &Path) -> String {
    let out = std::process::Command::new("wine")
        .args([
            "cmd",
            "/d",
            "/c",
            // Unquoted: Wine's cmd keeps quotes in `%~s` (the temp paths have no spaces).
            &format!("for %I in ({}) do @echo %~sI", z(path)),
        ])
        .env("WINEDEBUG", "-all")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An interactive program's question comes back, and the answer given through `write_stdin`
/// reaches it.
#[tokio::test]
async fn an_interactive_program_is_answered_through_write_stdin_under_wine() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = true\n");
    let client = serve(&sb, &exe).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "set /p who=Name? & call echo hello %who%", "yield_time_ms": 2000 }),
    )
    .await;
    assert!(text(&r).contains("Name?"), "{}", text(&r));
    let id = facts(&r)["session_id"].as_i64().unwrap();
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "chars": "wine\r\n", "yield_time_ms": 5000 }),
    )
    .await;
    assert!(text(&r).contains("hello wine"), "{}", text(&r));
    assert!(text(&r).contains("exited with code 0"), "{}", text(&r));
    client.cancel().await.unwrap();
}

/// Output past the inline budget goes to a spill file, which is read back through `read`.
#[tokio::test]
async fn long_output_is_cut_and_kept_in_a_spill_file_under_wine() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = true\n");
    let client = serve(&sb, &exe).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "for /l %i in (1,1,3000) do @echo line-%i", "max_output_tokens": 200, "yield_time_ms": 20000 }),
    )
    .await;
    let t = text(&r);
    assert!(t.contains("exited with code 0"), "{t}");
    assert!(t.contains("line-3000"), "the end is kept: {t}");
    assert!(t.len() < 4000, "{} bytes inline", t.len());
    let out = crate::support::command_output(&r);
    let marker = out
        .lines()
        .find(|l| l.starts_with("[… "))
        .unwrap_or_else(|| panic!("nothing was cut: {t}"));
    let read = marker
        .trim_end()
        .split_once("to see them: read ")
        .and_then(|(_, rest)| rest.strip_suffix(" …]"))
        .unwrap_or_else(|| panic!("no read call in {marker}"));
    let args: serde_json::Value = serde_json::from_str(read).unwrap();
    let first = args["ranges"][0]["start_line"].as_u64().unwrap();
    let r = call(&client, "read", args.clone()).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains(&format!("line-{first}")),
        "{args}: {}",
        text(&r)
    );
    client.cancel().await.unwrap();
}

/// Killing a session ends its whole job: cmd.exe and the program it started, as Wine's
/// process list (its processes are this machine's, named by their Windows command lines)
/// shows.
#[tokio::test]
async fn a_kill_ends_the_whole_job_as_wines_process_list_shows() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = true\n");
    let client = serve(&sb, &exe).await;
    let marker = "-n 311 127.0.0.1";
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("echo up & ping {marker} > nul"), "yield_time_ms": 1500 }),
    )
    .await;
    let id = facts(&r)["session_id"].as_i64().unwrap();
    let started = std::time::Instant::now();
    while !crate::support::alive(marker) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "ping never showed in the process list: {}",
            text(&r)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "kill": true }),
    )
    .await;
    assert!(
        text(&r).contains(&format!("session {id} and its process tree were ended")),
        "{}",
        text(&r)
    );
    crate::support::gone(marker).await;
    client.cancel().await.unwrap();
}

/// The Shell connector on Windows: `fs.*` on Windows paths inside the root, nothing outside
/// it, `shell.exec` by Windows' own names (case and `PATHEXT`), and a timeout that ends the
/// program's whole job.
#[tokio::test]
async fn the_shell_connector_works_on_windows_names_and_paths() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("[shell]\nallowed_commands = [\"hostname\", \"ping.exe\"]\n");
    std::fs::write(sb.path("outside.txt"), "outside").unwrap();
    let client = serve_with(&sb, &exe, &["--connector", "shell"]).await;
    let ok = |r: &rmcp::model::CallToolResult| {
        assert!(!is_error(r), "{}", text(r));
        r.structured_content.clone().unwrap_or_default()
    };
    ok(&call(
        &client,
        "fs.mkdir",
        json!({ "path": "a\\b", "recursive": true }),
    )
    .await);
    let inside = z(&sb.root().join("a/b/f.txt"));
    let o = ok(&call(
        &client,
        "fs.write",
        json!({ "path": inside, "content": "one\r\n" }),
    )
    .await);
    assert_eq!(o["bytes_written"], json!(5));
    let o = ok(&call(&client, "fs.read", json!({ "path": "A/B\\F.TXT" })).await);
    assert_eq!(o["content"], json!("one\r\n"), "{o}");
    for outside in [z(&sb.path("outside.txt")), "..\\outside.txt".to_string()] {
        let r = call(&client, "fs.read", json!({ "path": outside })).await;
        assert!(
            text(&r).contains("PATH_NOT_ALLOWED"),
            "{outside}: {}",
            text(&r)
        );
    }
    for name in ["hostname", "HOSTNAME", "hostname.exe", "Ping", "ping.EXE"] {
        let args = if name.eq_ignore_ascii_case("ping") || name.eq_ignore_ascii_case("ping.exe") {
            json!(["-n", "1", "127.0.0.1"])
        } else {
            json!([])
        };
        let r = call(
            &client,
            "shell.exec",
            json!({ "command": name, "args": args }),
        )
        .await;
        assert!(!is_error(&r), "`{name}` was refused: {}", text(&r));
    }
    let r = call(&client, "shell.exec", json!({ "command": "whoami" })).await;
    assert!(is_error(&r), "`whoami` is not allowed: {}", text(&r));
    let marker = "-n 313 127.0.0.1";
    let o = ok(&call(
        &client,
        "shell.exec",
        json!({ "command": "ping", "args": ["-n", "313", "127.0.0.1"], "timeout_ms": 1500 }),
    )
    .await);
    assert_eq!(o["timed_out"], json!(true), "{o}");
    crate::support::gone(marker).await;
    client.cancel().await.unwrap();
}

/// The `file` batch on Windows paths: checked whole, then carried out; a query outside the
/// root stops the batch before anything changes.
#[tokio::test]
async fn the_file_batch_works_on_windows_paths() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("");
    sb.write("notes/keep.txt", "alpha\r\nbeta\r\n");
    sb.write("notes/old.txt", "to delete");
    std::fs::write(sb.path("outside.txt"), "outside").unwrap();
    let client = serve_with(&sb, &exe, &["--connector", "files"]).await;
    let why = "a test";
    let r = call(
        &client,
        "file",
        json!({ "queries": [
            { "reasoning": why, "type": "edit", "path": "NOTES\\Keep.txt", "old_text": "beta", "new_text": "gamma" },
            { "reasoning": why, "type": "write", "path": z(&sb.root().join("made.txt")), "content": "new" },
            { "reasoning": why, "type": "write", "path": z(&sb.path("outside.txt")), "content": "pwned" },
        ] }),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("PATH_NOT_ALLOWED"), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(sb.path("outside.txt")).unwrap(),
        "outside"
    );
    assert!(!sb.root().join("made.txt").exists(), "half a batch ran");
    let r = call(
        &client,
        "file",
        json!({ "queries": [
            { "reasoning": why, "type": "edit", "path": "NOTES\\Keep.txt", "old_text": "beta", "new_text": "gamma" },
            { "reasoning": why, "type": "write", "path": z(&sb.root().join("made.txt")), "content": "new" },
            { "reasoning": why, "type": "delete", "path": "Notes\\Old.txt" },
        ] }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let kept = std::fs::read_to_string(sb.root().join("notes/keep.txt")).unwrap();
    assert_eq!(kept, "alpha\r\ngamma\r\n");
    assert_eq!(
        std::fs::read_to_string(sb.root().join("made.txt")).unwrap(),
        "new"
    );
    assert!(!sb.root().join("notes/old.txt").exists());
    client.cancel().await.unwrap();
}

/// A path through short (8.3) names stands for the file it names: one inside a root is read
/// by it, and gantry's own files are refused by theirs (Wine gives a short name to what 8.3
/// cannot show; here the temp directory's). They are refused by a hard link's name too: their
/// identity (volume serial number and file index) is what is checked.
#[tokio::test]
async fn gantrys_own_files_are_refused_by_short_name_and_by_hard_link() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::with_own_files_in_root();
    sb.config("");
    std::fs::write(sb.path("a-rather-long-name.text"), "by its short name").unwrap();
    let client = serve(&sb, &exe).await;
    let long = short_name(&sb.path("a-rather-long-name.text"));
    let r = call(&client, "read", json!({ "paths": [long] })).await;
    assert!(
        text(&r).contains("by its short name"),
        "{long}: {}",
        text(&r)
    );
    // The read above is in the audit, which is there now.
    let own = short_name(&sb.path("state/audit.jsonl"));
    assert!(
        long.contains('~') && own.contains('~'),
        "no short names: {long:?} {own:?}"
    );
    let r = call(&client, "read", json!({ "paths": [own] })).await;
    assert!(
        text(&r).contains("error: PATH_NOT_ALLOWED"),
        "{own}: {}",
        text(&r)
    );
    // Made by something else running as the user (the tools cannot make links).
    std::fs::hard_link(sb.path("state/audit.jsonl"), sb.path("notes.txt")).unwrap();
    for name in ["notes.txt", "NOTES.TXT"] {
        let r = call(&client, "read", json!({ "paths": [name] })).await;
        assert!(
            text(&r).contains("error: PATH_NOT_ALLOWED") && !text(&r).contains("\"read\""),
            "{name}: {}",
            text(&r)
        );
    }
    client.cancel().await.unwrap();
}

/// The Desktop connector of gantry.exe on the suite's X display (tests/run starts Wine's
/// windows there): Wine's notepad listed, the screen and the window captured (BitBlt), and
/// text typed into it (SendInput) read back through the clipboard.
#[tokio::test]
async fn a_wine_window_is_listed_captured_and_typed_into() {
    let Some(exe) = wine_exe() else { return };
    if std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()) {
        crate::support::cannot_check("no X display: Wine's desktop was not tested");
        return;
    }
    let sb = Sandbox::new();
    sb.config("[permissions]\nhost_display = true\n");
    // Opened on a file of its own, so its process is known by that name and ended after.
    let page = sb.path("wine-desktop-page.txt");
    std::fs::write(&page, "").unwrap();
    let _notepad = tokio::process::Command::new("wine")
        .arg("notepad")
        .arg(z(&page))
        .env("WINEDEBUG", "-all")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    struct EndNotepad(String);
    impl Drop for EndNotepad {
        fn drop(&mut self) {
            let _ = std::process::Command::new("pkill")
                .args(["-f", &self.0])
                .status();
        }
    }
    let _end = EndNotepad(page.file_name().unwrap().to_string_lossy().into_owned());
    let client = serve_with(&sb, &exe, &["--connector", "desktop"]).await;
    let started = std::time::Instant::now();
    let listing = loop {
        let r = call(&client, "observe", json!({ "what": "windows" })).await;
        if text(&r).contains("wine-desktop-page.txt - Notepad") {
            break text(&r);
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "notepad never listed: {}",
            text(&r)
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    };
    let line = listing
        .lines()
        .find(|l| l.contains("wine-desktop-page.txt - Notepad"))
        .unwrap();
    assert!(line.contains("app \"notepad\""), "{line}");
    let id = line.split(' ').next().unwrap().to_string();

    // The screen through BitBlt: one PNG frame of the display's size, notepad's white page
    // on it where the window is.
    let r = call(&client, "observe", json!({})).await;
    let f = facts(&r);
    assert_eq!(
        (f["width"].as_i64(), f["height"].as_i64()),
        (Some(1280), Some(800)),
        "{f}"
    );
    let frame = f["frame"].as_str().unwrap().to_string();
    let image = r.content.iter().find_map(|c| c.as_image()).unwrap();
    let png =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &image.data).unwrap();
    let shot = image::load_from_memory(&png).unwrap().to_rgba8();
    let page = *shot.get_pixel(300, 300);
    assert_eq!(
        page.0[..3],
        [255, 255, 255],
        "notepad's page is not on the screenshot"
    );
    assert_ne!(*shot.get_pixel(1270, 790), page, "the screenshot is blank");
    // One window, on its own.
    let r = call(&client, "observe", json!({ "window": id })).await;
    let f = facts(&r);
    assert!(f["width"].as_i64().unwrap() < 1280, "{f}");
    assert!(text(&r).contains(&format!("window {id}")), "{}", text(&r));

    // Wine has no UI Automation: the control steps say so, and name what works instead.
    let r = call(
        &client,
        "observe",
        json!({ "what": "controls", "window": id }),
    )
    .await;
    assert!(
        is_error(&r) && text(&r).contains("controls and refs are unavailable on this system"),
        "{}",
        text(&r)
    );

    // A click and typing through SendInput, read back through the clipboard: what was typed
    // is in notepad.
    let r = call(
        &client,
        "computer",
        json!({ "actions": [
            { "action": "focus", "window": id },
            { "action": "click", "frame": frame, "x": 300, "y": 300 },
            { "action": "type", "text": "typed under wine" },
            { "action": "keypress", "keys": "ctrl+a" },
            { "action": "keypress", "keys": "ctrl+c" },
            // Wine hands the keys to notepad through its X11 driver, after SendInput returns.
            { "action": "wait", "ms": 1000 },
            { "action": "read_clipboard" },
        ] }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(
        text(&r).contains("read_clipboard (16 characters): \"typed under wine\""),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
}

/// `service.status` and `service.control` through Wine's Service Control Manager: its print
/// spooler (a service every Wine prefix has) read, started and stopped, each answered with
/// the state after; a reload, which Windows services do not have, refused naming `action`;
/// names compared as Windows does (without case); an unknown allowed name NOT_FOUND; a name
/// the config does not allow refused before the manager hears of it.
#[tokio::test]
async fn services_are_read_and_driven_through_wines_service_control_manager() {
    let Some(exe) = wine_exe() else { return };
    let sb = Sandbox::new();
    sb.config("[services]\nallowed = [\"spooler\", \"NoSuchService\"]\n");
    let client = serve_with(&sb, &exe, &["--connector", "shell"]).await;
    let ok = |r: &rmcp::model::CallToolResult| {
        assert!(!is_error(r), "{}", text(r));
        r.structured_content.clone().unwrap_or_default()
    };
    let o = ok(&call(&client, "service.status", json!({ "name": "Spooler" })).await);
    assert_eq!(o["service"]["manager"], "scm", "{o}");
    // Answered as the config spells it, which is what a policy names.
    assert_eq!(o["service"]["name"], "spooler", "{o}");
    assert!(o["service"]["starts"].is_string(), "{o}");
    let o = ok(&call(
        &client,
        "service.control",
        json!({ "name": "Spooler", "action": "start" }),
    )
    .await);
    assert_eq!(o["result"], "done", "{o}");
    assert_eq!(o["service"]["state"], "running", "{o}");
    assert!(o["service"]["pid"].as_i64().is_some_and(|p| p > 0), "{o}");
    let o = ok(&call(
        &client,
        "service.control",
        json!({ "name": "spooler", "action": "stop" }),
    )
    .await);
    assert_eq!(o["result"], "done", "{o}");
    assert_eq!(o["service"]["state"], "stopped", "{o}");
    for (tool, args, code, names) in [
        (
            "service.control",
            json!({ "name": "Spooler", "action": "reload" }),
            "INVALID_INPUT",
            "action: Windows services have no reload",
        ),
        (
            "service.status",
            json!({ "name": "NoSuchService" }),
            "NOT_FOUND",
            "`NoSuchService`",
        ),
        (
            "service.status",
            json!({ "name": "RpcSs" }),
            "COMMAND_NOT_ALLOWED",
            "[services]",
        ),
    ] {
        let r = call(&client, tool, args.clone()).await;
        assert!(
            text(&r).starts_with(code) && text(&r).contains(names),
            "{tool} {args}: {}",
            text(&r)
        );
    }
    client.cancel().await.unwrap();

    // A policy names the service as the config spells it; a call in another case is still it.
    let policies = sb.path("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(
        policies.join("local.cedar"),
        "@id(\"local.no_spooler\")\n@reason(\"the spooler is left alone\")\nforbid (principal, action, resource is Service) when { resource == Service::\"spooler\" };\n",
    )
    .unwrap();
    let client = serve_with(
        &sb,
        &exe,
        &["--connector", "shell", "--policies", &z(&policies)],
    )
    .await;
    for name in ["Spooler", "SPOOLER", "spooler"] {
        let r = call(&client, "service.status", json!({ "name": name })).await;
        assert!(
            text(&r).contains("the spooler is left alone"),
            "{name}: {}",
            text(&r)
        );
    }
    client.cancel().await.unwrap();
}
