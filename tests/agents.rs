//! Worker agents end to end: a real `gantry serve`, a real MCP client as the prime, and a
//! scripted agent CLI (`tests/agents/fake_agent.py`) as the workers, which speaks MCP to the
//! endpoint gantry gives it, reads files, calls finish and can be resumed.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::json;

use crate::support::{HttpServer, Sandbox, call, facts, is_error, text};

type Client = RunningService<RoleClient, ()>;

fn fake_agent() -> PathBuf {
    crate::support::workspace("tests/agents/fake_agent.py")
}

/// A config with one worker kind, `fake`, run by the scripted agent, given gantry's
/// endpoint through a private MCP configuration file (as Claude Code takes it).
fn configure(sb: &Sandbox, slots: usize, ceiling: u64) {
    configure_with(sb, slots, ceiling, "--mcp-config", "{mcp_config}", "");
}

/// The same, gantry reached through `flag placeholder`, `extra` appended to the config.
fn configure_with(
    sb: &Sandbox,
    slots: usize,
    ceiling: u64,
    flag: &str,
    placeholder: &str,
    extra: &str,
) {
    // Markers in `extra` (a comment in the config) choose variants.
    let turn_timeout = if extra.contains("TURN_TIMEOUT_3S") {
        "3s"
    } else {
        "10m"
    };
    let prompt = if extra.contains("PROMPT_FILE") {
        r#""--prompt-file", "{prompt_file}""#
    } else {
        r#""{prompt}""#
    };
    let agent = fake_agent().canonicalize().unwrap();
    let agent = agent.display();
    let state = sb.path("agent-state");
    let state = state.display();
    sb.config(&format!(
        r#"[agents]
slots = {slots}
ceiling_tokens = {ceiling}
finish_grace = "10s"
turn_timeout = "{turn_timeout}"

[agents.kinds.fake]
start = ["python3", "{agent}", "{flag}", "{placeholder}", {prompt}]
resume = ["python3", "{agent}", "{flag}", "{placeholder}", "--resume", "{{conversation}}", {prompt}]
conversation = '"conversation": "([^"]+)"'
tokens = ['"tokens": (\d+)']
env = {{ FAKE_AGENT_STATE = "{state}" }}
{extra}"#
    ));
}

/// The prime's view of the run: the facts of one `status` and the text it returned.
struct Status {
    facts: serde_json::Value,
    text: String,
}

impl Status {
    fn state(&self, worker: &str) -> String {
        self.worker(worker)["state"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    fn worker(&self, worker: &str) -> serde_json::Value {
        self.facts["workers"]
            .as_array()
            .and_then(|ws| ws.iter().find(|w| w["id"] == worker).cloned())
            .unwrap_or(serde_json::Value::Null)
    }
}

async fn status(prime: &Client) -> Status {
    let r = call(prime, "agents", json!({ "action": "status" })).await;
    assert!(!is_error(&r), "{}", text(&r));
    Status {
        facts: facts(&r),
        text: text(&r),
    }
}

/// Polls `status` until `done` holds (at most 30 s); returns the last status and every
/// result text handed in meanwhile.
async fn until(prime: &Client, results: &mut String, done: impl Fn(&Status) -> bool) -> Status {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = status(prime).await;
        if let Some((_, handed)) = s
            .text
            .split_once("Results handed in since the last status:")
        {
            results.push_str(handed);
        }
        if done(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out; last status:\n{}\nresults so far:\n{results}",
            s.text
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// Calls `agents` as `prime`; the call must succeed.
async fn agents_ok(prime: &Client, args: serde_json::Value) -> rmcp::model::CallToolResult {
    let r = call(prime, "agents", args).await;
    assert!(!is_error(&r), "{}", text(&r));
    r
}

/// Calls `agents` as `prime`; the call must be refused, saying `says`.
async fn agents_refused(prime: &Client, args: serde_json::Value, says: &str) {
    let r = call(prime, "agents", args).await;
    assert!(is_error(&r) && text(&r).contains(says), "{}", text(&r));
}

/// Stops `server` as a user's Ctrl-C does (SIGTERM) and waits for it.
async fn stop(server: &mut HttpServer) {
    let pid = server.child.id().unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(15), server.child.wait()).await;
}

async fn serve(sb: &Sandbox) -> (HttpServer, Client) {
    let server = sb.http(&[]).await;
    let prime = server.client("core").await;
    (server, prime)
}

/// The pids of processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(marker)
        {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn three_tasks_with_two_slots_start_two_and_the_third_when_a_slot_frees() {
    let sb = Sandbox::new();
    configure(&sb, 2, 400_000);
    sb.write("notes.txt", "hello from the notes\n");
    let go = sb.root().join("go1");
    let (_server, prime) = serve(&sb).await;
    let r = agents_ok(
        &prime,
        json!({
            "action": "spawn",
            "kind": "fake",
            "context": "You work on the notes.",
            "tasks": [
                format!("WAIT {}\nREAD notes.txt", go.display()),
                "WAIT /nonexistent/never\nNOFINISH",
                "READ notes.txt",
            ],
        }),
    )
    .await;
    let first = facts(&r);
    assert_eq!(first["free_slots"], 0, "{}", text(&r));
    let states: Vec<&str> = first["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["working", "working", "waiting"], "{}", text(&r));
    assert!(text(&r).contains("w3  waiting for a slot"), "{}", text(&r));

    // w1 finishes once released; its slot goes to w3, which reads and finishes too.
    std::fs::write(&go, "").unwrap();
    let mut results = String::new();
    let s = until(&prime, &mut results, |s| {
        s.state("w1") == "asleep" && s.state("w3") == "asleep"
    })
    .await;
    assert_eq!(s.state("w2"), "working");
    assert_eq!(s.facts["free_slots"], 1);
    for w in ["w1", "w3"] {
        let handed = results
            .split(&format!("--- {w} ---"))
            .nth(1)
            .unwrap_or_else(|| panic!("no result from {w} in {results}"));
        assert!(
            handed.contains("read=") && handed.contains("hello from the notes"),
            "{w}: {handed}"
        );
        assert!(handed.contains("worker=r-"), "{w}: {handed}");
        assert!(s.worker(w)["conversation"].as_str().is_some());
    }
    // The runs' lock is private like the rest of the state directory.
    let lock = std::fs::metadata(sb.path("state/agents/owner.lock")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&lock.permissions()) & 0o777,
        0o600
    );
    // A worker's calls are audited under its own id, proven by its endpoint.
    let audit = std::fs::read_to_string(sb.path("state").join("audit.jsonl")).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"read\"") && l.contains("gantry/worker")),
        "{audit}"
    );
}

#[tokio::test]
async fn finish_puts_a_worker_to_sleep_and_a_message_wakes_it_in_its_own_conversation() {
    let sb = Sandbox::new();
    configure(&sb, 2, 400_000);
    sb.write("a.txt", "first file\n");
    sb.write("b.txt", "second file\n");
    let (_server, prime) = serve(&sb).await;
    agents_ok(
        &prime,
        json!({ "action": "spawn", "tasks": ["READ a.txt"] }),
    )
    .await;
    let mut results = String::new();
    let s = until(&prime, &mut results, |s| s.state("w1") == "asleep").await;
    let conversation = s.worker("w1")["conversation"].as_str().unwrap().to_string();
    assert_eq!(s.worker("w1")["tokens"], 1000);
    assert!(results.contains("first file"), "{results}");
    assert!(results.contains("turn=1"), "{results}");
    // Its calls are recorded as a conversation of their own, under its id.
    let found = call(
        &prime,
        "session",
        json!({ "action": "search", "query": "first file", "source": "gantry" }),
    )
    .await;
    let hits = text(&found);
    let worker_session = hits
        .lines()
        .find(|l| l.ends_with("result of T1 read"))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("{hits}"))
        .to_string();
    let read = call(
        &prime,
        "session",
        json!({ "action": "read", "session_id": worker_session }),
    )
    .await;
    let page = text(&read);
    assert!(
        page.contains("T1 read") && page.contains("gantry/worker=r-") && page.contains("/w1]"),
        "{page}"
    );
    assert!(
        !page.contains("\"action\":\"spawn\""),
        "the prime's calls are apart: {page}"
    );

    let r = agents_ok(
        &prime,
        json!({ "action": "message", "to": ["w1"], "message": "READ b.txt" }),
    )
    .await;
    assert!(text(&r).contains("Woke w1"), "{}", text(&r));
    let mut results = String::new();
    let s = until(&prime, &mut results, |s| {
        s.state("w1") == "asleep" && s.worker("w1")["tokens"] == 2000
    })
    .await;
    assert_eq!(s.worker("w1")["conversation"], conversation.as_str());
    assert!(results.contains("second file"), "{results}");
    assert!(
        results.contains(&format!("conversation={conversation}")) && results.contains("turn=2"),
        "{results}"
    );
    // Spawn is once per run.
    let again = call(
        &prime,
        "agents",
        json!({ "action": "spawn", "tasks": ["x"] }),
    )
    .await;
    assert!(is_error(&again));
    assert!(text(&again).contains("once per run"), "{}", text(&again));
}

#[tokio::test]
async fn a_batch_naming_a_finished_worker_wakes_none_and_the_ceiling_makes_a_finish_the_last() {
    let sb = Sandbox::new();
    configure(&sb, 2, 2500);
    let (_server, prime) = serve(&sb).await;
    agents_ok(&prime, json!({ "action": "spawn", "tasks": ["TOKENS 1000", "TOKENS 3000", "TOKENS 3000\nNOFINISH"] })).await;
    let mut results = String::new();
    // w2's conversation passed the ceiling during its turn: that turn was not cut short
    // (its result is in), but its finish was its last. w3 passed it too and did not finish:
    // there is no turn after the one that crossed it either.
    let s = until(&prime, &mut results, |s| {
        s.state("w1") == "asleep" && s.state("w2") == "finished" && s.state("w3") == "finished"
    })
    .await;
    assert!(results.contains("--- w2 ---"), "{results}");
    assert!(!results.contains("--- w3 ---"), "{results}");
    assert!(s.text.contains("past the ceiling of 2,500"), "{}", s.text);

    let r = call(
        &prime,
        "agents",
        json!({ "action": "message", "to": ["w1", "w2"], "message": "TOKENS 1" }),
    )
    .await;
    assert!(is_error(&r));
    let said = text(&r);
    assert!(
        said.contains("no message was sent (all or none)")
            && said.contains("w2 is finished for good"),
        "{said}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = status(&prime).await;
    assert_eq!(s.state("w1"), "asleep", "w1 must not have been woken");
    assert_eq!(s.worker("w1")["tokens"], 1000);

    // w1 now crosses the ceiling in its next turn: that finish is its last too.
    agents_ok(
        &prime,
        json!({ "action": "message", "to": ["w1"], "message": "TOKENS 2000" }),
    )
    .await;
    let mut results = String::new();
    until(&prime, &mut results, |s| s.state("w1") == "finished").await;
    assert!(results.contains("--- w1 ---"), "{results}");
    agents_refused(
        &prime,
        json!({ "action": "message", "to": ["w1"], "message": "more" }),
        "w1 is finished for good",
    )
    .await;
}

#[tokio::test]
async fn a_worker_cannot_act_as_the_prime_or_another_worker_and_its_secret_works_only_for_it() {
    let sb = Sandbox::new();
    configure(&sb, 2, 400_000);
    let leak = sb.root().join("leaked-url");
    let go = sb.root().join("go");
    let (_server, prime) = serve(&sb).await;
    agents_ok(
        &prime,
        json!({
            "action": "spawn",
            "tasks": [format!(
                "SPAWN\nSTATUS\nFINISH_AS w2\nWRONG_SECRET\nLEAK {}\nWAIT {}",
                leak.display(),
                go.display()
            )],
        }),
    )
    .await;

    // The worker's own URL, used by a program outside its process tree (this test), is
    // refused even with the right secret.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !leak.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker never wrote its URL"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let url = std::fs::read_to_string(&leak).unwrap();
    let forged = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(
            json!({
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": { "name": "agents", "arguments": { "action": "finish", "message": "forged by an outsider" } }
            })
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    let why = forged.text().await.unwrap();
    assert!(why.contains("answers only its own program"), "{why}");

    // The prime cannot hand in a result: finish belongs to workers.
    let r = call(
        &prime,
        "agents",
        json!({ "action": "finish", "message": "from the prime" }),
    )
    .await;
    assert!(is_error(&r));
    assert!(
        text(&r).contains("agents.finish_is_a_workers"),
        "{}",
        text(&r)
    );

    std::fs::write(&go, "").unwrap();
    let mut results = String::new();
    until(&prime, &mut results, |s| s.state("w1") == "asleep").await;
    let handed = results.split("--- w1 ---").nth(1).unwrap_or("");
    for (line, want) in [
        ("spawn=refused", "agents.prime_only"),
        ("status=refused", "agents.prime_only"),
        ("finish_as=refused", "a worker finishes only itself"),
        ("wrong_secret=HTTP 404", ""),
    ] {
        let found = handed.lines().find(|l| l.starts_with(line));
        assert!(
            found.is_some_and(|l| l.contains(want)),
            "{line} … {want} not in {handed}"
        );
    }
    assert!(!results.contains("forged"), "{results}");
}

#[tokio::test]
async fn ending_the_run_on_the_control_page_leaves_no_process_behind() {
    let sb = Sandbox::new();
    configure(&sb, 2, 400_000);
    let marker = format!("gantry-test-orphan-{}", std::process::id());
    let (server, prime) = serve(&sb).await;
    let page = server.admin.clone().unwrap();
    agents_ok(
        &prime,
        json!({
            "action": "spawn",
            "tasks": [format!("DETACH {marker}\nWAIT /nonexistent/never")],
        }),
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while processes_with(&marker).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker never left its process"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let said = crate::admin::post_form(&page, "agents/end", &[]).await;
    assert!(said.contains("was ended: 1 worker program"), "{said}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_with(&marker);
        if left.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(processes_with("fake_agent.py").iter().all(|pid| {
        // Only another test's workers may remain, never this run's.
        !std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| {
            String::from_utf8_lossy(&e).contains(&*sb.path("agent-state").to_string_lossy())
        })
    }));
    let s = status(&prime).await;
    assert_eq!(s.state("w1"), "finished");
    assert!(s.text.contains("the user ended the run"), "{}", s.text);
}

#[tokio::test]
async fn a_run_outlives_a_restart_asleep_and_wakes_in_its_conversation() {
    let sb = Sandbox::new();
    configure(&sb, 2, 400_000);
    sb.write("a.txt", "kept across restarts\n");
    let (mut server, prime) = serve(&sb).await;
    agents_ok(
        &prime,
        json!({ "action": "spawn", "tasks": ["READ a.txt", "WAIT /nonexistent/never"] }),
    )
    .await;
    let mut results = String::new();
    let s = until(&prime, &mut results, |s| s.state("w1") == "asleep").await;
    let conversation = s.worker("w1")["conversation"].as_str().unwrap().to_string();
    assert_eq!(s.state("w2"), "working");
    drop(prime);
    // A clean stop (SIGTERM), as a user's Ctrl-C.
    stop(&mut server).await;

    let (_server, prime) = serve(&sb).await;
    let s = status(&prime).await;
    assert_eq!(s.state("w1"), "asleep", "{}", s.text);
    assert_eq!(s.state("w2"), "asleep", "{}", s.text);
    assert!(s.text.contains("interrupted"), "{}", s.text);
    assert_eq!(s.worker("w1")["conversation"], conversation.as_str());
    agents_ok(
        &prime,
        json!({ "action": "message", "to": ["w1"], "message": "READ a.txt" }),
    )
    .await;
    let mut results = String::new();
    until(&prime, &mut results, |s| {
        s.state("w1") == "asleep" && s.worker("w1")["tokens"] == 2000
    })
    .await;
    assert!(
        results.contains(&format!("conversation={conversation}"))
            && results.contains("turn=2")
            && results.contains("kept across restarts"),
        "{results}"
    );
}

#[tokio::test]
async fn without_a_kind_spawn_says_what_to_do() {
    let sb = Sandbox::new();
    // No kinds declared, and a PATH with no agent CLI on it.
    sb.config("");
    let mut cmd = sb.serve(
        std::path::Path::new(crate::support::gantry()),
        &["--port", "0"],
    );
    cmd.env("PATH", "/usr/bin:/bin");
    let server = crate::support::http_server(cmd).await;
    let prime = server.client("core").await;
    if which("codex") || which("claude") {
        eprintln!(
            "!! SKIPPED, checked nothing: without_a_kind_spawn_says_what_to_do: an agent CLI is in /usr/bin"
        );
        return;
    }
    let r = call(
        &prime,
        "agents",
        json!({ "action": "spawn", "tasks": ["x"] }),
    )
    .await;
    assert!(is_error(&r));
    let said = text(&r);
    assert!(
        said.contains("none of the agent CLIs gantry knows (codex, claude) is on PATH")
            && said.contains("[agents.kinds.NAME]"),
        "{said}"
    );
}

fn which(program: &str) -> bool {
    ["/usr/bin", "/bin"]
        .iter()
        .any(|d| std::path::Path::new(d).join(program).exists())
}

/// Drives a real agent CLI when one is installed; says loudly that it did not otherwise.
#[tokio::test]
async fn a_real_agent_cli_hands_in_a_result_when_one_is_installed() {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = ["codex", "claude"]
        .into_iter()
        .find(|p| std::env::split_paths(&path).any(|d| d.join(p).is_file()));
    let Some(kind) = found else {
        eprintln!(
            "!! SKIPPED, checked nothing: a_real_agent_cli_hands_in_a_result_when_one_is_installed: neither `codex` nor `claude` is on PATH here"
        );
        return;
    };
    let sb = Sandbox::new();
    sb.config("");
    sb.write("word.txt", "periwinkle\n");
    let mut cmd = sb.serve(
        std::path::Path::new(crate::support::gantry()),
        &["--port", "0"],
    );
    // The CLI needs its own login, which lives in the real home.
    if let Some(home) = std::env::var_os("HOME") {
        cmd.env("HOME", home);
    }
    let server = crate::support::http_server(cmd).await;
    let prime = server.client("core").await;
    agents_ok(&prime, json!({
            "action": "spawn",
            "kind": kind,
            "tasks": ["Read word.txt with gantry's `read` tool and hand in the word it holds with `finish`."],
        })).await;
    let mut results = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    loop {
        let s = status(&prime).await;
        if let Some((_, h)) = s
            .text
            .split_once("Results handed in since the last status:")
        {
            results.push_str(h);
        }
        if s.state("w1") == "asleep" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{}", s.text);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert!(results.contains("periwinkle"), "{results}");
}

/// A stdio server (how desktop clients start gantry) runs workers the same way: its one
/// thread serves the client and the workers' endpoint alike.
#[tokio::test]
async fn a_stdio_server_runs_workers_too() {
    let sb = Sandbox::new();
    // The prompt through a private file ({prompt_file}), out of the command line.
    configure_with(
        &sb,
        2,
        400_000,
        "--mcp-config",
        "{mcp_config}",
        "# PROMPT_FILE\n",
    );
    sb.write("a.txt", "over stdio\n");
    let prime = sb.stdio(&[]).await;
    agents_ok(
        &prime,
        json!({ "action": "spawn", "tasks": ["READ a.txt", "READ a.txt"] }),
    )
    .await;
    let mut results = String::new();
    until(&prime, &mut results, |s| {
        s.state("w1") == "asleep" && s.state("w2") == "asleep"
    })
    .await;
    assert_eq!(results.matches("over stdio").count(), 2, "{results}");
    // The turn's files (prompt, MCP configuration) went with it.
    let left: Vec<String> = std::fs::read_dir(sb.path("state").join("agents"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("prompt-") || n.starts_with("mcp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A worker waiting for its slot starts only when a spawn would be allowed now: not after a
/// restart with `exec` off (a worker runs its own tools), and then as soon as it is back on.
/// The secret reaches it as a bearer token from its environment, never in its command line.
#[tokio::test]
async fn a_waiting_worker_starts_only_when_it_may_and_its_secret_stays_out_of_argv() {
    let sb = Sandbox::new();
    configure_with(&sb, 1, 400_000, "--endpoint", "{mcp_endpoint}", "");
    let go = sb.root().join("go");
    sb.write("a.txt", "bearer works\n");
    let (mut server, prime) = serve(&sb).await;
    agents_ok(
        &prime,
        json!({ "action": "spawn", "tasks": [format!("WAIT {}", go.display()), "READ a.txt"] }),
    )
    .await;
    // No command line of this run holds the secret (only the bare endpoint URL).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let workers = loop {
        let found = processes_with("fake_agent.py");
        let ours: Vec<u32> = found
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| {
                    String::from_utf8_lossy(&e).contains(&*sb.path("agent-state").to_string_lossy())
                })
            })
            .collect();
        if !ours.is_empty() {
            break ours;
        }
        assert!(tokio::time::Instant::now() < deadline, "no worker process");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for pid in workers {
        let cmdline =
            String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap())
                .replace('\0', " ");
        let environ =
            String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/environ")).unwrap())
                .into_owned();
        let token = environ
            .split('\0')
            .find_map(|kv| kv.strip_prefix("GANTRY_WORKER_TOKEN="))
            .expect("the worker has its token")
            .to_string();
        assert!(token.len() >= 40);
        assert!(!cmdline.contains(&token), "{cmdline}");
        assert!(cmdline.contains("/mcp"), "{cmdline}");
    }
    // Its conversation is recorded as soon as its output names it, before the turn ends.
    let mut results = String::new();
    until(&prime, &mut results, |s| {
        s.worker("w1")["conversation"].is_string()
    })
    .await;
    drop(prime);
    stop(&mut server).await;

    // Restarted with exec off: w2 still waits, saying why; w1 was interrupted.
    configure_with(
        &sb,
        1,
        400_000,
        "--endpoint",
        "{mcp_endpoint}",
        "[permissions]\nexec = false\n",
    );
    let (_server, prime) = serve(&sb).await;
    let s = status(&prime).await;
    assert_eq!(s.state("w1"), "asleep", "{}", s.text);
    assert_eq!(s.state("w2"), "waiting", "{}", s.text);
    assert!(s.text.contains("starting it is refused now"), "{}", s.text);
    assert!(
        s.text.contains("agents.workers_need_exec") || s.text.contains("`exec`"),
        "{}",
        s.text
    );
    agents_refused(
        &prime,
        json!({ "action": "message", "to": ["w1"], "message": "x" }),
        "needs the `exec` permission too",
    )
    .await;

    // exec back on: the next status starts it, and it reaches gantry with its bearer token.
    configure_with(&sb, 1, 400_000, "--endpoint", "{mcp_endpoint}", "");
    let mut results = String::new();
    until(&prime, &mut results, |s| s.state("w2") == "asleep").await;
    assert!(results.contains("bearer works"), "{results}");
}

/// Two servers on one state directory (each stdio client starts its own): the runs belong
/// to the first that used them, and the other says so instead of writing over its record.
#[tokio::test]
async fn a_second_server_on_the_same_state_directory_does_not_take_the_runs() {
    let sb = Sandbox::new();
    configure(&sb, 2, 400_000);
    let (_first, prime) = serve(&sb).await;
    status(&prime).await;
    let (_second, other) = serve(&sb).await;
    let r = call(
        &other,
        "agents",
        json!({ "action": "spawn", "tasks": ["x"] }),
    )
    .await;
    assert!(is_error(&r));
    assert!(
        text(&r).contains("belong to another gantry server"),
        "{}",
        text(&r)
    );
    // A prompt longer than a command line may be is refused before anything starts.
    let r = call(
        &prime,
        "agents",
        json!({ "action": "spawn", "context": "'".repeat(60_000), "tasks": ["x"] }),
    )
    .await;
    assert!(is_error(&r));
    assert!(
        text(&r).contains("context and tasks[0]: the prompt makes a command line"),
        "{}",
        text(&r)
    );
    let s = status(&prime).await;
    assert!(s.text.starts_with("No run yet"), "{}", s.text);
}

/// A turn that never ends is ended at `turn_timeout`, so it cannot hold its slot forever.
#[tokio::test]
async fn a_turn_past_its_timeout_is_ended_and_frees_its_slot() {
    let sb = Sandbox::new();
    configure_with(
        &sb,
        1,
        400_000,
        "--mcp-config",
        "{mcp_config}",
        "# TURN_TIMEOUT_3S\n",
    );
    let (_server, prime) = serve(&sb).await;
    agents_ok(
        &prime,
        json!({ "action": "spawn", "tasks": ["WAIT /nonexistent/never", "TOKENS 5"] }),
    )
    .await;
    let mut results = String::new();
    let s = until(&prime, &mut results, |s| {
        s.state("w1") == "asleep" && s.state("w2") == "asleep"
    })
    .await;
    assert!(
        s.text.contains("the turn ran past turn_timeout = 3s"),
        "{}",
        s.text
    );
    assert!(results.contains("--- w2 ---"), "{results}");
}

/// `gantry check` warns of a kind that reads well but would fail at its first spawn.
#[tokio::test]
async fn check_warns_of_a_kind_that_cannot_start() {
    let sb = Sandbox::new();
    sb.config(
        r#"[agents.kinds.broken]
start = ["no-such-agent-cli", "{mcp_config}", "{prompt}"]
resume = ["no-such-agent-cli", "{mcp_config}", "{conversation}", "{prompt}"]
conversation = 'id=(\w+)'
workdir = "/etc"
"#,
    );
    let said = sb.check();
    assert!(
        said.contains("worker kind `broken`: its program `no-such-agent-cli` is not on PATH"),
        "{said}"
    );
    assert!(
        said.contains("worker kind `broken`: its workdir /etc is outside the approved roots"),
        "{said}"
    );
}
