//! `[exec] confine = "roots"` (Linux, Landlock): commands write below the roots and their
//! private TMPDIR and nowhere else, read the system as usual, and the model is told.

use serde_json::json;

use crate::support::{Sandbox, call, facts, text};

use crate::support::command_output as output;

#[tokio::test]
async fn confined_commands_write_only_below_the_roots_and_their_tmpdir() {
    let sb = Sandbox::new();
    sb.config("[exec]\nconfine = \"roots\"\n");
    let client = sb.stdio(&[]).await;
    let tools = client.list_all_tools().await.unwrap();
    let exec = tools.iter().find(|t| t.name == "exec_command").unwrap();
    let described = exec.description.as_deref().unwrap_or("");
    assert!(
        described.contains("Confined: commands write only below the approved roots")
            && !described.contains("not confined"),
        "{described}"
    );

    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "echo in > inside.txt && cat inside.txt" }),
    )
    .await;
    assert_eq!(output(&r), "in\n", "{}", text(&r));
    assert!(sb.root().join("inside.txt").exists());

    // Outside the root: the sandbox's own directory, beside the root.
    let outside = sb.path("outside.txt");
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("echo out > '{}'", outside.display()) }),
    )
    .await;
    assert_ne!(facts(&r)["exit_code"], 0, "{}", text(&r));
    assert!(output(&r).contains("Permission denied"), "{}", text(&r));
    assert!(!outside.exists());
    // Nor remove, rename or make anything there.
    std::fs::write(sb.path("keep.txt"), "kept").unwrap();
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("rm -f '{0}/keep.txt'; mkdir '{0}/made'; mv '{0}/keep.txt' '{0}/moved.txt'; true", sb.path("").display()) }),
    )
    .await;
    assert_eq!(facts(&r)["exit_code"], 0, "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(sb.path("keep.txt")).unwrap(),
        "kept"
    );
    assert!(!sb.path("made").exists() && !sb.path("moved.txt").exists());

    // Reading the system and the temp directory work as usual.
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "test -r /usr/bin/env && ls /usr >/dev/null && f=$(mktemp) && echo tmp > \"$f\" && cat \"$f\"" }),
    )
    .await;
    assert_eq!(output(&r), "tmp\n", "{}", text(&r));

    // A confined command cannot move itself out of its session's cgroup.
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": "d=$(awk '/ - cgroup2 / {print $5; exit}' /proc/self/mountinfo); g=$(sed -n 's/^0:://p' /proc/self/cgroup); echo \"in $g\"; [ -n \"$d\" ] && { echo $$ > \"$d/cgroup.procs\" && echo escaped; }; sed -n 's/^0:://p' /proc/self/cgroup" }),
    )
    .await;
    let out = output(&r);
    assert!(!out.contains("escaped"), "{out}");
    if out.contains("/gantry.") {
        assert!(out.contains("Permission denied"), "{out}");
        let lines: Vec<&str> = out
            .lines()
            .filter(|l| !l.contains("Permission denied"))
            .collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert_eq!(lines[0].strip_prefix("in "), Some(lines[1]), "{out}");
    }
    client.cancel().await.unwrap();
}

/// Starts the server with `extra` flags, expects it to refuse, and returns what it said.
async fn refused_at_start(sb: &Sandbox, extra: &[&str]) -> String {
    let out = sb
        .serve(std::path::Path::new(crate::support::gantry()), extra)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn an_unknown_confinement_is_refused_at_start_naming_the_setting() {
    let sb = Sandbox::new();
    sb.config("[exec]\nconfine = \"maybe\"\n");
    let err = refused_at_start(&sb, &["--stdio"]).await;
    assert!(
        err.contains("[exec] confine `maybe` is not \"off\" or \"roots\""),
        "{err}"
    );
}

/// Confinement that could be undone is refused: here a root holds gantry's config, state and
/// the HOME whose profile gantry runs unconfined; a confined command could change them.
#[tokio::test]
async fn confinement_is_refused_when_a_root_holds_what_gantry_runs_or_trusts() {
    let sb = Sandbox::new();
    sb.config("[exec]\nconfine = \"roots\"\n");
    std::fs::create_dir_all(sb.path("home")).unwrap();
    let whole = sb.path("").canonicalize().unwrap();
    let err = refused_at_start(&sb, &["--stdio", "--root", &whole.display().to_string()]).await;
    assert!(
        err.contains("[exec] confine = \"roots\" cannot hold"),
        "{err}"
    );
    for what in [
        "the config file",
        "the state directory",
        "HOME, whose login profile",
    ] {
        assert!(err.contains(what), "{what}: {err}");
    }
}

/// Roots nested one in the other: a confined command replaces the inner root with a link to a
/// directory outside; the next confined command must not be granted where the link points.
#[tokio::test]
async fn a_root_swapped_for_a_link_by_a_command_grants_nothing_outside() {
    let sb = Sandbox::new();
    let outer = sb.root();
    let inner = outer.join("proj");
    std::fs::create_dir_all(&inner).unwrap();
    let outside = sb.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    sb.config("[exec]\nconfine = \"roots\"\n");
    let mut cmd = sb.serve(std::path::Path::new(crate::support::gantry()), &["--stdio"]);
    cmd.args(["--root", &inner.display().to_string()]);
    let (_, client) = crate::support::stdio_client(cmd).await;
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("mv proj proj.real && ln -s '{}' proj && echo swapped", outside.display()) }),
    )
    .await;
    assert!(output(&r).contains("swapped"), "{}", text(&r));
    let victim = outside.join("victim.txt");
    let r = call(
        &client,
        "exec_command",
        json!({ "cmd": format!("echo escaped > '{}'", victim.display()) }),
    )
    .await;
    assert!(
        !victim.exists(),
        "a confined command wrote outside: {}",
        text(&r)
    );
    client.cancel().await.unwrap();
}
