//! The edges a model (or an editor's save) can strike at: config and policy files caught
//! half-saved while calls keep coming, gantry's own inputs that are not files, the warm shell
//! after `exec` is switched off. Each test counts what got through; none may.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{Sandbox, call, is_error, text};

/// How the editors people use save a file, each a real sequence of file system steps with
/// the in-between state held for a few milliseconds, as a slow disk would.
#[derive(Debug, Clone, Copy)]
enum Save {
    /// `: > file`, then the new text (an editor that writes in place).
    TruncateAndWrite,
    /// The text written in two parts in place (a write caught half done).
    PartialWrite,
    /// A temp file renamed over the file.
    WriteAndRename,
    /// The file unlinked, then a temp file renamed to its name.
    UnlinkAndRename,
}

const SAVES: [Save; 4] = [
    Save::TruncateAndWrite,
    Save::PartialWrite,
    Save::WriteAndRename,
    Save::UnlinkAndRename,
];

const HELD: Duration = Duration::from_millis(40);

fn save(path: &Path, text: &str, how: Save) {
    let tmp = path.with_extension("saving");
    match how {
        Save::TruncateAndWrite => {
            std::fs::write(path, "").unwrap();
            std::thread::sleep(HELD);
            std::fs::write(path, text).unwrap();
        }
        Save::PartialWrite => {
            use std::io::Write as _;
            let mut f = std::fs::File::create(path).unwrap();
            let (head, tail) = text.split_at(text.len() / 2);
            f.write_all(head.as_bytes()).unwrap();
            f.flush().unwrap();
            std::thread::sleep(HELD);
            f.write_all(tail.as_bytes()).unwrap();
        }
        Save::WriteAndRename => {
            std::fs::write(&tmp, text).unwrap();
            std::thread::sleep(HELD);
            std::fs::rename(&tmp, path).unwrap();
        }
        Save::UnlinkAndRename => {
            std::fs::write(&tmp, text).unwrap();
            std::fs::remove_file(path).unwrap();
            std::thread::sleep(HELD);
            std::fs::rename(&tmp, path).unwrap();
        }
    }
}

/// Runs `probe` back to back on `client` while `round` (one round of saves) runs again and
/// again on a thread, until at least `min_calls` probes were made during it; returns how many
/// probes were made and how many got through.
async fn under_load(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: serde_json::Value,
    min_calls: usize,
    round: impl Fn() + Send + 'static,
) -> (usize, usize, Vec<String>) {
    let done = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicUsize::new(0));
    let editor = {
        let (done, made) = (done.clone(), made.clone());
        std::thread::spawn(move || {
            round();
            while made.load(Ordering::SeqCst) < min_calls {
                round();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let through = AtomicUsize::new(0);
    let mut refusals = Vec::new();
    while !done.load(Ordering::SeqCst) {
        let r = call(client, tool, args.clone()).await;
        made.fetch_add(1, Ordering::SeqCst);
        if is_error(&r) {
            if refusals.len() < 3 && !refusals.contains(&text(&r)) {
                refusals.push(text(&r));
            }
        } else {
            through.fetch_add(1, Ordering::SeqCst);
        }
    }
    editor.join().unwrap();
    (
        made.load(Ordering::SeqCst),
        through.load(Ordering::SeqCst),
        refusals,
    )
}

/// With `exec = false`, no save of the config file (in place, renamed, unlinked, through a
/// symbolic link) lets a single `exec_command` run while it is half done; a real widening
/// applies only once the file has stayed unchanged for the settling time, and a narrowing at
/// the next call.
#[tokio::test]
async fn no_config_save_lets_a_call_through_and_widening_waits_to_settle() {
    let sb = Sandbox::new();
    // The config is a link to the file the editor saves (dotfile managers do this).
    let real = sb.path("real-config.toml");
    std::fs::write(&real, "[permissions]\nexec = false\n").unwrap();
    std::os::unix::fs::symlink(&real, sb.path("config.toml")).unwrap();
    let client = sb.stdio(&[]).await;
    let probe = json!({ "cmd": "echo probe" });
    assert!(is_error(
        &call(&client, "exec_command", probe.clone()).await
    ));

    for (target, label) in [
        (real.clone(), "through the link"),
        (sb.path("config.toml"), "the link itself"),
    ] {
        let (made, through, refusals) = under_load(
            &client,
            "exec_command",
            probe.clone(),
            3 * SAVES.len(),
            move || {
                for (i, how) in SAVES.iter().enumerate() {
                    // The link itself can only be replaced (renamed over), never written in place.
                    let how = if label == "the link itself" {
                        Save::WriteAndRename
                    } else {
                        *how
                    };
                    save(
                        &target,
                        &format!("# save {i}\n[permissions]\nexec = false\n"),
                        how,
                    );
                    std::thread::sleep(Duration::from_millis(30));
                }
            },
        )
        .await;
        assert_eq!(
            through, 0,
            "{through} of {made} calls ran during saves {label}: {refusals:?}"
        );
        assert!(
            made >= 3 * SAVES.len(),
            "only {made} calls were made during the saves {label}"
        );
    }

    // A real widening: held back at first (and the refusal says why), then applied.
    tokio::time::sleep(Duration::from_millis(20)).await;
    std::fs::write(sb.path("config.toml"), "[permissions]\nexec = true\n").unwrap();
    let r = call(&client, "exec_command", probe.clone()).await;
    assert!(is_error(&r), "a widening applied at once: {}", text(&r));
    assert!(
        text(&r).contains("stayed unchanged for 1 s"),
        "{}",
        text(&r)
    );
    let started = Instant::now();
    while is_error(&call(&client, "exec_command", probe.clone()).await) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the widening never applied"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A narrowing: at the next call.
    std::fs::write(sb.path("config.toml"), "[permissions]\nexec = false\n").unwrap();
    assert!(is_error(
        &call(&client, "exec_command", probe.clone()).await
    ));

    // Emptied, or left with comments only: refused (never the defaults), saying why.
    for left in ["", "# nothing here\n"] {
        std::fs::write(sb.path("config.toml"), left).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let r = call(&client, "exec_command", probe.clone()).await;
        assert!(text(&r).contains("sets nothing any more"), "{}", text(&r));
    }
    client.cancel().await.unwrap();
}

/// A policy file of `--policies DIR` saved in every way, removed for a moment, or turned
/// into a dangling link or a directory: its `forbid` holds throughout.
#[tokio::test]
async fn no_policy_save_lifts_a_forbid() {
    let sb = Sandbox::new();
    sb.write("secret.txt", "s\n");
    let dir = sb.path("policies");
    std::fs::create_dir_all(&dir).unwrap();
    let rule = dir.join("local.cedar");
    let forbid = |i: usize| {
        format!(
            "// save {i}\n@id(\"local.secret\")\n@reason(\"not the secret\")\nforbid (principal, action == Action::\"read\", resource);\n"
        )
    };
    std::fs::write(&rule, forbid(0)).unwrap();
    let client = sb.stdio(&["--policies", &dir.display().to_string()]).await;
    let probe = json!({ "paths": ["secret.txt"] });
    let r = call(&client, "read", probe.clone()).await;
    assert!(text(&r).contains("not the secret"), "{}", text(&r));

    let (made, through, refusals) =
        under_load(&client, "read", probe.clone(), 3 * SAVES.len(), move || {
            for (i, how) in SAVES.iter().enumerate() {
                save(&rule, &forbid(i + 1), *how);
                std::thread::sleep(Duration::from_millis(30));
            }
            // Gone for a moment, a dangling link, a directory: then back.
            let back = |i| {
                std::thread::sleep(HELD);
                let _ = std::fs::remove_file(&rule);
                let _ = std::fs::remove_dir(&rule);
                std::fs::write(&rule, forbid(i)).unwrap();
                std::thread::sleep(Duration::from_millis(30));
            };
            std::fs::remove_file(&rule).unwrap();
            back(10);
            std::fs::remove_file(&rule).unwrap();
            std::os::unix::fs::symlink(rule.with_extension("nowhere"), &rule).unwrap();
            back(11);
            std::fs::remove_file(&rule).unwrap();
            std::fs::create_dir(&rule).unwrap();
            back(12);
        })
        .await;
    assert_eq!(
        through, 0,
        "{through} of {made} forbidden reads got through: {refusals:?}"
    );
    assert!(
        made >= 3 * SAVES.len(),
        "only {made} reads were made during the saves"
    );

    // A dangling link left in place stays broken, naming the file.
    let rule = dir.join("local.cedar");
    std::fs::remove_file(&rule).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), &rule).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = call(&client, "read", probe.clone()).await;
    assert!(
        text(&r).contains("local.cedar: it is a link to nothing"),
        "{}",
        text(&r)
    );
    // Removed on purpose, the rule goes once the removal has settled.
    std::fs::remove_file(&rule).unwrap();
    let r = call(&client, "read", probe.clone()).await;
    assert!(text(&r).contains("was removed"), "{}", text(&r));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!is_error(&call(&client, "read", probe).await));
    client.cancel().await.unwrap();
}

/// A config that is a device or a FIFO is refused at start and while serving, at once and
/// with the server's memory bounded (a link to `/dev/zero` once grew it to 2 GiB).
#[tokio::test]
async fn a_config_that_is_not_a_file_is_refused_with_bounded_memory() {
    let sb = Sandbox::new();
    let config = sb.path("config.toml");
    let fifo = sb.path("fifo.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for (target, kind) in [
        (Path::new("/dev/zero"), "a device"),
        (fifo.as_path(), "a FIFO"),
    ] {
        let _ = std::fs::remove_file(&config);
        std::os::unix::fs::symlink(target, &config).unwrap();
        let out = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::process::Command::new(crate::support::gantry())
                .arg("check")
                .args(sb.args())
                .env("HOME", sb.path("home"))
                .output(),
        )
        .await
        .expect("check hung on the config")
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains(&format!("{kind}, not a regular file")),
            "{stderr}"
        );
    }

    std::fs::remove_file(&config).unwrap();
    sb.config("[permissions]\nread = true\n");
    sb.write("a.txt", "a\n");
    let mut cmd = sb.serve(Path::new(crate::support::gantry()), &["--stdio"]);
    cmd.env("GANTRY_LOG", "error");
    let (pid, client) = crate::support::stdio_client(cmd).await;
    let probe = json!({ "paths": ["a.txt"] });
    assert!(!is_error(&call(&client, "read", probe.clone()).await));
    for (target, kind) in [
        (Path::new("/dev/zero"), "a device"),
        (fifo.as_path(), "a FIFO"),
    ] {
        let tmp = sb.path("link.tmp");
        std::os::unix::fs::symlink(target, &tmp).unwrap();
        std::fs::rename(&tmp, &config).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(5), call(&client, "read", probe.clone()))
            .await
            .expect("a call hung on the config");
        assert!(
            text(&r).contains(&format!("{kind}, not a regular file")),
            "{}",
            text(&r)
        );
        let rss_kib = crate::support::proc_status(pid, "VmRSS");
        assert!(rss_kib < 200 * 1024, "the server grew to {rss_kib} KiB");
    }
    client.cancel().await.unwrap();
}

/// The warm shell kept ready for the next command ends soon after `exec` is switched off,
/// with no call made. The watcher looks every 250 ms; the bound leaves room for a loaded CI
/// machine (a one-second bound failed there once) and still fails if nothing ends it.
#[tokio::test]
async fn the_warm_shell_ends_when_exec_is_switched_off() {
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = true\n");
    // Only bash is kept warm; CI starts the suite with no SHELL at all (gantry then uses
    // /bin/sh), so the shell is named here as a user's login session names it.
    let mut cmd = sb.serve(Path::new(crate::support::gantry()), &["--stdio"]);
    cmd.env("SHELL", "/bin/bash");
    let (_, client) = crate::support::stdio_client(cmd).await;
    let marker = format!("{}/shell/warm-", sb.path("state").display());
    // Each command starts the next warm shell once it is done. Under a loaded machine the
    // login snapshot a warm shell needs can miss its deadline once, so a few commands are
    // tried before concluding that this machine keeps no warm shell.
    let started = Instant::now();
    let mut calls = 0;
    while !crate::support::alive(&marker) {
        if started.elapsed() > Duration::from_secs(60) {
            crate::support::cannot_check(&format!(
                "no warm shell was started here after {calls} commands (bash, without a snapshot?)"
            ));
            return;
        }
        let r = call(&client, "exec_command", json!({ "cmd": "echo ready" })).await;
        assert!(!is_error(&r), "{}", text(&r));
        calls += 1;
        let asked = Instant::now();
        while !crate::support::alive(&marker) && asked.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    sb.config("[permissions]\nexec = false\n");
    let off = Instant::now();
    while crate::support::alive(&marker) {
        assert!(
            off.elapsed() < Duration::from_secs(5),
            "the warm shell outlived `exec` by five seconds: {:?}",
            crate::support::running(&marker)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.cancel().await.unwrap();
}

fn audit_lines(sb: &Sandbox) -> Vec<serde_json::Value> {
    std::fs::read_to_string(sb.path("state/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A refused call is audited with what it attempted (the command line, the workdir), and
/// `audit_command_lines = false` still withholds the command.
#[tokio::test]
async fn a_refused_call_is_audited_with_what_it_attempted() {
    let sb = Sandbox::new();
    for (keep, config) in [(true, ""), (false, "audit_command_lines = false\n")] {
        sb.config(&format!("{config}[permissions]\nexec = false\n"));
        let client = sb.stdio(&[]).await;
        let workdir = sb.root().display().to_string();
        let r = call(
            &client,
            "exec_command",
            json!({ "cmd": "echo probe", "workdir": workdir }),
        )
        .await;
        assert!(text(&r).starts_with("PERMISSION_DENIED"), "{}", text(&r));
        client.cancel().await.unwrap();
        let lines = audit_lines(&sb);
        let refused = lines
            .iter()
            .rfind(|l| l["tool"] == "exec_command" && l["decision"] == "deny")
            .unwrap_or_else(|| panic!("no refusal audited: {lines:?}"));
        let attempted = &refused["attempted"];
        let cmd = if keep { "echo probe" } else { "(withheld)" };
        assert_eq!(
            attempted[0],
            json!({ "input": "cmd", "value": cmd }),
            "{refused}"
        );
        assert_eq!(
            attempted[1],
            json!({ "input": "workdir", "value": workdir }),
            "{refused}"
        );
    }
}

/// A command that kills gantry itself is still in the audit after a restart: its intent line
/// was written before it ran.
#[tokio::test]
async fn a_call_that_kills_gantry_is_still_on_record() {
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = true\n");
    let (pid, client) =
        crate::support::stdio_client(sb.serve(Path::new(crate::support::gantry()), &["--stdio"]))
            .await;
    let fatal = format!("kill -9 {pid} # fatal-{pid}");
    let mut args = serde_json::Map::new();
    args.insert("cmd".into(), json!(fatal));
    let answer = client
        .call_tool(rmcp::model::CallToolRequestParams::new("exec_command").with_arguments(args))
        .await;
    assert!(answer.is_err(), "gantry survived its own kill: {answer:?}");
    drop(client);

    // Restarted on the same state directory.
    let client = sb.stdio(&[]).await;
    assert!(!is_error(
        &call(&client, "exec_command", json!({ "cmd": "true" })).await
    ));
    client.cancel().await.unwrap();
    let lines = audit_lines(&sb);
    let intent = lines
        .iter()
        .find(|l| l["phase"] == "intent" && l["attempted"][0]["value"] == json!(fatal))
        .unwrap_or_else(|| panic!("the fatal call left no line: {lines:?}"));
    let call_id = &intent["call"];
    assert!(
        !lines
            .iter()
            .any(|l| l["call"] == *call_id && l["phase"].is_null()),
        "an outcome line for a call that killed gantry?"
    );
}

/// A hard link inside a root to one of gantry's own files (made by another program of the
/// user's: the tools cannot make one) is refused by identity on read, find and write.
#[tokio::test]
async fn a_hard_link_to_gantrys_own_files_is_refused() {
    let sb = Sandbox::new();
    let token = "tok-edges-hardlink-0123456789";
    std::fs::write(
        sb.path("state/tokens.toml"),
        format!("core = \"{token}\"\n"),
    )
    .unwrap();
    sb.config("# config-marker\n[permissions]\nexec = false\n");
    let client = sb.stdio(&[]).await;
    std::fs::hard_link(sb.path("state/tokens.toml"), sb.root().join("t.toml")).unwrap();
    std::fs::hard_link(sb.path("config.toml"), sb.root().join("c.toml")).unwrap();
    std::fs::hard_link(sb.path("state/audit.jsonl"), sb.root().join("a.jsonl")).unwrap();
    // One directory down in the state directory (the login snapshot lives in `shell/`).
    std::fs::create_dir_all(sb.path("state/shell")).unwrap();
    std::fs::write(
        sb.path("state/shell/env.sh"),
        "export SECRET=snapshot-marker\n",
    )
    .unwrap();
    std::fs::hard_link(sb.path("state/shell/env.sh"), sb.root().join("s.sh")).unwrap();
    sb.write("mine.txt", "mine\n");

    let r = call(
        &client,
        "read",
        json!({ "paths": ["t.toml", "c.toml", "a.jsonl", "s.sh", "mine.txt"] }),
    )
    .await;
    assert!(!text(&r).contains("snapshot-marker"), "{}", text(&r));
    let entries = crate::support::facts(&r)["entries"].clone();
    for e in entries.as_array().unwrap().iter().take(4) {
        assert_eq!(e["error_code"], "PATH_NOT_ALLOWED", "{e}");
    }
    assert!(
        !text(&r).contains(token) && !text(&r).contains("config-marker"),
        "{}",
        text(&r)
    );
    assert!(text(&r).contains("mine"), "{}", text(&r));
    let found = call(&client, "find", json!({ "query": token })).await;
    assert!(!text(&found).contains(token), "{}", text(&found));
    // Known by identity whatever its link count: the audit log moved into the root (its only
    // name now, as a hard link's other name removed mid-read would leave it) is still refused.
    std::fs::remove_file(sb.root().join("a.jsonl")).unwrap();
    std::fs::rename(sb.path("state/audit.jsonl"), sb.root().join("moved.jsonl")).unwrap();
    let r = call(&client, "read", json!({ "paths": ["moved.jsonl"] })).await;
    assert_eq!(
        crate::support::facts(&r)["entries"][0]["error_code"],
        "PATH_NOT_ALLOWED",
        "{}",
        text(&r)
    );
    let patch =
        "*** Begin Patch\n*** Update File: c.toml\n@@\n-exec = false\n+exec = true\n*** End Patch";
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        std::fs::read_to_string(sb.path("config.toml"))
            .unwrap()
            .contains("exec = false")
    );
    client.cancel().await.unwrap();
}

/// The files MCP clients read to start servers are written only with `client_config` (off by
/// default): the refusal says how to allow it, and with it on the same write goes through.
#[tokio::test]
async fn a_client_launch_file_needs_its_own_permission() {
    let sb = Sandbox::new();
    sb.config("[permissions]\nexec = false\n");
    sb.write(".codex/config.toml", "model = \"x\"\n");
    let client = sb.stdio(&[]).await;
    let add = |file: &str| {
        format!(
            "*** Begin Patch\n*** Add File: {file}\n+{{\"mcpServers\":{{\"x\":{{\"command\":\"/bin/sh\"}}}}}}\n*** End Patch"
        )
    };
    // A link on the way (`.vscode` pointing elsewhere) does not hide the file the client reads.
    std::fs::create_dir_all(sb.root().join(".vscode-real")).unwrap();
    std::os::unix::fs::symlink(".vscode-real", sb.root().join(".vscode")).unwrap();
    for file in [
        ".cursor/mcp.json",
        ".mcp.json",
        ".vscode/mcp.json",
        "sub/.mcp.json",
        "opencode.jsonc",
    ] {
        let r = call(&client, "apply_patch", json!({ "patch": add(file) })).await;
        assert!(is_error(&r), "{file}: {}", text(&r));
        assert!(
            text(&r).contains("client_config = true"),
            "{file}: {}",
            text(&r)
        );
        assert!(!sb.root().join(file).exists(), "{file} was written");
    }
    let edit = "*** Begin Patch\n*** Update File: .codex/config.toml\n@@\n-model = \"x\"\n+model = \"y\"\n+[mcp_servers.x]\n*** End Patch";
    let r = call(&client, "apply_patch", json!({ "patch": edit })).await;
    assert!(text(&r).contains("client_config"), "{}", text(&r));
    // An ordinary file beside them is written as usual.
    let r = call(&client, "apply_patch", json!({ "patch": add("mcp.json") })).await;
    assert!(!is_error(&r), "{}", text(&r));
    client.cancel().await.unwrap();

    // A link to a directory holding an `mcp.json`, moved to `.cursor`, would make one.
    std::fs::create_dir_all(sb.root().join("cfgdir")).unwrap();
    std::fs::write(sb.root().join("cfgdir/mcp.json"), "{}").unwrap();
    std::os::unix::fs::symlink("cfgdir", sb.root().join("linkdir")).unwrap();
    let shell = sb.stdio(&["--connector", "shell"]).await;
    let r = call(
        &shell,
        "fs.move",
        json!({ "source": "linkdir", "destination": ".cursor" }),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("client_config"), "{}", text(&r));
    assert!(!sb.root().join(".cursor").exists());
    shell.cancel().await.unwrap();

    // The config's own list adds names.
    sb.config("client_launch_files = [\"tools/agent.json\"]\n[permissions]\nexec = false\n");
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "apply_patch",
        json!({ "patch": add("tools/agent.json") }),
    )
    .await;
    assert!(text(&r).contains("client_config = true"), "{}", text(&r));
    assert!(!sb.root().join("tools/agent.json").exists());
    client.cancel().await.unwrap();

    sb.config("[permissions]\nexec = false\nclient_config = true\n");
    let client = sb.stdio(&[]).await;
    let r = call(
        &client,
        "apply_patch",
        json!({ "patch": add(".cursor/mcp.json") }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(sb.root().join(".cursor/mcp.json").exists());
    client.cancel().await.unwrap();
}

/// `make` on `[shell] allowed_commands` runs a Makefile the model can write, so allowing it
/// is allowing any program: it is refused (so is `git`, whose `.git/config` can name a program
/// to run) unless the list is `"*"`, and `gantry check` says why. (`shell.exec` needs `exec`
/// in any case.)
#[tokio::test]
async fn a_program_that_runs_the_working_tree_is_not_a_narrow_allowance() {
    if which("make").is_none() {
        crate::support::cannot_check("make is not on PATH");
        return;
    }
    let sb = Sandbox::new();
    sb.config("[shell]\nallowed_commands = [\"make\", \"git\", \"echo\"]\n");
    let client = sb.stdio(&["--connector", "shell"]).await;
    let marker = sb.path("planted");
    let makefile = format!("all:\n\ttouch {}\n", marker.display());
    let r = call(
        &client,
        "fs.write",
        json!({ "path": "Makefile", "content": makefile }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    for program in ["make", "git"] {
        let r = call(
            &client,
            "shell.exec",
            json!({ "command": program, "args": ["all"] }),
        )
        .await;
        assert!(
            text(&r).starts_with("COMMAND_NOT_ALLOWED"),
            "{program}: {}",
            text(&r)
        );
        assert!(
            text(&r).contains("allowing it is allowing any program"),
            "{program}: {}",
            text(&r)
        );
    }
    assert!(!marker.exists(), "the planted Makefile ran");
    // A program that runs only its arguments is not affected.
    let r = call(
        &client,
        "shell.exec",
        json!({ "command": "echo", "args": ["hi"] }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    client.cancel().await.unwrap();

    let said = sb.check();
    assert!(
        said.contains("names `make`, `git`, which run what the working tree"),
        "{said}"
    );

    // Any program allowed, knowingly: make runs.
    sb.config("[shell]\nallowed_commands = [\"*\"]\n");
    let client = sb.stdio(&["--connector", "shell"]).await;
    let r = call(&client, "shell.exec", json!({ "command": "make" })).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(
        marker.exists(),
        "make did not run with every program allowed"
    );
    client.cancel().await.unwrap();
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A directory above a root swapped for a symbolic link (by another program: it lies outside
/// the roots) would move the whole root elsewhere: every read, listing, search and write is
/// refused instead of followed.
#[tokio::test]
async fn a_root_whose_parent_was_swapped_for_a_link_is_refused() {
    let sb = Sandbox::new();
    let parent = sb.path("parent");
    std::fs::create_dir_all(parent.join("root")).unwrap();
    std::fs::write(parent.join("root/a.txt"), "the real root\n").unwrap();
    let elsewhere = sb.path("elsewhere");
    std::fs::create_dir_all(elsewhere.join("root")).unwrap();
    std::fs::write(elsewhere.join("root/a.txt"), "somewhere else\n").unwrap();
    sb.config("[permissions]\nexec = false\n");
    let mut cmd = sb.serve(Path::new(crate::support::gantry()), &["--stdio"]);
    cmd.args(["--root", &parent.join("root").display().to_string()]);
    let (_, client) = crate::support::stdio_client(cmd).await;
    let a = parent.join("root/a.txt").display().to_string();
    let r = call(&client, "read", json!({ "paths": [a] })).await;
    assert!(text(&r).contains("the real root"), "{}", text(&r));

    std::fs::rename(&parent, sb.path("parent.real")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &parent).unwrap();
    let r = call(&client, "read", json!({ "paths": [a] })).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(!text(&r).contains("somewhere else"), "{}", text(&r));
    let r = call(&client, "find", json!({ "query": "somewhere" })).await;
    assert!(!text(&r).contains("somewhere else"), "{}", text(&r));
    let r = call(
        &client,
        "read",
        json!({ "paths": [parent.join("root").display().to_string()] }),
    )
    .await;
    assert!(is_error(&r) || !text(&r).contains("a.txt"), "{}", text(&r));
    let add = format!(
        "*** Begin Patch\n*** Add File: {}\n+planted\n*** End Patch",
        parent.join("root/b.txt").display()
    );
    let r = call(&client, "apply_patch", json!({ "patch": add })).await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(
        !elsewhere.join("root/b.txt").exists(),
        "written through the swapped parent"
    );
    client.cancel().await.unwrap();
}

/// A stdio request line over 16 MiB gets a JSON-RPC error under its own id, and the next
/// request is served as usual.
#[test]
fn an_oversized_stdio_line_gets_an_error_reply() {
    use std::io::Write as _;
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    let huge = "x".repeat(17 << 20);
    let session = [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "script", "version": "1" } } }),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        json!({ "jsonrpc": "2.0", "id": "big-2", "method": "tools/call",
            "params": { "name": "read", "arguments": { "paths": [huge] } } }),
        json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": { "name": "read", "arguments": { "paths": ["a.txt"] } } }),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let mut child = std::process::Command::new(crate::support::gantry())
        .args(["serve", "--stdio"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "error")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(session.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let replies: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let big = replies
        .iter()
        .find(|m| m["id"] == "big-2")
        .unwrap_or_else(|| panic!("no reply to the oversized request: {replies:?}"));
    assert_eq!(big["error"]["code"], -32600, "{big}");
    assert!(
        big["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than 16 MiB"),
        "{big}"
    );
    let next = replies
        .iter()
        .find(|m| m["id"] == 3)
        .expect("the next request was served");
    assert!(
        next["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("alpha"),
        "{next}"
    );
}

/// Whether a program gantry started ran in one of its cgroups (it printed /proc/self/cgroup);
/// where cgroups cannot be used here the containment has nothing to show, unless `tests/run`
/// requires it.
fn in_gantry_cgroup(out: &str) -> bool {
    let inside = out
        .lines()
        .filter_map(|l| l.strip_prefix("0::"))
        .any(|p| p.contains("/gantry."));
    if !inside {
        assert_ne!(
            std::env::var("GANTRY_TEST_CGROUP").as_deref(),
            Ok("required"),
            "cgroup v2 is usable here, yet the program ran outside gantry's cgroups: {out}"
        );
        crate::support::cannot_check("no cgroup v2 usable here: the containment is not tested");
    }
    inside
}

/// What a `shell.exec` program detaches with `setsid` ends with the call, and what an
/// upstream stdio server detaches ends with the server: both run in command cgroups.
#[tokio::test]
async fn detached_children_of_shell_exec_and_upstreams_end_with_them() {
    let sb = Sandbox::new();
    let marker = "3011.0417";
    let upstream_marker = "3012.0417";
    let upstream = format!(
        "cat /proc/self/cgroup > {}; setsid -f sleep {upstream_marker}; exec {} serve --stdio --root {} --state-dir {}",
        sb.path("upstream-cgroup").display(),
        crate::support::gantry(),
        sb.root().display(),
        sb.path("inner-state").display()
    );
    sb.config(&format!(
        "[shell]\nallowed_commands = [\"*\"]\n[gateway.servers.inner]\ncommand = \"sh\"\nargs = [\"-c\", {upstream:?}]\nenv = {{ HOME = {:?} }}\n",
        sb.path("home").display().to_string()
    ));
    let client = sb.stdio(&["--connector", "shell"]).await;
    let r = call(
        &client,
        "shell.exec",
        json!({ "command": "sh", "args": ["-c", format!("cat /proc/self/cgroup; setsid -f sleep {marker}")] }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    let out = r.structured_content.as_ref().unwrap()["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    if !in_gantry_cgroup(&out) {
        return;
    }
    crate::support::gone(marker).await;
    client.cancel().await.unwrap();

    let gateway = sb.stdio(&["--connector", "gateway"]).await;
    let tools = gateway.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "inner__read"), "{tools:?}");
    let seen = std::fs::read_to_string(sb.path("upstream-cgroup")).unwrap();
    assert!(in_gantry_cgroup(&seen), "{seen}");
    assert!(
        crate::support::alive(upstream_marker),
        "the upstream's detached child did not start"
    );
    gateway.cancel().await.unwrap();
    crate::support::gone(upstream_marker).await;
}

/// A config that is a link flipped between a narrow and a wide file while calls come (the
/// version of the file is read from the open file, so content is never filed under the other
/// file's version): once it rests on the narrow file, the narrow one applies.
#[tokio::test]
async fn a_config_flipped_between_two_files_settles_on_the_one_left() {
    let sb = Sandbox::new();
    let (narrow, wide) = (sb.path("narrow.toml"), sb.path("wide.toml"));
    std::fs::write(&narrow, "[permissions]\nexec = false\n").unwrap();
    std::fs::write(&wide, "[permissions]\nexec = true\n").unwrap();
    let config = sb.path("config.toml");
    let point = move |target: &Path, config: &Path| {
        let tmp = config.with_extension("link");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(target, &tmp).unwrap();
        std::fs::rename(&tmp, config).unwrap();
    };
    point(&narrow, &config);
    let client = sb.stdio(&[]).await;
    let probe = json!({ "cmd": "echo ran" });
    for trial in 0..5 {
        let stop = Arc::new(AtomicBool::new(false));
        let flipper = {
            let (stop, narrow, wide, config) =
                (stop.clone(), narrow.clone(), wide.clone(), config.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    point(&wide, &config);
                    point(&narrow, &config);
                }
            })
        };
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(800) {
            call(&client, "read", json!({ "paths": ["."] })).await;
        }
        stop.store(true, Ordering::SeqCst);
        flipper.join().unwrap();
        point(&narrow, &config);
        tokio::time::sleep(Duration::from_millis(1300)).await;
        for _ in 0..3 {
            let r = call(&client, "exec_command", probe.clone()).await;
            assert!(
                is_error(&r),
                "trial {trial}: exec ran with the narrow file in place: {}",
                text(&r)
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    client.cancel().await.unwrap();
}

/// A patch that changes one file behind 70 decoys still names that file in its audit line.
#[tokio::test]
async fn a_patch_behind_decoys_is_audited_with_every_target() {
    let sb = Sandbox::new();
    sb.write("target.txt", "old\n");
    let client = sb.stdio(&[]).await;
    let mut patch = String::from("*** Begin Patch\n");
    for i in 0..70 {
        patch.push_str(&format!("*** Add File: decoy-{i}.txt\n+d\n"));
    }
    patch.push_str("*** Update File: target.txt\n@@\n-old\n+new\n*** End Patch");
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(!is_error(&r), "{}", text(&r));
    client.cancel().await.unwrap();
    let line = audit_lines(&sb)
        .into_iter()
        .rfind(|l| l["tool"] == "apply_patch" && l["phase"].is_null())
        .unwrap();
    let target = sb.root().join("target.txt").canonicalize().unwrap();
    assert!(
        line["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["resource"] == json!(target.display().to_string())),
        "{line}"
    );
}
