//! Commands get the user's login environment from a snapshot: the profile's PATH plus what it
//! dropped from the server's, its functions and aliases; a profile edit is picked up; a
//! profile that hangs costs one bounded wait and is said, never a hung command.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{Sandbox, call, gantry, stdio_client, text};

use crate::support::command_output as output;

/// A server whose HOME (the sandbox's) has `profile` as its bash login profile, started the
/// way a client would start it: with its own PATH.
async fn serve_with_profile(
    sb: &Sandbox,
    profile: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    sb.write_home(".bash_profile", profile);
    let mut cmd = sb.serve(Path::new(gantry()), &["--stdio"]);
    cmd.env("SHELL", "/bin/bash")
        .env("PATH", "/opt/from-client/bin:/usr/bin:/bin");
    stdio_client(cmd).await.1
}

#[tokio::test]
async fn the_profiles_path_functions_and_aliases_reach_commands() {
    let sb = Sandbox::new();
    let client = serve_with_profile(
        &sb,
        "export PATH=/usr/local/bin:/usr/bin:/bin\nexport FROM_PROFILE=yes\ngreet() { echo \"hello $1\"; }\nalias ll='echo listing'\n",
    )
    .await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo \"$PATH\"; echo \"$FROM_PROFILE\"; greet you; ll", "env": { "FROM_PROFILE": "from the call" } }),
    )
    .await;
    assert_eq!(
        output(&r),
        "/usr/local/bin:/usr/bin:/bin:/opt/from-client/bin\nfrom the call\nhello you\nlisting\n",
        "{}",
        text(&r)
    );
    // No login shell ran for the command: the snapshot stands in for it.
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "shopt -q login_shell && echo login || echo plain" }),
    )
    .await;
    assert_eq!(output(&r), "plain\n", "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_edited_profile_is_picked_up_by_the_next_command() {
    let sb = Sandbox::new();
    let client = serve_with_profile(&sb, "export STAGE=one\n").await;
    let r = call(&client, "exec_command", json!({ "cmd": "echo $STAGE" })).await;
    assert_eq!(output(&r), "one\n", "{}", text(&r));
    // A different size as well as a new mtime, so the change shows even on a coarse clock.
    sb.write_home(".bash_profile", "export STAGE=two-after-edit\n");
    let r = call(&client, "exec_command", json!({ "cmd": "echo $STAGE" })).await;
    assert_eq!(output(&r), "two-after-edit\n", "{}", text(&r));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_profile_that_hangs_costs_one_bounded_wait_and_is_reported() {
    let sb = Sandbox::new();
    let client = serve_with_profile(&sb, "export EARLY=1\nsleep 600\n").await;
    let started = Instant::now();
    let r = call(&client, "exec_command", json!({ "cmd": "echo ran" })).await;
    assert_eq!(output(&r), "ran\n", "{}", text(&r));
    assert!(
        text(&r).contains("did not finish within 10 s; ran without the profile"),
        "{}",
        text(&r)
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    // The next command does not wait again.
    let started = Instant::now();
    let r = call(&client, "exec_command", json!({ "cmd": "echo again" })).await;
    assert_eq!(output(&r), "again\n", "{}", text(&r));
    assert!(started.elapsed() < Duration::from_secs(5));
    client.cancel().await.unwrap();
}

/// The pids of live processes whose command line mentions `needle`.
#[cfg(target_os = "linux")]
fn pids_mentioning(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmd)
                .contains(needle)
                .then_some(pid)
        })
        .collect()
}

/// After a command, the next shell is already running (snapshot sourced, waiting); the next
/// command runs in that very process, in its own directory and environment, and nothing of
/// one command's shell state reaches the next.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_next_command_runs_in_a_shell_started_ahead_of_it() {
    let sb = Sandbox::new();
    let client = serve_with_profile(&sb, "greet() { echo \"hello $1\"; }\n").await;
    let fifo_dir = sb.path("state").join("shell");
    let needle = format!("{}/warm-", fifo_dir.display());
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "export LEAK=1; cd /tmp" }),
    )
    .await;
    assert_eq!(crate::support::facts(&r)["exit_code"], 0, "{}", text(&r));
    let deadline = Instant::now() + Duration::from_secs(5);
    let waiting = loop {
        let pids = pids_mentioning(&needle);
        if !pids.is_empty() || Instant::now() > deadline {
            break pids;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(waiting.len(), 1, "one warm shell, not {waiting:?}");
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo $$; pwd; echo ${LEAK:-none}; greet warm; exit 3", "env": { "X": "y" } }),
    )
    .await;
    let root = sb.root().canonicalize().unwrap();
    assert_eq!(
        output(&r),
        format!("{}\n{}\nnone\nhello warm\n", waiting[0], root.display()),
        "{}",
        text(&r)
    );
    assert_eq!(crate::support::facts(&r)["exit_code"], 3);
    // A batch runs in a warm shell too, with its per-item codes.
    let r = call(
        &client,
        "exec_command",
        json!({ "cmds": ["true", "false", "echo done"] }),
    )
    .await;
    let f = crate::support::facts(&r);
    assert_eq!(f["items"][1]["exit_code"], 1, "{}", text(&r));
    assert!(output(&r).contains("done"), "{}", text(&r));
    client.cancel().await.unwrap();
    // The server is gone: so is its warm shell.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pids_mentioning(&needle).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(pids_mentioning(&needle).is_empty());
}

/// Commands back to back grow the pool of ready shells (bounded), each command still runs in
/// one of them, and switching `exec` off ends every one.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn commands_back_to_back_are_met_by_a_bounded_pool_of_ready_shells() {
    let sb = Sandbox::new();
    let client = serve_with_profile(&sb, "export A=1\n").await;
    let needle = format!("{}/warm-", sb.path("state").join("shell").display());
    let mut most = 0;
    let mut ran_in_a_ready_shell = 0;
    for i in 0..20 {
        let ready = pids_mentioning(&needle);
        most = most.max(ready.len());
        let r = call(&client, "exec_command", json!({ "cmd": "echo $$" })).await;
        let pid: u32 = output(&r)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("call {i}: {}", text(&r)));
        ran_in_a_ready_shell += usize::from(ready.contains(&pid));
    }
    // Once the run is seen, up to three shells are kept ready while it lasts.
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids_mentioning(&needle).len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready = pids_mentioning(&needle).len();
    most = most.max(ready);
    assert_eq!(ready, 3, "ready shells after a run of commands");
    assert!(most <= 3, "never more than three ready shells, saw {most}");
    assert!(
        ran_in_a_ready_shell >= 10,
        "only {ran_in_a_ready_shell} of 20 commands ran in a shell started ahead of them"
    );
    sb.config("[permissions]\nexec = false\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pids_mentioning(&needle).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        pids_mentioning(&needle),
        Vec::<u32>::new(),
        "ready shells outlived exec"
    );
    client.cancel().await.unwrap();
}

/// A command handed to a ready shell is not left on disk while it runs: its file is emptied
/// once the shell has read it.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_running_commands_text_does_not_stay_on_disk() {
    let sb = Sandbox::new();
    let client = serve_with_profile(&sb, "export A=1\n").await;
    let dir = sb.path("state").join("shell");
    let command_files = || -> Vec<(String, u64)> {
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".cmd"))
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect()
    };
    // The first command starts cold and leaves a ready shell behind it.
    call(&client, "exec_command", json!({ "cmd": "true" })).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids_mentioning(&format!("{}/warm-", dir.display())).is_empty()
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo secret-value-1234; sleep 30", "yield_time_ms": 300 }),
    )
    .await;
    assert!(
        crate::support::facts(&r)["session_id"].is_i64(),
        "still running: {}",
        text(&r)
    );
    let files = command_files();
    assert!(
        !files.is_empty(),
        "the command did not run in a ready shell"
    );
    assert!(
        files.iter().all(|(_, len)| *len == 0),
        "command text left on disk: {files:?}"
    );
    client.cancel().await.unwrap();
}

/// Back to back, every command's output is whole, whether its shell was warm or not.
#[tokio::test]
async fn back_to_back_commands_each_return_their_whole_output() {
    let sb = Sandbox::new();
    let client = serve_with_profile(&sb, "export A=1\n").await;
    for i in 0..60 {
        let r = call(
            &client,
            "exec_command",
            json!({ "cmd": format!("echo hi {i}") }),
        )
        .await;
        assert_eq!(output(&r), format!("hi {i}\n"), "call {i}: {:?}", text(&r));
    }
    client.cancel().await.unwrap();
}
