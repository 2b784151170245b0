//! What a new user meets in their first hour, held to what the README and docs/CHATGPT.md
//! promise: `gantry serve`'s output exactly as the docs show it, a closed stdout that panics
//! nothing, relative paths shown as the directory they name, and no journal left after a
//! clean stop.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncBufReadExt as _;

use crate::support::*;

/// `gantry serve ARGS` as a new user starts it: its own home, the default config there, no
/// display, started in a project directory. The command, not yet spawned.
fn fresh_serve(sb: &Sandbox, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(gantry());
    cmd.arg("serve")
        .args(args)
        .current_dir(sb.root())
        .env("HOME", sb.path("home"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().to_string();
        if name.starts_with("GANTRY_")
            || name.starts_with("XDG_")
            || ["DISPLAY", "WAYLAND_DISPLAY", "SSL_CERT_FILE"].contains(&name.as_str())
        {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// The examples of `gantry serve`'s output in `doc`: (the arguments, `stdout` or `stderr`,
/// the lines shown).
fn examples(doc: &str) -> Vec<(String, String, Vec<String>)> {
    let text = std::fs::read_to_string(workspace(doc)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim().strip_prefix("<!-- output of: gantry serve") else {
            continue;
        };
        let rest = rest.trim_end_matches("-->").trim();
        let (args, stream) = rest.rsplit_once(' ').unwrap_or(("", rest));
        let stream = stream.trim_matches(['(', ')']).to_string();
        let indent = line.len() - line.trim_start().len();
        assert_eq!(
            lines[i + 1].trim(),
            "```",
            "{doc}: a fence after the marker"
        );
        let shown: Vec<String> = lines[i + 2..]
            .iter()
            .take_while(|l| l.trim() != "```")
            .map(|l| l.get(indent..).unwrap_or("").to_string())
            .collect();
        found.push((args.trim().to_string(), stream, shown));
    }
    found
}

/// `line` with the secrets (43 base64url characters) as `<secret>`, the server's port as the
/// default one and the control page's as `<port>`.
fn as_documented(line: &str, port: u16) -> String {
    let line = line.replace(&format!("127.0.0.1:{port}"), "127.0.0.1:3210");
    let mut out: Vec<String> = line
        .split('/')
        .map(|part| {
            let secret = part.len() == 43
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if secret {
                "<secret>".to_string()
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>();
    if line.starts_with("admin ")
        && let Some(host) = out.get_mut(2)
        && let Some((h, _)) = host.split_once(':')
    {
        *host = format!("{h}:<port>");
    }
    out.join("/")
}

/// What `gantry serve ARGS` prints: its stdout lines, and its stderr lines that are not the
/// log's (which begin with a timestamp).
async fn serve_output(args: &str) -> (Vec<String>, Vec<String>) {
    let sb = Sandbox::new();
    let port = machines::free_port();
    let mut argv: Vec<String> = vec!["--port".into(), port.to_string()];
    argv.extend(args.split_whitespace().map(str::to_string));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mut child = fresh_serve(&sb, &argv).spawn().unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let wait = async {
        while let Some(l) = out.next_line().await.unwrap() {
            let admin = l.starts_with("admin ");
            stdout.push(as_documented(&l, port));
            if admin {
                break;
            }
        }
        while let Some(l) = err.next_line().await.unwrap() {
            let logged = l.len() > 4 && l[..4].chars().all(|c| c.is_ascii_digit());
            if !logged {
                let next = l.starts_with("next:");
                stderr.push(l);
                if next {
                    break;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("gantry serve printed its URLs and next step");
    let _ = child.kill().await;
    (stdout, stderr)
}

#[tokio::test]
async fn the_start_output_is_what_the_readme_and_the_chatgpt_guide_show() {
    let mut shown = examples("README.md");
    shown.extend(examples("docs/CHATGPT.md"));
    assert!(shown.len() >= 4, "the examples were not found: {shown:?}");
    let mut runs: Vec<String> = shown.iter().map(|(a, _, _)| a.clone()).collect();
    runs.dedup();
    for args in runs {
        let (stdout, stderr) = serve_output(&args).await;
        for (_, stream, lines) in shown.iter().filter(|(a, _, _)| *a == args) {
            let real = if stream == "stdout" { &stdout } else { &stderr };
            assert_eq!(
                real, lines,
                "`gantry serve {args}` {stream} is not what the docs show"
            );
        }
    }
}

#[tokio::test]
async fn a_closed_stdout_stops_no_server_and_ends_a_command_quietly() {
    let sb = Sandbox::new();
    let port = machines::free_port().to_string();
    let mut child = fresh_serve(&sb, &["--port", &port]).spawn().unwrap();
    // As `gantry serve | head -1`: the first line read, then the pipe closed.
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = out.next_line().await.unwrap().unwrap();
    assert!(first.starts_with("core http://"), "{first}");
    drop(out);
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let said = tokio::time::timeout(Duration::from_secs(20), async {
        let mut said = Vec::new();
        while let Some(l) = err.next_line().await.unwrap() {
            let next = l.starts_with("next:");
            said.push(l);
            if next {
                break;
            }
        }
        said
    })
    .await
    .unwrap();
    assert!(!said.iter().any(|l| l.contains("panicked")), "{said:#?}");
    // Still serving.
    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert!(child.try_wait().unwrap().is_none());
    let _ = child.kill().await;

    // A command that prints and exits ends at once and says nothing, as `head` expects.
    let mut audit = std::process::Command::new(gantry())
        .args(["config", "codex"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(audit.stdout.take());
    let out = audit.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}

#[test]
fn a_relative_root_is_shown_as_the_directory_it_names() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.path("proj")).unwrap();
    let out = std::process::Command::new(gantry())
        .args(["config", "codex", "--root", "../proj"])
        .current_dir(sb.root())
        .env("HOME", sb.path("home"))
        .env_remove("GANTRY_ROOTS")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let proj = sb.path("proj").display().to_string();
    assert!(
        said.contains(&format!("added to that list now: {proj}")),
        "{said}"
    );
    assert!(!said.contains(".."), "{said}");
    // And written so into the config file the setup reads.
    let config = std::fs::read_to_string(sb.path("home/.config/gantry/config.toml")).unwrap();
    assert!(
        config.contains(&format!("\"{proj}\"")) && !config.contains(".."),
        "{config}"
    );
}

#[tokio::test]
async fn a_clean_stop_leaves_no_journal_behind() {
    let sb = Sandbox::new();
    sb.write("a.txt", "recorded\n");
    let server = sb.http(&[]).await;
    let client = server.client("core").await;
    let r = call(&client, "read", serde_json::json!({ "paths": ["a.txt"] })).await;
    assert!(!is_error(&r), "{}", text(&r));
    let journals = || -> Vec<String> {
        walk(&sb.path("state"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "journal"))
            .map(|p| p.display().to_string())
            .collect()
    };
    assert!(!journals().is_empty(), "the call went through a journal");
    let pid = server.child.id().unwrap();
    let mut child = server.child;
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(journals(), Vec::<String>::new());
    // What it recorded is in the store: the next server finds it.
    let sb_again = sb.stdio(&[]).await;
    let found = call(
        &sb_again,
        "session",
        serde_json::json!({ "action": "search", "source": "gantry" }),
    )
    .await;
    assert!(text(&found).contains("gantry-core-"), "{}", text(&found));
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// `gantry token rotate core` on `sb`'s settings: its stdout and stderr.
fn rotate(sb: &Sandbox) -> (String, String) {
    let out = std::process::Command::new(gantry())
        .args(["token", "rotate", "core"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .env_remove("GANTRY_PUBLIC_HOST")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn token_rotate_prints_the_public_url_of_the_running_server() {
    let sb = Sandbox::new();
    // No server running: it cannot know the public URL, and says so.
    let (out, err) = rotate(&sb);
    assert!(err.contains("gantry cannot tell your public URL"), "{err}");
    assert!(!out.contains("@public"), "{out}");

    // A server with a public host, signing in with OAuth: the URL to paste has no secret,
    // so nothing changes in ChatGPT.
    let (mut server, port) = public_host_server(&sb, &[]).await;
    let (out, err) = rotate(&sb);
    assert!(
        out.contains(&format!("core@public http://127.0.0.1:{port}/core/mcp")),
        "{out}"
    );
    assert!(err.contains("nothing to change in ChatGPT"), "{err}");
    // Its loopback URL too is the one that answers: the name, not the secret.
    assert!(
        out.contains(&format!("core http://127.0.0.1:{port}/core/mcp")),
        "{out}"
    );
    server.child.kill().await.unwrap();

    // The URL secret on the public host: the new public URL, to edit in ChatGPT.
    sb.config("[auth]\ncore = \"url-secret\"\n");
    let (mut server, port) = public_host_server(&sb, &[]).await;
    let (out, err) = rotate(&sb);
    let tokens: toml::Table =
        toml::from_str(&std::fs::read_to_string(sb.path("state/tokens.toml")).unwrap()).unwrap();
    let token = tokens["core"].as_str().unwrap();
    assert!(
        out.contains(&format!("core@public http://127.0.0.1:{port}/{token}/mcp")),
        "{out}"
    );
    assert!(
        err.contains("edit the connector's URL to the core@public one below"),
        "{err}"
    );

    // A record a command rewrote (the state directory is the user's, so the model's too when
    // commands are not confined) is read as untrusted: a host not in the form
    // `--public-host` takes is not printed, nor anything after it.
    std::fs::write(
        sb.path("state/admin.serving"),
        format!("port {port}\npublic evil.example\u{1b}]0;pwned\u{7}\n"),
    )
    .unwrap();
    let (out, err) = rotate(&sb);
    assert!(!out.contains("evil") && !err.contains("evil"), "{out}{err}");
    assert!(
        !out.contains('\u{1b}') && !err.contains('\u{1b}'),
        "{out}{err}"
    );
    server.child.kill().await.unwrap();
}

#[test]
fn gantry_config_writes_no_root_that_is_the_home_or_gone() {
    let sb = Sandbox::new();
    let config = |args: &[&str], cwd: &Path| {
        std::process::Command::new(gantry())
            .args(["config", "codex"])
            .args(args)
            .args(["--config", &sb.path("config.toml").display().to_string()])
            .args(["--state-dir", &sb.path("state").display().to_string()])
            .current_dir(cwd)
            .env("HOME", sb.path("home"))
            .env_remove("GANTRY_ROOTS")
            .output()
            .unwrap()
    };
    // Named or not, the home directory is not written into the roots every client shares.
    let home = sb.path("home").display().to_string();
    let out = config(&["--root", &home], &sb.root());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("does not write") && err.contains("your home directory"),
        "{err}"
    );
    // Nor `.` when the current directory was removed under it.
    let gone = sb.path("gone");
    std::fs::create_dir_all(&gone).unwrap();
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "cd {} && rmdir {} && exec {} config codex --config {} --state-dir {}",
            gone.display(),
            gone.display(),
            gantry(),
            sb.path("config.toml").display(),
            sb.path("state").display()
        ))
        .env("HOME", sb.path("home"))
        .env_remove("GANTRY_ROOTS");
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("the current directory cannot be found"),
        "{err}"
    );
    assert!(
        !sb.path("config.toml").exists()
            || !std::fs::read_to_string(sb.path("config.toml"))
                .unwrap()
                .contains("roots")
    );
}

#[tokio::test]
async fn a_root_added_later_reaches_a_client_set_up_before() {
    let sb = Sandbox::new();
    sb.write("first.txt", "in the first root\n");
    let second = sb.path("second");
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(second.join("b.txt"), "in the second root\n").unwrap();
    // The setup as Codex gets it, pasted once.
    let out = std::process::Command::new(gantry())
        .args(["config", "codex"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("reaches this client at its next call"),
        "{stderr}"
    );
    let setup: toml::Table = String::from_utf8_lossy(&out.stdout).parse().unwrap();
    let args: Vec<String> = setup["mcp_servers"]["gantry-core"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    // Started as the client starts it: from its own directory, with only those arguments.
    let mut cmd = tokio::process::Command::new(gantry());
    cmd.args(&args)
        .current_dir("/")
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "warn")
        .env_remove("GANTRY_ROOTS");
    let (_, client) = stdio_client(cmd).await;
    let first = sb.root().join("first.txt").display().to_string();
    let b = second.join("b.txt").display().to_string();
    let r = call(&client, "read", serde_json::json!({ "paths": [first] })).await;
    assert!(text(&r).contains("in the first root"), "{}", text(&r));
    let r = call(&client, "read", serde_json::json!({ "paths": [b] })).await;
    assert!(is_error(&r), "{}", text(&r));
    // The model cannot add one the same way: `gantry config` refuses inside its commands.
    let config_args = format!(
        "--config {} --state-dir {}",
        sb.path("config.toml").display(),
        sb.path("state").display()
    );
    let r = call(
        &client,
        "exec_command",
        serde_json::json!({
            "cmd": format!("{} config codex --root {} {config_args}", gantry(), second.display()),
            "yield_time_ms": 10000
        }),
    )
    .await;
    let said = command_output(&r);
    assert!(
        said.contains("refuses to inside a command gantry started"),
        "{}",
        text(&r)
    );
    let r = call(&client, "read", serde_json::json!({ "paths": [b] })).await;
    assert!(is_error(&r), "{}", text(&r));
    // A root added afterwards (as the control page does, in the config file) is seen at the
    // next call, with nothing pasted again.
    let out = std::process::Command::new(gantry())
        .args(["config", "codex", "--root", &second.display().to_string()])
        .args(["--config", &sb.path("config.toml").display().to_string()])
        .args(["--state-dir", &sb.path("state").display().to_string()])
        .env("HOME", sb.path("home"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("added to that list now"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = call(&client, "read", serde_json::json!({ "paths": [b] })).await;
        if text(&r).contains("in the second root") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", text(&r));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.cancel().await.unwrap();
}
