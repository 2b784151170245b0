//! The Desktop connector end to end: a real gantry serving `desktop` over stdio to a real MCP
//! client, driving a GTK3 fixture app (tests/desktop/app.py, reachable over AT-SPI) on the X
//! display the suite runs on. `tests/run` starts one (tests/desktop/session: Xvfb and openbox,
//! under dbus-run-session) and requires these tests to run; elsewhere without a display they
//! say they checked nothing. They share one screen, so they take turns.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{Sandbox, call, facts, is_error, text, workspace};

/// The master switch of the desktop session, off in a fresh config.
const HOST_DISPLAY: &str = "[permissions]\nhost_display = true\n";

/// A sandbox whose config turns the desktop session on.
fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    sb.config(HOST_DISPLAY);
    sb
}

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether there is a display to test on; where `tests/run` made one, there must be.
fn display() -> bool {
    let here = std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty());
    if !here {
        assert_ne!(
            std::env::var("GANTRY_TEST_DESKTOP").as_deref(),
            Ok("required"),
            "tests/run started an X display, yet DISPLAY is not set"
        );
        crate::support::cannot_check(
            "no X display: the desktop tests checked nothing (tests/run runs them under Xvfb)",
        );
    }
    here
}

/// The fixture app, and every line it printed so far.
struct App {
    title: String,
    child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    seen: Vec<String>,
}

impl App {
    async fn start(name: &str, extra: &[&str]) -> App {
        let title = format!("gantry fixture {name} {}", std::process::id());
        let mut child = tokio::process::Command::new("/usr/bin/python3")
            .arg(workspace("tests/desktop/app.py"))
            .arg(&title)
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut app = App {
            title,
            child,
            lines,
            seen: Vec::new(),
        };
        app.expect("ready").await;
        app
    }

    /// The next line starting with `prefix` (within 5 s).
    async fn expect(&mut self, prefix: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "the app never printed {prefix:?}; it printed {:?}",
                        self.seen
                    )
                })
                .unwrap()
                .unwrap_or_else(|| panic!("the app ended; it printed {:?}", self.seen));
            self.seen.push(line.clone());
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// Whether the app printed a line starting with `prefix` within `ms`.
    async fn printed_within(&mut self, prefix: &str, ms: u64) -> bool {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
        while let Ok(Ok(Some(line))) =
            tokio::time::timeout_at(deadline, self.lines.next_line()).await
        {
            self.seen.push(line.clone());
            if line.starts_with(prefix) {
                return true;
            }
        }
        false
    }

    /// Where control `name` is (screen pixels), as the app last said.
    fn geom(&self, name: &str) -> (i64, i64, i64, i64) {
        let line = self
            .seen
            .iter()
            .rev()
            .find(|l| l.starts_with(&format!("geom {name} ")))
            .unwrap();
        let v: Vec<i64> = line
            .split(' ')
            .skip(2)
            .map(|n| n.parse().unwrap())
            .collect();
        (v[0], v[1], v[2], v[3])
    }

    fn centre(&self, name: &str) -> (i64, i64) {
        let (x, y, w, h) = self.geom(name);
        (x + w / 2, y + h / 2)
    }
}

async fn desktop(sb: &Sandbox, extra: &[&str]) -> RunningService<RoleClient, ()> {
    let mut args = vec!["--connector", "desktop"];
    args.extend_from_slice(extra);
    sb.stdio(&args).await
}

async fn computer(client: &RunningService<RoleClient, ()>, actions: Value) -> CallToolResult {
    call(client, "computer", json!({ "actions": actions })).await
}

/// The id of the window titled `title`, from observe's window list.
async fn window_id(client: &RunningService<RoleClient, ()>, title: &str) -> String {
    let r = call(client, "observe", json!({ "what": "windows" })).await;
    let t = text(&r);
    let line = t
        .lines()
        .find(|l| l.contains(&format!("\"{title}\"")))
        .unwrap_or_else(|| panic!("{title} not listed: {t}"));
    line.split(' ').next().unwrap().to_string()
}

/// The ref of the first control whose line contains `what`, from a controls snapshot.
fn ref_of(snapshot: &str, what: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no control {what} in {snapshot}"));
    line.trim_start().split(' ').next().unwrap().to_string()
}

async fn controls(client: &RunningService<RoleClient, ()>, window: &str) -> String {
    let r = call(
        client,
        "observe",
        json!({ "what": "controls", "window": window }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    text(&r)
}

/// A whole-screen screenshot's frame id (the screen is 1280×800: not scaled).
async fn frame(client: &RunningService<RoleClient, ()>) -> String {
    let r = call(client, "observe", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    facts(&r)["frame"].as_str().unwrap().to_string()
}

fn xdotool(args: &[&str]) {
    let st = std::process::Command::new("xdotool")
        .args(args)
        .status()
        .unwrap();
    assert!(st.success(), "xdotool {args:?}");
}

#[tokio::test]
async fn observe_lists_the_window_its_controls_and_takes_screenshots() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = App::start("observe", &[]).await;
    let sb = sandbox();
    let client = desktop(&sb, &[]).await;
    let id = window_id(&client, &app.title).await;
    let listing = text(&call(&client, "observe", json!({ "what": "windows" })).await);
    let line = listing.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        line.contains("app \"app.py\"")
            && line.contains(&format!("pid {}", app.child.id().unwrap())),
        "{line}"
    );

    let snap = controls(&client, &id).await;
    for want in [
        "button \"Press me\"",
        "text \"Message\" = \"\"",
        "check box \"Agree\"",
        "slider \"Level\" = \"0\"",
        "label \"status: idle\"",
    ] {
        assert!(snap.contains(want), "{want} missing from {snap}");
    }
    assert!(ref_of(&snap, "Press me").starts_with('r'), "{snap}");
    // A password field is listed, its text never read.
    assert!(snap.contains("password text \"Secret\""), "{snap}");
    assert!(!snap.contains("hunter2"), "{snap}");

    // The whole screen: one frame, PNG, not scaled.
    let r = call(&client, "observe", json!({})).await;
    let f = facts(&r);
    assert_eq!(
        (f["width"].as_i64(), f["height"].as_i64()),
        (Some(1280), Some(800)),
        "{f}"
    );
    assert!(
        text(&r).starts_with(&format!(
            "frame {}: the screen",
            f["frame"].as_str().unwrap()
        )),
        "{}",
        text(&r)
    );
    let image = r.content.iter().find_map(|c| c.as_image()).unwrap();
    assert_eq!(image.mime_type, "image/png");
    let png =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &image.data).unwrap();
    let shot = image::load_from_memory(&png).unwrap().to_rgba8();
    assert_eq!(shot.dimensions(), (1280, 800));
    // The pixels are the screen's: the fixture's window is not the background's colour.
    let (x, y) = app.centre("button");
    let bg = *shot.get_pixel(2, 790);
    assert_ne!(*shot.get_pixel(x as u32, y as u32), bg);

    // One window: its own size, and a frame of its own.
    let r = call(&client, "observe", json!({ "window": id })).await;
    let f = facts(&r);
    assert!(
        f["width"].as_i64().unwrap() < 1280 && f["height"].as_i64().unwrap() < 800,
        "{f}"
    );
    assert!(text(&r).contains(&format!("window {id}")), "{}", text(&r));

    // Bad targets are named.
    let r = call(
        &client,
        "observe",
        json!({ "what": "controls", "window": "0x7" }),
    )
    .await;
    assert!(
        is_error(&r) && text(&r).contains("window `0x7` is not open"),
        "{}",
        text(&r)
    );
    let r = call(&client, "observe", json!({ "window": "main" })).await;
    assert!(
        is_error(&r) && text(&r).contains("`main` is not a window id"),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn click_ref_presses_the_button_and_verify_sees_the_label_change() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("click", &[]).await;
    let sb = sandbox();
    let client = desktop(&sb, &[]).await;
    let id = window_id(&client, &app.title).await;
    let snap = controls(&client, &id).await;
    let button = ref_of(&snap, "\"Press me\"");
    let r = call(
        &client,
        "computer",
        json!({
            "actions": [{ "action": "click_ref", "ref": button }],
            "verify": { "until": "control_appears", "text": "status: clicked 1", "window": id }
        }),
    )
    .await;
    let t = text(&r);
    assert!(
        t.contains("step 1 ok (action): click_ref") && t.contains("verify control_appears ok"),
        "{t}"
    );
    assert_eq!(facts(&r)["verified"], true, "{t}");
    assert_eq!(facts(&r)["completed"], 1);
    app.expect("clicked 1").await;

    // The same button by coordinates on a screenshot.
    let f = frame(&client).await;
    let (x, y) = app.centre("button");
    let r = computer(
        &client,
        json!([{ "action": "click", "frame": f, "x": x, "y": y }]),
    )
    .await;
    assert!(
        text(&r).contains("step 1 ok (pointer): click at"),
        "{}",
        text(&r)
    );
    app.expect("clicked 2").await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn typed_unicode_reaches_the_entry_and_reads_back() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("type", &[]).await;
    let sb = sandbox();
    let client = desktop(&sb, &[]).await;
    let id = window_id(&client, &app.title).await;
    let entry = ref_of(&controls(&client, &id).await, "text \"Message\"");
    let typed = "Grüße, €5 → 😀 ok";
    let r = computer(
        &client,
        json!([{ "action": "focus", "ref": entry }, { "action": "type", "text": typed }]),
    )
    .await;
    assert!(
        !is_error(&r) && text(&r).contains("step 2 ok (keyboard): typed 16 character(s)"),
        "{}",
        text(&r)
    );
    app.expect(&format!("entry {typed}")).await;
    let snap = controls(&client, &id).await;
    assert!(
        snap.contains(&format!("text \"Message\" = \"{typed}\"")),
        "{snap}"
    );

    // set_value replaces the text through the control itself.
    let entry = ref_of(&snap, "text \"Message\"");
    let r = computer(
        &client,
        json!([{ "action": "set_value", "ref": entry, "text": "replaced ✓" }]),
    )
    .await;
    assert!(
        text(&r).contains("step 1 ok (action): set_value"),
        "{}",
        text(&r)
    );
    app.expect("entry replaced ✓").await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn drag_scroll_and_a_key_chord_reach_the_app() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("pointer", &[]).await;
    let sb = sandbox();
    let client = desktop(&sb, &[]).await;
    let f = frame(&client).await;
    let (sx, sy, sw, sh) = app.geom("slider");
    let (rx, ry) = app.centre("rows");
    let r = computer(
        &client,
        json!([
            { "action": "drag", "frame": f, "x": sx + 4, "y": sy + sh / 2, "to_x": sx + sw / 2, "to_y": sy + sh / 2 },
            { "action": "scroll", "frame": f, "x": rx, "y": ry, "dy": 5 },
            { "action": "keypress", "keys": "ctrl+shift+k" }
        ]),
    )
    .await;
    let t = text(&r);
    assert_eq!(facts(&r)["completed"], 3, "{t}");
    // The slider follows the drag through its steps: wait for where it ends.
    loop {
        let level = app.expect("level ").await;
        if level.rsplit(' ').next().unwrap().parse::<i64>().unwrap() >= 20 {
            break;
        }
    }
    assert!(
        app.printed_within("scrolled ", 3000).await,
        "{:?}",
        app.seen
    );
    assert!(app.printed_within("chord", 3000).await, "{:?}", app.seen);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_clipboard_round_trips_with_other_programs() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let sb = sandbox();
    let client = desktop(&sb, &[]).await;
    let r = computer(
        &client,
        json!([{ "action": "write_clipboard", "text": "from gantry ✓" }]),
    )
    .await;
    assert!(text(&r).contains("step 1 ok (clipboard)"), "{}", text(&r));
    let out = tokio::process::Command::new("xclip")
        .args(["-selection", "clipboard", "-o"])
        .output()
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from gantry ✓");

    let mut xclip = tokio::process::Command::new("xclip")
        .args(["-selection", "clipboard", "-i", "-quiet"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = xclip.stdin.take().unwrap();
        stdin
            .write_all("from elsewhere ✓".as_bytes())
            .await
            .unwrap();
    }
    // xclip owns the clipboard once it has read its input.
    let mut seen = String::new();
    for _ in 0..50 {
        let r = computer(&client, json!([{ "action": "read_clipboard" }])).await;
        seen = text(&r);
        if seen.contains("from elsewhere ✓") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        seen.contains("read_clipboard (16 characters): \"from elsewhere ✓\""),
        "{seen}"
    );
    xclip.kill().await.unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_stale_ref_and_a_moved_window_fail_their_step_and_stop_the_batch() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("stale", &[]).await;
    let sb = sandbox();
    let client = desktop(&sb, &[]).await;
    let id = window_id(&client, &app.title).await;
    let old = ref_of(&controls(&client, &id).await, "\"Press me\"");
    let _newer = controls(&client, &id).await;
    let r = computer(
        &client,
        json!([{ "action": "click_ref", "ref": old }, { "action": "keypress", "keys": "ctrl+shift+k" }]),
    )
    .await;
    let t = text(&r);
    assert!(
        t.contains(&format!(
            "step 1 FAILED (click_ref): NOT_FOUND: actions[0].ref: ref `{old}` is stale"
        )),
        "{t}"
    );
    assert!(
        t.contains("steps 2-2 not run") || t.contains("steps 2-2"),
        "{t}"
    );
    assert!(is_error(&r));
    assert!(!app.printed_within("clicked", 300).await);

    // A frame taken before the window moved: a click planned on it fails, nothing is clicked.
    let f = frame(&client).await;
    let (x, y) = app.centre("button");
    xdotool(&["windowmove", &id, "420", "260"]);
    app.expect("ready").await;
    let r = computer(
        &client,
        json!([{ "action": "wait", "ms": 1 }, { "action": "click", "frame": f, "x": x, "y": y }]),
    )
    .await;
    let t = text(&r);
    assert!(t.contains("step 1 ok (wait)"), "{t}");
    assert!(
        t.contains("step 2 FAILED (click): NOT_FOUND: window")
            && t.contains("moved or was resized"),
        "{t}"
    );
    assert!(!is_error(&r), "one step succeeded: {t}");
    assert!(!app.printed_within("clicked", 300).await);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn read_only_keeps_observe_and_refuses_typing() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("readonly", &[]).await;
    let sb = sandbox();
    let client = desktop(&sb, &["--read-only"]).await;
    let id = window_id(&client, &app.title).await;
    assert!(controls(&client, &id).await.contains("Press me"));
    frame(&client).await;
    let r = computer(
        &client,
        json!([{ "action": "read_clipboard" }, { "action": "type", "text": "nope" }]),
    )
    .await;
    let t = text(&r);
    assert!(
        t.contains("step 2 FAILED (type): PERMISSION_DENIED") && t.contains("read-only"),
        "{t}"
    );
    assert!(!app.printed_within("entry", 300).await);
    client.cancel().await.unwrap();
}

/// `host_display` is the master switch of the desktop session, off in a fresh config: the
/// Desktop connector lists nothing and refuses what a client sends anyway, commands (Core's
/// and shell.exec's) run without the session's variables and cannot put them back, and
/// shell.exec refuses screen-capture programs and capture arguments; switched on, each of
/// those reaches the display.
#[tokio::test]
async fn the_desktop_session_needs_the_host_display_master_switch() {
    if !display() {
        return;
    }
    let display = std::env::var("DISPLAY").unwrap();
    for on in [false, true] {
        let sb = Sandbox::new();
        // An ImageMagick program by name (echo under it: the test needs no ImageMagick),
        // outside the root.
        let convert = sb.path("bin/convert");
        std::fs::create_dir_all(sb.path("bin")).unwrap();
        std::os::unix::fs::symlink("/bin/echo", &convert).unwrap();
        let convert = convert.display().to_string();
        let allow = format!(
            "[shell]\nallowed_commands = [\"xdpyinfo\", \"echo\", \"printenv\", {convert:?}]\n"
        );
        let switch = if on { HOST_DISPLAY } else { "" };
        sb.config(&format!("{switch}{allow}"));
        let client = desktop(&sb, &[]).await;
        let tools = client.list_all_tools().await.unwrap();
        assert_eq!(tools.is_empty(), !on, "{tools:?}");
        let r = call(&client, "observe", json!({ "what": "windows" })).await;
        if on {
            assert!(!is_error(&r), "{}", text(&r));
        } else {
            assert!(
                text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("`host_display`"),
                "{}",
                text(&r)
            );
        }
        client.cancel().await.unwrap();

        let core = sb.stdio(&[]).await;
        let r = call(
            &core,
            "exec_command",
            json!({ "cmd": "echo \"display=${DISPLAY:-none}\"" }),
        )
        .await;
        let seen = if on { display.as_str() } else { "none" };
        assert!(
            text(&r).contains(&format!("display={seen}")),
            "on={on}: {}",
            text(&r)
        );
        let r = call(
            &core,
            "exec_command",
            json!({ "cmd": "true", "env": { "DISPLAY": display } }),
        )
        .await;
        assert_eq!(is_error(&r), !on, "on={on}: {}", text(&r));
        core.cancel().await.unwrap();

        let shell = sb.stdio(&["--connector", "shell"]).await;
        let printenv = call(
            &shell,
            "shell.exec",
            json!({ "command": "printenv", "args": ["DISPLAY"] }),
        )
        .await;
        let out = printenv.structured_content.clone().unwrap_or_default();
        assert_eq!(
            out["stdout"].as_str().map(str::trim),
            Some(if on { display.as_str() } else { "" }),
            "on={on}: {}",
            text(&printenv)
        );
        for (command, args) in [
            ("xdpyinfo", vec![]),
            ("echo", vec!["-f", "X11GRAB"]),
            // ffmpeg's filter graphs undo backslashes; ImageMagick's X coder reads the screen.
            ("echo", vec!["-i", "movie=:0:f=x11\\grab"]),
            // ImageMagick's X coder, for ImageMagick's programs.
            (convert.as_str(), vec!["x:root", "shot.png"]),
        ] {
            let r = call(
                &shell,
                "shell.exec",
                json!({ "command": command, "args": args }),
            )
            .await;
            if on {
                assert!(!is_error(&r), "{}", text(&r));
                let out = r.structured_content.clone().unwrap_or_default();
                assert_eq!(out["exit_code"], 0, "{command}: {}", text(&r));
            } else {
                assert!(
                    text(&r).starts_with("COMMAND_NOT_ALLOWED")
                        && text(&r).contains("`host_display`")
                        && text(&r).contains("shell.display_programs"),
                    "{command}: {}",
                    text(&r)
                );
            }
        }
        // Elsewhere `x:` means nothing (nor does a drive letter on Windows).
        let r = call(
            &shell,
            "shell.exec",
            json!({ "command": "echo", "args": ["x: 1", "x:root"] }),
        )
        .await;
        assert!(!is_error(&r), "on={on}: {}", text(&r));
        shell.cancel().await.unwrap();
    }
}

/// The Shell connector's screen and input tools (seed 002's shapes) on the same desktop:
/// a capture kept as a frame with the windows listed, a click, typing and a chord reaching the
/// app, each a step of its own that yields to the person at the computer; with `control` off
/// the input tools are neither listed nor run.
#[tokio::test]
async fn the_shell_connectors_screen_and_input_tools_reach_the_app() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("shellinput", &[]).await;
    let sb = sandbox();
    let shell = sb.stdio(&["--connector", "shell"]).await;
    let names: Vec<String> = crate::support::tool_names(&shell).await;
    for tool in [
        "screen.capture",
        "input.click",
        "input.move",
        "input.type",
        "input.key",
    ] {
        assert!(names.contains(&tool.to_string()), "{tool}: {names:?}");
    }
    let r = call(&shell, "screen.capture", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let f = facts(&r)["frame"].as_str().unwrap().to_string();
    assert!(r.content.iter().any(|c| c.as_image().is_some()));
    assert!(text(&r).contains(&app.title), "{}", text(&r));

    let (x, y) = app.centre("button");
    let r = call(&shell, "input.click", json!({ "frame": f, "x": x, "y": y })).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).starts_with("ok (pointer)"), "{}", text(&r));
    app.expect("clicked 1").await;

    let (ex, ey) = app.centre("entry");
    let r = call(
        &shell,
        "input.click",
        json!({ "frame": f, "x": ex, "y": ey }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = call(&shell, "input.type", json!({ "text": "héllo ✓" })).await;
    assert!(text(&r).starts_with("ok (keyboard)"), "{}", text(&r));
    app.expect("entry héllo ✓").await;
    let r = call(&shell, "input.key", json!({ "keys": "ctrl+shift+k" })).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(app.printed_within("chord", 3000).await, "{:?}", app.seen);

    // The person at the computer moved the mouse after gantry's last step: the next one
    // waits for them (BUSY), and the one after runs.
    let r = call(&shell, "input.move", json!({ "frame": f, "x": 5, "y": 5 })).await;
    assert!(!is_error(&r), "{}", text(&r));
    xdotool(&["mousemove", "40", "40"]);
    let click = json!({ "frame": f, "x": x, "y": y });
    let r = call(&shell, "input.click", click.clone()).await;
    assert!(
        text(&r).starts_with("BUSY") && text(&r).contains("the user moved the mouse"),
        "{}",
        text(&r)
    );
    assert!(!app.printed_within("clicked 2", 300).await);
    // A retry at once stands back too; once the pointer has been still for 2 s, it runs.
    let r = call(&shell, "input.click", click.clone()).await;
    assert!(text(&r).starts_with("BUSY"), "{}", text(&r));
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let r = call(&shell, "input.click", click.clone()).await;
    assert!(!is_error(&r), "{}", text(&r));
    app.expect("clicked 2").await;

    // A field the tool does not have is named.
    let r = call(
        &shell,
        "input.click",
        json!({ "frame": "f999", "x": 1, "y": 1 }),
    )
    .await;
    assert!(is_error(&r) && text(&r).contains("frame"), "{}", text(&r));
    shell.cancel().await.unwrap();

    sb.config(&format!("{HOST_DISPLAY}control = false\n"));
    let shell = sb.stdio(&["--connector", "shell"]).await;
    let names: Vec<String> = crate::support::tool_names(&shell).await;
    assert!(names.contains(&"screen.capture".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("input.")), "{names:?}");
    let r = call(&shell, "input.click", click).await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("`control`"),
        "{}",
        text(&r)
    );
    assert!(!app.printed_within("clicked 3", 300).await);
    shell.cancel().await.unwrap();
}

/// browser.open hands an http(s) address, normalized, as one argument to the configured
/// command (a fixture that records its arguments), never through a shell; other schemes,
/// credentials and hosts the config does not list are refused with nothing started; without
/// `host_display` it is neither listed nor run.
#[tokio::test]
async fn browser_open_starts_the_configured_browser_with_http_addresses_only() {
    if !display() {
        return;
    }
    let sb = Sandbox::new();
    let log = sb.path("opened.log");
    let browser = sb.path("bin/browser");
    std::fs::create_dir_all(browser.parent().unwrap()).unwrap();
    std::fs::write(
        &browser,
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\" >> '{}'\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        &browser,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let browser_config = |hosts: &str| {
        format!(
            "{HOST_DISPLAY}[browser]\ncommand = [{:?}, \"--new-tab\", \"{{url}}\"]\nhosts = [{hosts}]\n",
            browser.display().to_string()
        )
    };
    let opened = || std::fs::read_to_string(&log).unwrap_or_default();
    let wait_for = |want: String| async move {
        for _ in 0..100 {
            if opened().contains(&want) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the browser was not given {want:?}: {:?}", opened());
    };

    sb.config(&browser_config(""));
    let shell = sb.stdio(&["--connector", "shell"]).await;
    let r = call(
        &shell,
        "browser.open",
        json!({ "url": "https://Example.COM/a b?q=$(touch x)#top" }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let out = r.structured_content.clone().unwrap_or_default();
    let url = "https://example.com/a%20b?q=$(touch%20x)#top";
    assert_eq!(out["url"], url, "{out}");
    wait_for(format!("--new-tab\n{url}\n")).await;
    for (bad, why) in [
        ("file:///etc/passwd", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("data:text/html,<b>x</b>", "only http and https"),
        ("https://user:secret@example.com/", "user name or password"),
        ("example.com", "not an absolute address"),
    ] {
        let r = call(&shell, "browser.open", json!({ "url": bad })).await;
        assert!(
            is_error(&r) && text(&r).contains(why) && text(&r).contains("url: "),
            "{bad}: {}",
            text(&r)
        );
    }
    shell.cancel().await.unwrap();

    sb.config(&browser_config("\"*.docs.rs\""));
    let shell = sb.stdio(&["--connector", "shell"]).await;
    let r = call(
        &shell,
        "browser.open",
        json!({ "url": "https://evil.test/" }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED: url: ") && text(&r).contains("[browser] hosts"),
        "{}",
        text(&r)
    );
    // With hosts named, another scheme is still refused for its scheme.
    let r = call(
        &shell,
        "browser.open",
        json!({ "url": "file:///etc/passwd" }),
    )
    .await;
    assert!(
        text(&r).contains("only http and https") && !text(&r).contains("[browser] hosts"),
        "{}",
        text(&r)
    );
    let r = call(
        &shell,
        "browser.open",
        json!({ "url": "http://serde.docs.rs/" }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    wait_for("http://serde.docs.rs/\n".into()).await;
    shell.cancel().await.unwrap();
    let lines = opened().lines().count();
    assert_eq!(
        lines,
        4,
        "only the two allowed calls started it: {:?}",
        opened()
    );

    sb.config(&browser_config("").replace(HOST_DISPLAY, ""));
    let shell = sb.stdio(&["--connector", "shell"]).await;
    let names: Vec<String> = crate::support::tool_names(&shell).await;
    assert!(!names.contains(&"browser.open".to_string()), "{names:?}");
    let r = call(
        &shell,
        "browser.open",
        json!({ "url": "https://example.com/" }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("`host_display`"),
        "{}",
        text(&r)
    );
    shell.cancel().await.unwrap();
    assert_eq!(opened().lines().count(), lines);
}

/// app.launch starts only what `[apps]` declares, by its own command line (the call's
/// `args` only where it has `{args}`), and answers a handle; app.close ends it and whatever it
/// started (a child it left in the background too), by handle or by name; an undeclared
/// name, arguments it does not take and an unknown handle are refused with nothing started;
/// gantry's end ends what it launched.
#[tokio::test]
async fn apps_are_launched_as_declared_and_closed_with_their_tree() {
    if !display() {
        return;
    }
    // Its fixture window opens where the other tests' does: one at a time.
    let _turn = ONE_AT_A_TIME.lock().await;
    let sb = Sandbox::new();
    let marker = format!("{}", 40_000 + std::process::id() % 10_000);
    let title = format!("gantry launched {marker}");
    let app_py = workspace("tests/desktop/app.py");
    sb.config(&format!(
        "{HOST_DISPLAY}[apps.fixture]\ncommand = [\"/usr/bin/python3\", {:?}, \"{{args}}\"]\n[apps.sleeper]\ncommand = [\"/bin/sh\", \"-c\", \"sleep {marker}1 & exec sleep {marker}2\"]\n",
        app_py.display().to_string()
    ));
    let shell = sb.stdio(&["--connector", "shell"]).await;
    let launched = |r: &CallToolResult| {
        assert!(!is_error(r), "{}", text(r));
        let out = r.structured_content.clone().unwrap_or_default();
        out["handle"].as_str().unwrap().to_string()
    };
    let r = call(
        &shell,
        "app.launch",
        json!({ "name": "fixture", "args": [title] }),
    )
    .await;
    let fixture = launched(&r);
    assert!(
        fixture.starts_with("app-") && fixture.len() == 20,
        "{fixture}"
    );
    // Its window appears on the display.
    let mut seen = false;
    for _ in 0..100 {
        let r = call(&shell, "screen.capture", json!({})).await;
        if text(&r).contains(&title) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen, "the launched app's window never showed");
    let sleeper = launched(&call(&shell, "app.launch", json!({ "name": "sleeper" })).await);
    let second = launched(&call(&shell, "app.launch", json!({ "name": "sleeper" })).await);
    assert_ne!(sleeper, second);
    // The launch answers once the app is started; what it starts in the background comes a
    // moment later.
    let mut started = false;
    for _ in 0..150 {
        if crate::support::alive(&format!("sleep {marker}1")) {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started, "the sleeper's background child never ran");

    for (args, why) in [
        (json!({ "name": "firefox" }), "COMMAND_NOT_ALLOWED"),
        (
            json!({ "name": "sleeper", "args": ["--evil"] }),
            "takes no arguments",
        ),
    ] {
        let r = call(&shell, "app.launch", args.clone()).await;
        assert!(
            is_error(&r) && text(&r).contains(why),
            "{args}: {}",
            text(&r)
        );
    }
    let r = call(
        &shell,
        "app.close",
        json!({ "handle": "app-0000000000000000" }),
    )
    .await;
    assert!(text(&r).starts_with("NOT_FOUND"), "{}", text(&r));

    // By handle: the app and nothing else.
    let r = call(&shell, "app.close", json!({ "handle": fixture })).await;
    assert!(!is_error(&r), "{}", text(&r));
    crate::support::gone(&title).await;
    assert!(crate::support::alive(&format!("sleep {marker}2")));
    // By name: every one of it, the background child included.
    let r = call(&shell, "app.close", json!({ "name": "sleeper" })).await;
    let out = r.structured_content.clone().unwrap_or_default();
    assert_eq!(out["closed"].as_array().map(Vec::len), Some(2), "{out}");
    crate::support::gone(&format!("sleep {marker}1")).await;
    crate::support::gone(&format!("sleep {marker}2")).await;

    // Whatever is still running when gantry ends goes with it.
    launched(&call(&shell, "app.launch", json!({ "name": "sleeper" })).await);
    assert!(crate::support::alive(&format!("sleep {marker}2")));
    shell.cancel().await.unwrap();
    crate::support::gone(&format!("sleep {marker}1")).await;
    crate::support::gone(&format!("sleep {marker}2")).await;

    // Without the master switch: not listed, and refused.
    sb.config(&format!(
        "[apps.sleeper]\ncommand = [\"/bin/sh\", \"-c\", \"exec sleep {marker}3\"]\n"
    ));
    let shell = sb.stdio(&["--connector", "shell"]).await;
    let names: Vec<String> = crate::support::tool_names(&shell).await;
    assert!(!names.iter().any(|n| n.starts_with("app.")), "{names:?}");
    let r = call(&shell, "app.launch", json!({ "name": "sleeper" })).await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("`host_display`"),
        "{}",
        text(&r)
    );
    assert!(!crate::support::alive(&format!("sleep {marker}3")));
    shell.cancel().await.unwrap();

    // Instances gantry did not launch: closed only with `any`, and only under
    // `close_any_app`; a process of the same program with other arguments is left alone.
    let idler = |arg: String| {
        std::process::Command::new("/bin/sleep")
            .arg(arg)
            .spawn()
            .unwrap()
    };
    let mut outside = idler(format!("{marker}7"));
    // The same program and arguments as another user: never this one's to close.
    let mut other_user = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/bin/sleep",
        ])
        .arg(format!("{marker}7"))
        .spawn()
        .unwrap();
    let mut unrelated = idler(format!("{marker}8"));
    let declared = format!(
        "{HOST_DISPLAY}[apps.idler]\ncommand = [\"/bin/sleep\", \"{marker}7\"]\n[apps.anyshell]\ncommand = [\"/bin/sh\", \"{{args}}\"]\n"
    );
    for close_any in [false, true] {
        sb.config(&if close_any {
            declared.replace(
                "host_display = true\n",
                "host_display = true\nclose_any_app = true\n",
            )
        } else {
            declared.clone()
        });
        let shell = sb.stdio(&["--connector", "shell"]).await;
        let r = call(&shell, "app.close", json!({ "name": "idler" })).await;
        let out = r.structured_content.clone().unwrap_or_default();
        assert_eq!(out["closed"], json!([]), "without `any`: {}", text(&r));
        let r = call(&shell, "app.close", json!({ "name": "idler", "any": true })).await;
        if close_any {
            let out = r.structured_content.clone().unwrap_or_default();
            assert_eq!(
                out["closed"],
                json!([format!("pid:{}", outside.id())]),
                "{}",
                text(&r)
            );
            // A shell with nothing of its own would be every shell script: refused.
            let r = call(
                &shell,
                "app.close",
                json!({ "name": "anyshell", "any": true }),
            )
            .await;
            assert!(
                text(&r).starts_with("COMMAND_NOT_ALLOWED") && text(&r).contains("any:"),
                "{}",
                text(&r)
            );
            let r = call(
                &shell,
                "app.close",
                json!({ "handle": "app-0000000000000000", "any": true }),
            )
            .await;
            assert!(text(&r).starts_with("INVALID_INPUT"), "{}", text(&r));
        } else {
            assert!(
                text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("close_any_app"),
                "{}",
                text(&r)
            );
            assert!(crate::support::alive(&format!("sleep {marker}7")));
        }
        shell.cancel().await.unwrap();
    }
    assert!(
        outside.wait().unwrap().code().is_none(),
        "ended by a signal"
    );
    assert!(crate::support::alive(&format!("sleep {marker}8")));
    assert!(
        other_user.try_wait().unwrap().is_none(),
        "another user's instance was closed"
    );
    let _ = other_user.kill();
    let _ = other_user.wait();
    let _ = unrelated.kill();
    let _ = unrelated.wait();

    // The README's example policy, as written there: one app may be launched, whatever
    // [apps] declares.
    let example = crate::support::readme_cedar_example("local.one_app");
    let policies = sb.path("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(policies.join("local.cedar"), example).unwrap();
    sb.config(&format!(
        "{HOST_DISPLAY}[apps.viewer]\ncommand = [\"/bin/sh\", \"-c\", \"exec sleep {marker}4\"]\n[apps.other]\ncommand = [\"/bin/sh\", \"-c\", \"exec sleep {marker}5\"]\n"
    ));
    let shell = sb
        .stdio(&[
            "--connector",
            "shell",
            "--policies",
            &policies.display().to_string(),
        ])
        .await;
    let r = call(&shell, "app.launch", json!({ "name": "other" })).await;
    assert!(
        text(&r).contains("only the image viewer may be launched"),
        "{}",
        text(&r)
    );
    launched(&call(&shell, "app.launch", json!({ "name": "viewer" })).await);
    assert!(crate::support::alive(&format!("sleep {marker}4")));
    assert!(!crate::support::alive(&format!("sleep {marker}5")));
    shell.cancel().await.unwrap();
    crate::support::gone(&format!("sleep {marker}4")).await;
}

#[tokio::test]
async fn control_off_refuses_pointer_steps_one_by_one() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("nocontrol", &[]).await;
    let sb = Sandbox::new();
    sb.config(&format!("{HOST_DISPLAY}control = false\n"));
    let client = desktop(&sb, &[]).await;
    let f = frame(&client).await;
    let (x, y) = app.centre("button");
    let r = computer(
        &client,
        json!([
            { "action": "write_clipboard", "text": "allowed" },
            { "action": "click", "frame": f, "x": x, "y": y },
            { "action": "read_clipboard" }
        ]),
    )
    .await;
    let t = text(&r);
    assert!(t.contains("step 1 ok (clipboard)"), "{t}");
    assert!(
        t.contains("step 2 FAILED (click): PERMISSION_DENIED")
            && t.contains("`control` permission is off"),
        "{t}"
    );
    assert!(t.contains("steps 3-3 not run"), "{t}");
    assert_eq!(facts(&r)["completed"], 1);
    assert!(!app.printed_within("clicked", 300).await);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_user_moving_the_mouse_stops_the_batch_unless_turned_off() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("yield", &[]).await;
    let (x, y) = app.centre("button");
    for (config, stops) in [("", true), ("[desktop]\nyield_to_user = false\n", false)] {
        let sb = Sandbox::new();
        sb.config(&format!("{HOST_DISPLAY}{config}"));
        let client = desktop(&sb, &[]).await;
        let f = frame(&client).await;
        let batch = computer(
            &client,
            json!([
                { "action": "move", "frame": f, "x": 5, "y": 5 },
                { "action": "wait", "ms": 600 },
                { "action": "click", "frame": f, "x": x, "y": y }
            ]),
        );
        let user = async {
            tokio::time::sleep(Duration::from_millis(250)).await;
            xdotool(&["mousemove", "40", "40"]);
        };
        let (r, ()) = tokio::join!(batch, user);
        let t = text(&r);
        if stops {
            assert!(
                t.contains("step 3 not run: the user moved the mouse"),
                "{t}"
            );
            assert!(!app.printed_within("clicked", 300).await);
        } else {
            assert!(t.contains("step 3 ok (pointer)"), "{t}");
            app.expect("clicked").await;
        }
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_policy_hides_an_app_from_lists_and_screenshots_and_refuses_its_input() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut app = App::start("policy", &[]).await;
    let sb = sandbox();
    let policies = sb.path("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(
        policies.join("no_fixture.cedar"),
        "@id(\"local.no_fixture\")\n@reason(\"the fixture app is off limits\")\nforbid (principal, action, resource is Window) when { resource.app == \"app.py\" };\n",
    )
    .unwrap();
    let client = desktop(&sb, &["--policies", policies.to_str().unwrap()]).await;
    let listing = text(&call(&client, "observe", json!({ "what": "windows" })).await);
    assert!(!listing.contains(&app.title), "{listing}");
    let r = call(&client, "observe", json!({})).await;
    assert!(
        text(&r).contains("1 window(s) a policy hides are blacked out"),
        "{}",
        text(&r)
    );
    let image = r.content.iter().find_map(|c| c.as_image()).unwrap();
    let png =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &image.data).unwrap();
    let shot = image::load_from_memory(&png).unwrap().to_rgba8();
    let (x, y) = app.centre("button");
    assert_eq!(shot.get_pixel(x as u32, y as u32).0, [0, 0, 0, 255]);
    let f = facts(&r)["frame"].as_str().unwrap().to_string();
    let r = computer(
        &client,
        json!([{ "action": "click", "frame": f, "x": x, "y": y }]),
    )
    .await;
    assert!(
        text(&r).contains("PERMISSION_DENIED") && text(&r).contains("off limits"),
        "{}",
        text(&r)
    );
    assert!(!app.printed_within("clicked", 300).await);
    // Keys go to the window with the focus: the fixture has it, so typing is refused too.
    let r = computer(
        &client,
        json!([{ "action": "type", "text": "typed anyway" }]),
    )
    .await;
    assert!(
        text(&r).contains("step 1 FAILED (type): PERMISSION_DENIED")
            && text(&r).contains("off limits"),
        "{}",
        text(&r)
    );
    assert!(!app.printed_within("entry", 300).await);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_a_display_the_desktop_connector_is_not_served() {
    let sb = Sandbox::new();
    sb.config(HOST_DISPLAY);
    let mut cmd = sb.serve(
        std::path::Path::new(crate::support::gantry()),
        &["--port", "0"],
    );
    cmd.env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY");
    let server = crate::support::http_server(cmd).await;
    assert!(server.urls.contains_key("core"));
    assert!(!server.urls.contains_key("desktop"), "{:?}", server.urls);
    if display() {
        let _turn = ONE_AT_A_TIME.lock().await;
        let server = sb.http(&[]).await;
        assert!(server.urls.contains_key("desktop"), "{:?}", server.urls);
    }
}

/// A popup menu is judged as the application that opened it, whatever its own class says:
/// Tk's menus are windows of their own, classed `Menu`. With a policy hiding the Tk app, its
/// posted menu is blacked out of the Shell connector's capture and a click on its item is
/// refused and reaches nothing; without the policy the same pixels show and the same click
/// chooses the item.
#[tokio::test]
async fn a_popup_menu_is_judged_as_the_application_that_opened_it() {
    if !display() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let sb = sandbox();
    let log = sb.path("chosen.log");
    let mut tk = std::process::Command::new("wish8.6")
        .arg(workspace("tests/desktop/tk_menu.tcl"))
        .args(["100", "100"])
        .arg(&log)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("wish8.6 (Debian's tk8.6) runs the Tk fixture");
    let policies = sb.path("policies");
    std::fs::create_dir_all(&policies).unwrap();
    let shot = |r: &CallToolResult| {
        let image = r.content.iter().find_map(|c| c.as_image()).unwrap();
        let png = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &image.data)
            .unwrap();
        image::load_from_memory(&png).unwrap().to_rgba8()
    };
    // The item's first line, over the bare desktop: the Tk window lies far from it.
    let (x, y) = (115u32, 108u32);
    let menu_grey = [0xd9, 0xd9, 0xd9, 255];

    // Without a policy: the menu shows and its item can be chosen.
    let shell = sb
        .stdio(&[
            "--connector",
            "shell",
            "--policies",
            policies.to_str().unwrap(),
        ])
        .await;
    let mut shown = false;
    for _ in 0..100 {
        let r = call(&shell, "screen.capture", json!({})).await;
        if shot(&r).get_pixel(x, y).0 == menu_grey {
            shown = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shown, "the Tk menu never showed");
    shell.cancel().await.unwrap();

    std::fs::write(
        policies.join("no_tk.cedar"),
        "@id(\"local.no_tk\")\n@reason(\"the Tk app is off limits\")\nforbid (principal, action, resource is Window) when { resource.app == \"tk_menu.tcl\" };\n",
    )
    .unwrap();
    let shell = sb
        .stdio(&[
            "--connector",
            "shell",
            "--policies",
            policies.to_str().unwrap(),
        ])
        .await;
    let r = call(&shell, "screen.capture", json!({})).await;
    assert_eq!(
        shot(&r).get_pixel(x, y).0,
        [0, 0, 0, 255],
        "the hidden app's menu was sent: {}",
        text(&r)
    );
    let f2 = facts(&r)["frame"].as_str().unwrap().to_string();
    let r = call(
        &shell,
        "input.click",
        json!({ "frame": f2, "x": x, "y": y }),
    )
    .await;
    assert!(
        text(&r).contains("PERMISSION_DENIED") && text(&r).contains("off limits"),
        "{}",
        text(&r)
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!log.exists(), "the refused click chose the item");
    shell.cancel().await.unwrap();

    // The same click without the policy reaches the item: the refusal above was the policy's.
    std::fs::remove_file(policies.join("no_tk.cedar")).unwrap();
    let shell = sb
        .stdio(&[
            "--connector",
            "shell",
            "--policies",
            policies.to_str().unwrap(),
        ])
        .await;
    let r = call(&shell, "screen.capture", json!({})).await;
    let f3 = facts(&r)["frame"].as_str().unwrap().to_string();
    let r = call(
        &shell,
        "input.click",
        json!({ "frame": f3, "x": x, "y": y }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let mut chosen = false;
    for _ in 0..50 {
        if std::fs::read_to_string(&log).is_ok_and(|s| s.contains("chosen")) {
            chosen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(chosen, "the click did not reach the menu item");
    shell.cancel().await.unwrap();
    let _ = tk.kill();
    let _ = tk.wait();
}
