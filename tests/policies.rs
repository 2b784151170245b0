//! The policy set: strict validation of the shipped policies, and a temp copy whose edit
//! changes decisions of a running server.

use std::path::Path;

use crate::support::{Sandbox, call, facts, gantry, is_error, text};
use serde_json::json;

fn policies_dir() -> std::path::PathBuf {
    crate::support::workspace("policies")
}

fn copy_policies(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    // The user rules only: the base (generated, and policies/base/) is always loaded.
    for entry in std::fs::read_dir(policies_dir()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn the_shipped_policies_validate_strictly_and_every_one_has_a_unique_id() {
    let engine = server::policy_set::load(Some(&policies_dir()))
        .unwrap_or_else(|e| panic!("{}", e.join("\n")));
    let ids = engine.policy_ids();
    assert!(ids.contains(&"connector.core".to_string()), "{ids:?}");
    // Every permission a tool needs has its gate (one only policies read, such as
    // `kill_any`, gates no action).
    let needed = |p: &str| {
        generated::TOOLS
            .iter()
            .any(|t| t.requires.contains(&p) || t.operations.iter().any(|o| o.requires == p))
    };
    for p in generated::PERMISSIONS.iter().filter(|p| needed(p.name)) {
        assert!(
            ids.contains(&format!("permission.{}", p.name)),
            "no policy gates permission `{}`",
            p.name
        );
    }
}

#[tokio::test]
async fn editing_a_policy_in_a_temp_copy_changes_the_decision() {
    let sb = Sandbox::new();
    sb.write("secret/key.txt", "k");
    sb.write("open.txt", "o");
    let dir = sb.path("policies");
    copy_policies(&dir);
    let dir_arg = dir.display().to_string();

    let client = sb.stdio(&["--policies", &dir_arg]).await;
    let before = call(&client, "read", json!({ "paths": ["secret/key.txt"] })).await;
    assert_eq!(
        text(&before),
        "==> secret/key.txt (lines 1-1 of 1) <==\nk\n"
    );
    client.cancel().await.unwrap();

    let secret = sb.root().join("secret").canonicalize().unwrap();
    std::fs::write(
        dir.join("local.cedar"),
        format!(
            "@id(\"local.no_secrets\")\n@code(\"PATH_NOT_ALLOWED\")\n@reason(\"secrets are off limits\")\nforbid (principal, action, resource is Path)\nwhen {{ resource == Path::\"{}/key.txt\" }};\n",
            secret.display()
        ),
    )
    .unwrap();
    let client = sb.stdio(&["--policies", &dir_arg]).await;
    let after = call(
        &client,
        "read",
        json!({ "paths": ["secret/key.txt", "open.txt"] }),
    )
    .await;
    let entries = facts(&after)["entries"].clone();
    assert_eq!(entries[0]["error_code"], "PATH_NOT_ALLOWED");
    assert_eq!(entries[1]["kind"], "text");
    assert_eq!(
        text(&after),
        format!(
            "==> secret/key.txt (error: PATH_NOT_ALLOWED) <==\n[secret/key.txt: `read` denied: secrets are off limits (policy `local.no_secrets` in {}) (1 approved root(s))]\n==> open.txt (lines 1-1 of 1) <==\no\n",
            dir.join("local.cedar").display()
        ),
        "other paths are unaffected"
    );
    assert!(!is_error(&after), "one path was read");
    client.cancel().await.unwrap();
}

#[test]
fn an_invalid_policy_stops_the_server_naming_policy_file_and_line() {
    let sb = Sandbox::new();
    let dir = sb.path("policies");
    copy_policies(&dir);
    std::fs::write(
        dir.join("zz-broken.cedar"),
        "// A typo in an attribute name.\n@id(\"broken.typo\")\nforbid (principal, action, resource)\nunless { context.permissions.raed };\n",
    )
    .unwrap();
    let output = std::process::Command::new(gantry())
        .arg("serve")
        .arg("--stdio")
        .args(sb.args())
        .args(["--policies", &dir.display().to_string()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        output.stdout.is_empty(),
        "nothing on stdout: {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected = format!(
        "gantry: {}:4:10: policy `broken.typo`: ",
        dir.join("zz-broken.cedar").display()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(stderr.contains("raed"), "{stderr}");
}

#[test]
fn check_reports_every_problem_at_once() {
    let sb = Sandbox::new();
    let dir = sb.path("policies");
    copy_policies(&dir);
    std::fs::write(
        dir.join("zz-noid.cedar"),
        "permit (principal, action, resource);\n",
    )
    .unwrap();
    sb.config("[permissions]\nexecute = true\n");
    let output = std::process::Command::new(gantry())
        .arg("check")
        .args(sb.args())
        .args(["--policies", &dir.display().to_string()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("config.toml:2:1: unknown permission `execute`"),
        "{stderr}"
    );
    // The config error does not hide the policy error.
    assert!(
        stderr.contains("zz-noid.cedar:1:1: policy `policy0`: every policy needs an @id"),
        "{stderr}"
    );
    assert!(stderr.contains("gantry check: 2 problem(s)"), "{stderr}");

    // A clean setup passes and says what it checked.
    let sb = Sandbox::new();
    let output = std::process::Command::new(gantry())
        .arg("check")
        .args(sb.args())
        .args([
            "--surface",
            &crate::support::workspace("surface.toml")
                .display()
                .to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("ok: policies (built in): "), "{stdout}");
}

/// The base holds whatever the user rules say: a blanket permit, or no rules at all, opens
/// nothing the base forbids.
#[tokio::test]
async fn no_user_rule_can_open_what_the_base_forbids() {
    let sb = Sandbox::new();
    let dir = sb.path("policies");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("everything.cedar"),
        "@id(\"user.everything\")\npermit (principal, action, resource);\n",
    )
    .unwrap();
    let dir_arg = dir.display().to_string();

    // Connector scoping: a Core call can never reach a Desktop tool.
    let engine = std::sync::Arc::new(server::policy_set::load(Some(&dir)).unwrap());
    let snapshot = authz::Snapshot {
        platform: "windows",
        read_only: false,
        permissions: generated::PERMISSIONS
            .iter()
            .map(|p| (p.name, true))
            .collect(),
    };
    let core = authz::Gate::for_snapshot(engine, generated::core::NAME, &snapshot).unwrap();
    let denial = core
        .authorize(generated::desktop::actions::OBSERVE, &tool_api::Host, ())
        .unwrap_err();
    assert_eq!(
        denial.policy.map(|p| p.id).as_deref(),
        Some("connector_scope.desktop")
    );

    // A permission that is off stays off.
    sb.config("[permissions]\nexec = false\n");
    let client = sb.stdio(&["--policies", &dir_arg]).await;
    let r = call(&client, "exec_command", json!({ "cmd": "echo ran" })).await;
    assert!(crate::support::is_error(&r));
    assert!(
        crate::support::text(&r).contains("policy `permission.exec`"),
        "{}",
        crate::support::text(&r)
    );
    client.cancel().await.unwrap();

    // Read-only mode holds with an empty policy directory.
    let empty = sb.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    sb.config("");
    let client = sb
        .stdio(&["--read-only", "--policies", &empty.display().to_string()])
        .await;
    let patch = "*** Begin Patch\n*** Add File: new.txt\n+x\n*** End Patch";
    let r = call(&client, "apply_patch", json!({ "patch": patch })).await;
    assert!(crate::support::is_error(&r), "{}", crate::support::text(&r));
    assert!(!sb.root().join("new.txt").exists());
    client.cancel().await.unwrap();
}

#[test]
fn check_names_roots_and_state_and_warns_about_exposure_and_masked_permissions() {
    let sb = Sandbox::new();
    sb.config("host = \"0.0.0.0\"\n[permissions]\nscreen = true\n");
    let output = std::process::Command::new(gantry())
        .arg("check")
        .args(sb.args())
        // No display: the desktop permissions cannot work, and check says so.
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!(
            "approved root(s): {}",
            sb.root().canonicalize().unwrap().display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("state directory {}", sb.path("state").display())),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning: host 0.0.0.0 is not a loopback address"),
        "{stderr}"
    );
    if !cfg!(windows) {
        assert!(
            stderr.contains("warning: permission(s) ")
                && stderr.contains("`screen`")
                && stderr.contains("no desktop"),
            "{stderr}"
        );
    }
    // What reaches beyond files and commands, off by default and then on.
    if cfg!(target_os = "linux") {
        assert!(
            stdout.contains("desktop session: off (`host_display`)"),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains("services: none allowed ([services] allowed)"),
        "{stdout}"
    );
    sb.config("[permissions]\nhost_display = true\n[services]\nmanager = \"user\"\nallowed = [\"nginx\", \"redis\"]\n");
    let stdout = sb.check();
    if cfg!(target_os = "linux") {
        assert!(
            stdout.contains("desktop session: on (`host_display`)"),
            "{stdout}"
        );
        assert!(
            stdout.contains("services (the user's manager): nginx, redis"),
            "{stdout}"
        );
    }
}

/// Policy files are live: an edit in the `--policies` directory decides the next call, and a
/// file that stops validating refuses every call, naming file and line, until it is fixed.
#[tokio::test]
async fn policy_edits_apply_on_the_next_call_and_a_broken_file_refuses_every_call() {
    let sb = Sandbox::new();
    sb.write("open.txt", "o");
    let dir = sb.path("policies");
    std::fs::create_dir_all(&dir).unwrap();
    let client = sb.stdio(&["--policies", &dir.display().to_string()]).await;
    let read = || call(&client, "read", json!({ "paths": ["open.txt"] }));
    assert!(!crate::support::is_error(&read().await));

    let rule = dir.join("local.cedar");
    std::fs::write(
        &rule,
        "@id(\"local.no_reading\")\n@reason(\"no reading today\")\nforbid (principal, action == Action::\"read\", resource);\n",
    )
    .unwrap();
    let r = read().await;
    assert!(crate::support::is_error(&r));
    assert!(
        crate::support::text(&r).contains("no reading today"),
        "{}",
        crate::support::text(&r)
    );

    std::fs::write(&rule, "@id(\"local.typo\")\nforbid (principal, action, resource)\nunless { context.permissions.raed };\n").unwrap();
    let r = read().await;
    let refused = crate::support::text(&r);
    assert!(refused.contains("every call is refused"), "{refused}");
    assert!(
        refused.contains(&format!("{}:3:", rule.display())),
        "{refused}"
    );

    // An unrelated config edit does not drop the broken file from view.
    sb.config("# touched\n");
    assert!(crate::support::text(&read().await).contains("every call is refused"));

    std::fs::remove_file(&rule).unwrap();
    assert!(!crate::support::is_error(&read().await));
    client.cancel().await.unwrap();
}
