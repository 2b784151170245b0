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
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
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
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
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
        .output()
        .unwrap();
    let setup = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let proj = sb.path("proj").display().to_string();
    assert!(setup.contains(&format!("\"{proj}\"")), "{setup}");
    assert!(!setup.contains(".."), "{setup}");
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
