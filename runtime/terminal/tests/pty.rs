//! Real PTYs, real shells, real process trees.

#![cfg(test)]
#![cfg(unix)]

use std::time::Duration;

use terminal::{Commands, Config, Registry, Run};

fn registry(dir: &std::path::Path, max: usize) -> Registry {
    Registry::new(Config {
        max_sessions: max,
        idle_timeout: Duration::from_secs(600),
        spill_dir: dir.join("spill"),
        spill_cap: 16 << 20,
        snapshot_dir: None,
        warm_shell: false,
        launcher: Vec::new(),
        cgroup: true,
    })
}

/// A private HOME, so login shells never read (or, killed mid-way, leave locks in) the real one.
fn home(dir: &std::path::Path) -> Vec<(String, String)> {
    vec![("HOME".into(), dir.display().to_string())]
}

const OWNER: &str = "core";

fn run(cmd: &str, dir: &std::path::Path) -> Run {
    Run {
        commands: Commands::One(cmd.into()),
        cwd: dir.to_path_buf(),
        env: home(dir),
        env_remove: Vec::new(),
        owner: OWNER.into(),
        spill_hint: Default::default(),
    }
}

/// Live (non-zombie) processes whose command line contains `marker`: (process group,
/// command line).
fn processes_with(marker: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            // A process that exited between the two reads is not counted.
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // After the command name: state, ppid, pgrp.
            let fields: Vec<&str> = stat
                .rfind(')')
                .and_then(|i| stat.get(i + 2..))
                .unwrap_or("")
                .split(' ')
                .collect();
            if fields.len() < 3 {
                continue;
            }
            let zombie = fields.first() == Some(&"Z");
            if cmd.contains(marker) && !zombie {
                out.push((fields.get(2).unwrap_or(&"").to_string(), cmd));
            }
        }
    }
    out
}

/// Command lines of the live processes that mention `marker`.
fn alive_with(marker: &str) -> Vec<String> {
    processes_with(marker).into_iter().map(|(_, c)| c).collect()
}

/// How many process groups (one per session) have a live process mentioning `marker`.
/// Counted by group because whether the shell stays as a parent of the command depends on
/// the shell (bash execs a lone command, dash forks it).
fn groups_with(marker: &str) -> usize {
    let groups: std::collections::BTreeSet<String> =
        processes_with(marker).into_iter().map(|(g, _)| g).collect();
    groups.len()
}

#[tokio::test]
async fn a_quick_command_returns_its_output_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let o = r
        .exec(
            run("echo hi; exit 3", dir.path()),
            Duration::from_secs(10),
            10_000,
        )
        .await
        .unwrap();
    assert_eq!(o.output.text, "hi\n");
    assert_eq!((o.exit_code, o.session_id), (Some(3), None));
    assert_eq!(r.live(), 0);
}

#[tokio::test]
async fn an_interactive_program_is_answered_through_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let o = r
        .exec(
            run("printf 'name? '; read n; echo \"hello $n\"", dir.path()),
            Duration::from_millis(300),
            10_000,
        )
        .await
        .unwrap();
    let id = o.session_id.expect("still waiting for input");
    assert_eq!(o.output.text, "name? ");
    let o = r
        .write_stdin(OWNER, id, "gantry\n", Duration::from_secs(5), 10_000)
        .await
        .unwrap();
    // The terminal echoes what was typed, as a terminal does.
    assert_eq!(o.output.text, "gantry\nhello gantry\n");
    assert_eq!(o.exit_code, Some(0));
    assert!(
        matches!(r.write_stdin(OWNER, id, "", Duration::from_millis(10), 100).await, Err(terminal::TerminalError::UnknownSession(i)) if i == id)
    );
}

/// A session id is a 53-bit secret of the connector that started it: another connector
/// neither reaches nor ends it, and is told the same as for an id that never existed.
#[tokio::test]
async fn sessions_answer_only_to_their_owner_and_ids_are_wide() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let o = r
            .exec(
                run("read n; echo got $n", dir.path()),
                Duration::from_millis(50),
                1000,
            )
            .await
            .unwrap();
        ids.push(o.session_id.expect("waits for input"));
    }
    assert!(ids.iter().all(|id| *id < 1 << 53), "{ids:?}");
    // Three draws all below 2^32 would happen about once in 2^63 runs.
    assert!(ids.iter().any(|id| *id >= 1 << 32), "{ids:?}");
    let stranger = r
        .write_stdin("desktop", ids[0], "x\n", Duration::from_millis(10), 100)
        .await;
    assert!(matches!(stranger, Err(terminal::TerminalError::UnknownSession(i)) if i == ids[0]));
    assert!(r.kill("desktop", ids[0], 100).await.is_err());
    let o = r
        .write_stdin(OWNER, ids[0], "owner\n", Duration::from_secs(5), 1000)
        .await
        .unwrap();
    assert!(o.output.text.contains("got owner"), "{:?}", o.output.text);
    for id in &ids[1..] {
        r.kill(OWNER, *id, 100).await.unwrap();
    }
}

#[tokio::test]
async fn an_empty_poll_returns_as_soon_as_there_is_output() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let o = r
        .exec(
            run("sleep 0.5; echo first; sleep 2; echo second", dir.path()),
            Duration::from_millis(250),
            10_000,
        )
        .await
        .unwrap();
    let id = o.session_id.unwrap();
    let o = r
        .write_stdin(OWNER, id, "", Duration::from_secs(20), 10_000)
        .await
        .unwrap();
    assert_eq!(o.output.text, "first\n");
    assert!(o.wall < Duration::from_secs(2), "{:?}", o.wall);
    assert_eq!(o.session_id, Some(id));
    let o = r
        .write_stdin(OWNER, id, "", Duration::from_secs(20), 10_000)
        .await
        .unwrap();
    assert_eq!(o.output.text, "second\n");
    r.shutdown();
}

#[tokio::test]
async fn a_batch_runs_in_one_shell_and_reports_every_item() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let cmds = vec![
        "X=42; cd /".to_string(),
        "echo \"x=$X\"; false".to_string(),
        "pwd".to_string(),
    ];
    let o = r
        .exec(
            Run {
                commands: Commands::Batch(cmds),
                cwd: dir.path().to_path_buf(),
                env: home(dir.path()),
                env_remove: Vec::new(),
                owner: OWNER.into(),
                spill_hint: Default::default(),
            },
            Duration::from_secs(10),
            10_000,
        )
        .await
        .unwrap();
    assert_eq!(
        o.output.text,
        "$ X=42; cd /\n[exit 0]\n$ echo \"x=$X\"; false\nx=42\n[exit 1]\n$ pwd\n/\n[exit 0]\n"
    );
    assert_eq!(o.items, [(1, 0), (2, 1), (3, 0)]);
    assert_eq!(o.exit_code, Some(1));
}

#[tokio::test]
async fn control_characters_and_invalid_utf8_are_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let o = r
        .exec(
            run(r"printf '\033[31mred\033[0m \377 bell\a\n'", dir.path()),
            Duration::from_secs(10),
            10_000,
        )
        .await
        .unwrap();
    assert_eq!(o.output.text, "red \u{fffd} bell\n");
}

#[tokio::test]
async fn fifty_megabytes_stay_bounded_with_a_correct_spill_file() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let o = r
        .exec(
            run(
                "head -c 50000000 /dev/zero | tr '\\0' 'x'; echo; echo END",
                dir.path(),
            ),
            Duration::from_secs(30),
            4000,
        )
        .await
        .unwrap();
    assert_eq!(o.exit_code, Some(0));
    assert!(o.output.truncated);
    assert_eq!(o.output.total_bytes, 50_000_000 + 1 + 4);
    assert!(
        o.output.text.ends_with("\nEND\n"),
        "{}",
        &o.output.text[o.output.text.len() - 50..]
    );
    assert!(o.output.text.len() < 4200);
    let file = o.output.file.clone().unwrap();
    assert!(o.output.file_cut);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 16 << 20);
    assert!(std::fs::read(&file).unwrap().iter().all(|b| *b == b'x'));
}

#[tokio::test]
async fn killing_a_session_ends_a_detached_grandchild_too() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let marker = "317.0421";
    // The grandchild starts its own session (setsid) and would survive a process-group kill.
    let cmd = format!("setsid sleep {marker} & sleep {marker}");
    let o = r
        .exec(run(&cmd, dir.path()), Duration::from_millis(300), 1000)
        .await
        .unwrap();
    let id = o.session_id.unwrap();
    // The shell, its child and the detached grandchild.
    assert!(alive_with(marker).len() >= 2, "{:?}", alive_with(marker));
    let o = r.kill(OWNER, id, 1000).await.unwrap();
    assert!(o.exit_code.is_some() && o.signaled, "{o:?}");
    assert_eq!(alive_with(marker), Vec::<String>::new());
}

#[tokio::test]
async fn a_finished_shell_leaves_no_background_process() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let marker = "318.0421";
    let o = r
        .exec(
            run(&format!("(sleep {marker} &) ; echo started"), dir.path()),
            Duration::from_secs(10),
            1000,
        )
        .await
        .unwrap();
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(alive_with(marker), Vec::<String>::new());
}

#[tokio::test]
async fn the_registry_is_bounded_and_says_which_session_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 64);
    let marker = "319.0421";
    let mut ids = Vec::new();
    for _ in 0..64 {
        let o = r
            .exec(
                run(&format!("sleep {marker}"), dir.path()),
                Duration::from_millis(0),
                100,
            )
            .await
            .unwrap();
        ids.push(o.session_id.unwrap());
    }
    assert_eq!(r.live(), 64);
    // Touch the first one so the second becomes the least recently used.
    r.write_stdin(OWNER, ids[0], "", Duration::from_millis(0), 100)
        .await
        .unwrap();
    let o = r
        .exec(
            run(&format!("sleep {marker}"), dir.path()),
            Duration::from_millis(0),
            100,
        )
        .await
        .unwrap();
    assert_eq!(r.live(), 64);
    assert_eq!(o.notes.len(), 1, "{:?}", o.notes);
    assert!(
        o.notes[0].starts_with(&format!("session {} (idle ", ids[1])),
        "{:?}",
        o.notes
    );
    assert!(
        o.notes[0].ends_with(" s) was ended to stay within 64 live sessions"),
        "{:?}",
        o.notes
    );
    assert_eq!(groups_with(marker), 64);
    r.shutdown();
    assert_eq!(r.live(), 0);
    assert_eq!(alive_with(marker), Vec::<String>::new());
}

#[tokio::test]
async fn idle_sessions_are_reaped() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::new(Config {
        max_sessions: 8,
        idle_timeout: Duration::from_millis(200),
        spill_dir: dir.path().join("spill"),
        spill_cap: 1 << 20,
        snapshot_dir: None,
        warm_shell: false,
        launcher: Vec::new(),
        cgroup: true,
    });
    let marker = "320.0421";
    let o = r
        .exec(
            run(
                &format!("setsid sleep {marker} & sleep {marker}"),
                dir.path(),
            ),
            Duration::from_millis(100),
            100,
        )
        .await
        .unwrap();
    let id = o.session_id.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(r.reap_idle().await, [id]);
    assert_eq!(alive_with(marker), Vec::<String>::new());
}

/// Ending a session lets its processes clean up first (SIGHUP and SIGTERM, then SIGKILL after
/// a grace): a lock file removed by a trap is gone afterwards. Killing at once left such locks
/// behind (a login shell's `pyenv rehash` lock made every later shell wait a minute).
#[tokio::test]
async fn ending_a_session_lets_exit_handlers_run() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), 8);
    let lock = dir.path().join("lock");
    let o = r
        .exec(
            run(
                "touch lock; trap 'rm -f lock; exit 0' HUP TERM; echo ready; sleep 30 & wait",
                dir.path(),
            ),
            Duration::from_millis(500),
            1000,
        )
        .await
        .unwrap();
    assert!(o.output.text.contains("ready"), "{:?}", o.output.text);
    assert!(lock.exists());
    let id = o.session_id.expect("still running");
    r.kill(OWNER, id, 1000).await.unwrap();
    assert!(!lock.exists(), "the trap did not run");
}
