//! The Hosts connector against real OpenSSH: each "machine" is a real `sshd` on a loopback
//! port with its own host key, serving this build of gantry with its own HOME, config, state
//! and root. The hub is a real `gantry serve --stdio --connector hosts` driven by a real MCP
//! client; its keys are pinned with the real `gantry hosts add`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::machines::{Remote, UserKey, sshd_here, user};
use crate::support::{Sandbox, call, gantry, is_error, text};

fn audit_of(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `gantry hosts ARGS` on the hub sandbox; its status and what it printed.
fn hosts_cli(sb: &Sandbox, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(gantry())
        .arg("hosts")
        .args(args)
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Pins `name`'s key as a user would, confirming it.
fn pin(sb: &Sandbox, name: &str) {
    let (code, said) = hosts_cli(sb, &["add", name, "--yes"]);
    assert_eq!(code, 0, "gantry hosts add {name}: {said}");
    assert!(
        said.contains("SHA256:"),
        "the fingerprint was not shown: {said}"
    );
    assert!(said.contains("its gantry answers"), "{said}");
}

/// Two machines, `a` (exec on) and `b` (exec off), both pinned, and a hub that reaches them.
struct Fleet {
    key: UserKey,
    a: Remote,
    b: Remote,
    hub: Sandbox,
}

impl Fleet {
    fn new(hub_extra: &str) -> Option<Fleet> {
        if !sshd_here() {
            return None;
        }
        let key = UserKey::new();
        let a = Remote::start(&key, "[permissions]\nexec = true\n");
        let b = Remote::start(&key, "[permissions]\nexec = false\n");
        std::fs::write(a.path("root/hello.txt"), "hello from a\n").unwrap();
        std::fs::write(b.path("root/hello.txt"), "hello from b\n").unwrap();
        let hub = Sandbox::new();
        hub.config(&format!(
            "{hub_extra}{}{}",
            a.entry("a", &key, true),
            b.entry("b", &key, true)
        ));
        pin(&hub, "a");
        pin(&hub, "b");
        Some(Fleet { key, a, b, hub })
    }
}

#[tokio::test]
async fn a_machine_reached_over_ssh_answers_as_core_does_there() {
    let Some(f) = Fleet::new("") else { return };
    let client = f.hub.stdio(&["--connector", "hosts"]).await;

    let listed = call(&client, "list_hosts", json!({})).await;
    assert!(!is_error(&listed), "{}", text(&listed));
    assert!(
        text(&listed).contains("a: answers (gantry "),
        "{}",
        text(&listed)
    );

    let r = call(
        &client,
        "read",
        json!({ "host": "a", "paths": ["hello.txt"] }),
    )
    .await;
    assert!(text(&r).contains("hello from a"), "{}", text(&r));
    let r = call(
        &client,
        "read",
        json!({ "host": "b", "paths": ["hello.txt"] }),
    )
    .await;
    assert!(text(&r).contains("hello from b"), "{}", text(&r));

    let patch = "*** Begin Patch\n*** Add File: made.txt\n+made on a\n*** End Patch\n";
    let r = call(
        &client,
        "apply_patch",
        json!({ "host": "a", "patch": patch }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(f.a.path("root/made.txt")).unwrap(),
        "made on a\n"
    );
    assert!(
        !f.hub.root().join("made.txt").exists(),
        "the patch landed on the hub"
    );

    // An interactive command, answered through write_stdin on the same machine.
    let r = call(
        &client,
        "exec_command",
        json!({ "host": "a", "cmd": "read line; echo \"got $line on $HOME\"", "yield_time_ms": 500 }),
    )
    .await;
    let session = crate::support::facts(&r)["session_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no session: {}", text(&r)));
    let r = call(
        &client,
        "write_stdin",
        json!({ "host": "a", "session_id": session, "chars": "hi\n", "yield_time_ms": 2000 }),
    )
    .await;
    let home_a = f.a.path("home").display().to_string();
    assert!(
        text(&r).contains(&format!("got hi on {home_a}")),
        "{}",
        text(&r)
    );

    // The hub's audit and the machine's hold the same call id.
    let hub_line = audit_of(&f.hub.path("state/audit.jsonl"))
        .into_iter()
        .rfind(|l| l["tool"] == "write_stdin" && l["phase"].is_null())
        .expect("the hub audited write_stdin");
    let id = hub_line["call"].as_str().unwrap().to_string();
    let joined = audit_of(&f.a.path("state/audit.jsonl"))
        .into_iter()
        .any(|l| {
            l["tool"] == "write_stdin"
                && l["labels"]
                    .as_array()
                    .is_some_and(|ls| ls.contains(&json!(["gantry/hub_call", id])))
        });
    assert!(
        joined,
        "no audit line of `a` carries the hub's call id {id}: {:?}",
        audit_of(&f.a.path("state/audit.jsonl"))
    );
    // A client cannot put its own hub call id on the hub's audit.
    let mut spoofed = rmcp::model::CallToolRequestParams::new("list_hosts");
    spoofed.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
        serde_json::Map::from_iter([("gantry/hub_call".to_string(), json!("SPOOFED"))]),
    )));
    client.call_tool(spoofed).await.unwrap();
    let hub_log = std::fs::read_to_string(f.hub.path("state/audit.jsonl")).unwrap();
    assert!(!hub_log.contains("SPOOFED"), "{hub_log}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn one_command_fans_out_and_each_machine_decides_for_itself() {
    let Some(f) = Fleet::new("") else { return };
    // b has exec off, the hub allows: b refuses, a runs.
    let client = f.hub.stdio(&["--connector", "hosts"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "hosts": ["a", "b"], "cmd": "echo \"home=$HOME\"" }),
    )
    .await;
    let t = text(&r);
    assert!(t.contains("── host a ──"), "{t}");
    assert!(
        t.contains(&format!("home={}", f.a.path("home").display())),
        "{t}"
    );
    let b_part = t.split("── host b ──").nth(1).unwrap_or_default();
    assert!(
        b_part.contains("PERMISSION_DENIED") && b_part.contains("host `b`"),
        "b's own exec = false must refuse, naming b: {t}"
    );
    let r = call(
        &client,
        "exec_command",
        json!({ "host": "b", "cmd": "echo hi" }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED: host `b`"),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();
    // What b refused, b audited.
    assert!(
        audit_of(&f.b.path("state/audit.jsonl"))
            .iter()
            .any(|l| l["tool"] == "exec_command" && l["decision"] == "deny"),
        "{:?}",
        audit_of(&f.b.path("state/audit.jsonl"))
    );
    drop(f.key);
}

#[tokio::test]
async fn a_hub_policy_forbids_a_tool_on_one_machine_only() {
    let Some(f) = Fleet::new("") else { return };
    let policies = f.hub.path("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(
        policies.join("hosts.cedar"),
        "@id(\"local.no_patches_on_a\")\n@reason(\"a is the build box: no edits there\")\nforbid (principal, action == Action::\"hosts_apply_patch\", resource == RemoteHost::\"a\");\n@id(\"local.b_unlisted\")\nforbid (principal, action == Action::\"list_hosts\", resource == RemoteHost::\"b\");\n",
    )
    .unwrap();
    let dir = policies.display().to_string();
    let client = f
        .hub
        .stdio(&["--connector", "hosts", "--policies", &dir])
        .await;
    // A machine the policies hide is named nowhere: not listed, not in a refusal.
    let listed = text(&call(&client, "list_hosts", json!({})).await);
    assert!(
        listed.contains("a: answers") && !listed.contains("b:"),
        "{listed}"
    );
    let r = call(&client, "read", json!({ "host": "zzz", "paths": ["."] })).await;
    assert!(text(&r).starts_with("NOT_FOUND"), "{}", text(&r));
    assert!(text(&r).contains("(hosts: a)"), "{}", text(&r));
    let patch = "*** Begin Patch\n*** Add File: p.txt\n+x\n*** End Patch\n";
    let r = call(
        &client,
        "apply_patch",
        json!({ "host": "a", "patch": patch }),
    )
    .await;
    assert!(text(&r).starts_with("PERMISSION_DENIED"), "{}", text(&r));
    assert!(text(&r).contains("no edits there"), "{}", text(&r));
    assert!(!f.a.path("root/p.txt").exists());
    // Refused at the hub: the call never reached a.
    assert!(
        !audit_of(&f.a.path("state/audit.jsonl"))
            .iter()
            .any(|l| l["tool"] == "apply_patch"),
        "{:?}",
        audit_of(&f.a.path("state/audit.jsonl"))
    );
    let r = call(
        &client,
        "apply_patch",
        json!({ "host": "b", "patch": patch }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(f.b.path("root/p.txt").exists());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_unknown_or_changed_host_key_is_refused_naming_the_command_that_pins_it() {
    if !sshd_here() {
        return;
    }
    let key = UserKey::new();
    let mut a = Remote::start(&key, "[permissions]\nexec = true\n");
    let hub = Sandbox::new();
    hub.config(&a.entry("a", &key, true));
    assert!(
        hub.check().contains("[hosts.a]: no SSH host key is pinned"),
        "{}",
        hub.check()
    );
    let client = hub.stdio(&["--connector", "hosts"]).await;
    let r = call(&client, "read", json!({ "host": "a", "paths": ["."] })).await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("gantry hosts add a"),
        "an unpinned key: {}",
        text(&r)
    );
    assert!(
        audit_of(&a.path("state/audit.jsonl")).is_empty(),
        "a was reached without a pinned key"
    );
    client.cancel().await.unwrap();

    pin(&hub, "a");
    a.rekey();
    let client = hub.stdio(&["--connector", "hosts"]).await;
    let r = call(&client, "read", json!({ "host": "a", "paths": ["."] })).await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED")
            && text(&r).contains("not the one gantry pinned")
            && text(&r).contains("gantry hosts add a"),
        "a changed key: {}",
        text(&r)
    );
    client.cancel().await.unwrap();
    // The CLI says the same, and pinning again (confirmed) makes it answer.
    let (code, said) = hosts_cli(&hub, &["check"]);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("gantry hosts add a"), "{said}");
    let (code, said) = hosts_cli(&hub, &["add", "a"]);
    assert_ne!(code, 0, "a key was pinned without a yes: {said}");
    pin(&hub, "a");
}

#[tokio::test]
async fn a_stopped_machine_fails_fast_and_the_other_keeps_answering() {
    let Some(mut f) = Fleet::new("") else { return };
    let client = f.hub.stdio(&["--connector", "hosts"]).await;
    let r = call(
        &client,
        "read",
        json!({ "host": "b", "paths": ["hello.txt"] }),
    )
    .await;
    assert!(text(&r).contains("hello from b"), "{}", text(&r));
    f.b.stop_sshd();
    let started = Instant::now();
    let r = call(
        &client,
        "read",
        json!({ "host": "b", "paths": ["hello.txt"] }),
    )
    .await;
    let first = started.elapsed();
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("host `b`"), "{}", text(&r));
    let r = call(
        &client,
        "read",
        json!({ "host": "b", "paths": ["hello.txt"] }),
    )
    .await;
    assert!(
        text(&r).contains("host `b`") && text(&r).contains("nothing answers"),
        "{}",
        text(&r)
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "a stopped machine took {first:?}, then {:?} in all",
        started.elapsed()
    );
    let r = call(
        &client,
        "read",
        json!({ "host": "a", "paths": ["hello.txt"] }),
    )
    .await;
    assert!(text(&r).contains("hello from a"), "{}", text(&r));
    let listed = call(&client, "list_hosts", json!({})).await;
    assert!(
        text(&listed).contains("b: does not answer"),
        "{}",
        text(&listed)
    );
    assert!(text(&listed).contains("a: answers"), "{}", text(&listed));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn nothing_is_left_running_on_a_machine_after_a_kill_or_when_the_hub_stops() {
    let Some(f) = Fleet::new("") else { return };
    let client = f.hub.stdio(&["--connector", "hosts"]).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "host": "a", "cmd": "sleep 3001", "yield_time_ms": 300 }),
    )
    .await;
    let session = crate::support::facts(&r)["session_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no session: {}", text(&r)));
    assert!(crate::support::alive("sleep 3001"));
    let r = call(
        &client,
        "write_stdin",
        json!({ "host": "a", "session_id": session, "kill": true }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    crate::support::gone("sleep 3001").await;

    let r = call(
        &client,
        "exec_command",
        json!({ "host": "a", "cmd": "sleep 3002", "yield_time_ms": 300 }),
    )
    .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(!f.a.processes().is_empty(), "a's gantry is not running");
    client.cancel().await.unwrap();
    let started = Instant::now();
    while !f.a.processes().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "left on a after the hub stopped: {:?}",
            f.a.processes()
                .iter()
                .map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!crate::support::alive("sleep 3002"));
}

#[tokio::test]
async fn hosts_are_added_listed_installed_and_removed_from_the_command_line() {
    if !sshd_here() {
        return;
    }
    let key = UserKey::new();
    let a = Remote::start(&key, "[permissions]\nexec = true\n");
    let hub = Sandbox::new();
    hub.config("");
    // `add NAME user@host` writes the entry, then pins and checks.
    let port = a.port.to_string();
    let identity = key.private().display().to_string();
    let (code, said) = hosts_cli(
        &hub,
        &[
            "add",
            "a",
            &format!("{}@127.0.0.1", user()),
            "--ssh-port",
            &port,
            "--identity-file",
            &identity,
            "--yes",
        ],
    );
    // No gantry on that machine's PATH under this name: pinned, and told so.
    assert!(said.contains("pinned 1 key(s)"), "{said}");
    assert_eq!(code, 1, "{said}");
    let config = std::fs::read_to_string(hub.path("config.toml")).unwrap();
    assert!(
        config.contains("[hosts.a]") && config.contains(&port),
        "{config}"
    );
    let (_, said) = hosts_cli(&hub, &["list"]);
    assert!(said.contains("1 key(s) pinned"), "{said}");

    // install copies this binary there, checked, and names it in the entry.
    let to = a.path("bin/gantry").display().to_string();
    let (code, said) = hosts_cli(&hub, &["install", "a", "--to", &to]);
    assert_eq!(code, 0, "{said}");
    let ours = std::fs::read(gantry()).unwrap();
    assert_eq!(std::fs::read(&to).unwrap(), ours, "the copy differs");
    assert!(said.contains(&remote::sha256_hex(&ours)), "{said}");
    let config = std::fs::read_to_string(hub.path("config.toml")).unwrap();
    assert!(config.contains(&format!("gantry = \"{to}\"")), "{config}");

    let (code, said) = hosts_cli(&hub, &["remove", "a"]);
    assert_eq!(code, 0, "{said}");
    let config = std::fs::read_to_string(hub.path("config.toml")).unwrap();
    assert!(!config.contains("[hosts.a]"), "{config}");
    let known = std::fs::read_to_string(hub.path("state/known_hosts")).unwrap_or_default();
    assert!(!known.contains(&port), "{known}");
}

#[tokio::test]
async fn read_only_mode_on_the_hub_stops_changes_on_every_machine() {
    let Some(f) = Fleet::new("read_only = true\n") else {
        return;
    };
    let client = f.hub.stdio(&["--connector", "hosts"]).await;
    let r = call(
        &client,
        "read",
        json!({ "host": "a", "paths": ["hello.txt"] }),
    )
    .await;
    assert!(text(&r).contains("hello from a"), "{}", text(&r));
    let patch = "*** Begin Patch\n*** Add File: ro.txt\n+x\n*** End Patch\n";
    let r = call(
        &client,
        "apply_patch",
        json!({ "host": "a", "patch": patch }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("read-only"),
        "{}",
        text(&r)
    );
    let r = call(
        &client,
        "exec_command",
        json!({ "hosts": ["a"], "cmd": "touch ro2" }),
    )
    .await;
    assert!(text(&r).starts_with("PERMISSION_DENIED"), "{}", text(&r));
    assert!(!f.a.path("root/ro.txt").exists() && !f.a.path("root/ro2").exists());
    client.cancel().await.unwrap();
}

/// The pid of the gantry serving `remote` (its `serve --stdio` process).
fn remote_gantry(remote: &Remote) -> u32 {
    remote
        .processes()
        .into_iter()
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("serve\0--stdio"))
        })
        .expect("the machine's gantry runs")
}

#[tokio::test]
async fn what_a_command_writes_to_its_gantrys_output_cannot_stall_the_hub() {
    let Some(f) = Fleet::new("") else { return };
    let client = f.hub.stdio(&["--connector", "hosts"]).await;
    let r = call(
        &client,
        "read",
        json!({ "host": "a", "paths": ["hello.txt"] }),
    )
    .await;
    assert!(text(&r).contains("hello from a"), "{}", text(&r));
    let pid = remote_gantry(&f.a);
    // A flood of lines that are not JSON-RPC, straight onto the channel to the hub.
    let started = Instant::now();
    let r = call(
        &client,
        "exec_command",
        json!({ "host": "a", "cmd": format!("exec yes X > /proc/{pid}/fd/1"), "yield_time_ms": 1000 }),
    )
    .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("host `a`"), "{}", text(&r));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let quick = Instant::now();
    let r = call(
        &client,
        "read",
        json!({ "host": "b", "paths": ["hello.txt"] }),
    )
    .await;
    assert!(text(&r).contains("hello from b"), "{}", text(&r));
    assert!(
        quick.elapsed() < Duration::from_secs(5),
        "b waited {:?}",
        quick.elapsed()
    );
    // The connection to a was dropped, and what ran there with it.
    let gone = Instant::now();
    while std::fs::metadata(format!("/proc/{pid}")).is_ok() {
        assert!(
            gone.elapsed() < Duration::from_secs(10),
            "a's gantry still runs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn two_entries_for_one_login_never_share_a_connection() {
    if !sshd_here() {
        return;
    }
    let key = UserKey::new();
    let limited = UserKey::new();
    let a = Remote::start(&key, "[permissions]\nexec = true\n");
    // The second key may only run a's gantry read-only: sshd forces that command for it.
    let dir = a.path("").display().to_string();
    let dir = dir.trim_end_matches('/');
    let forced = format!(
        "command=\"env HOME={dir}/home GANTRY_LOG=warn GANTRY_CONFIG={dir}/config.toml GANTRY_STATE_DIR={dir}/state GANTRY_ROOTS={dir}/root {} serve --stdio --connector core --read-only\" {}",
        gantry(),
        std::fs::read_to_string(limited.public()).unwrap()
    );
    let mut keys = std::fs::OpenOptions::new()
        .append(true)
        .open(a.path("authorized_keys"))
        .unwrap();
    std::io::Write::write_all(&mut keys, forced.as_bytes()).unwrap();
    let hub = Sandbox::new();
    hub.config(&format!(
        "{}{}",
        a.entry("a", &key, true),
        a.entry("ro", &limited, true)
    ));
    pin(&hub, "a");
    pin(&hub, "ro");
    let client = hub.stdio(&["--connector", "hosts"]).await;
    let r = call(&client, "read", json!({ "host": "a", "paths": ["."] })).await;
    assert!(!is_error(&r), "{}", text(&r));
    let patch = "*** Begin Patch\n*** Add File: ro.txt\n+x\n*** End Patch\n";
    let r = call(
        &client,
        "apply_patch",
        json!({ "host": "ro", "patch": patch }),
    )
    .await;
    assert!(
        text(&r).starts_with("PERMISSION_DENIED") && text(&r).contains("read-only"),
        "`ro` ran over `a`'s connection: {}",
        text(&r)
    );
    assert!(!a.path("root/ro.txt").exists());
    client.cancel().await.unwrap();
    // Removing one entry keeps the key the other still needs.
    let (code, said) = hosts_cli(&hub, &["remove", "ro"]);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("kept the machine's pinned keys: a"), "{said}");
    let (code, said) = hosts_cli(&hub, &["check", "a"]);
    assert_eq!(code, 0, "{said}");
}

#[tokio::test]
async fn a_refused_login_or_a_missing_gantry_is_said_as_such() {
    if !sshd_here() {
        return;
    }
    let key = UserKey::new();
    let stranger = UserKey::new();
    let a = Remote::start(&key, "[permissions]\nexec = true\n");
    let hub = Sandbox::new();
    let missing = a
        .entry("gone", &key, true)
        .replace(crate::support::gantry(), "/nonexistent/gantry");
    hub.config(&format!(
        "{}{}",
        a.entry("stranger", &stranger, true),
        missing
    ));
    let (code, said) = hosts_cli(&hub, &["add", "stranger", "--yes"]);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("refused the SSH login"), "{said}");
    let (code, said) = hosts_cli(&hub, &["add", "gone", "--yes"]);
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("/nonexistent/gantry") && said.contains("No such file"),
        "{said}"
    );
    let client = hub.stdio(&["--connector", "hosts"]).await;
    let r = call(
        &client,
        "read",
        json!({ "host": "stranger", "paths": ["."] }),
    )
    .await;
    assert!(text(&r).contains("refused the SSH login"), "{}", text(&r));
    client.cancel().await.unwrap();
}
