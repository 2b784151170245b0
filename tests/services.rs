//! `service.status` and `service.control` against a real systemd user manager: systemd 252
//! from Debian, started for the test as `systemd --user` on a private D-Bus session bus, in a
//! mount namespace of its own where `/run/systemd/system` exists (systemd starts a user
//! manager only on a machine booted with systemd; this one was not). The units are the
//! sandbox's own, under its HOME.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Sandbox, call, is_error, text};

/// A systemd user manager of the test's own, with its D-Bus session bus; both end with it.
struct UserManager {
    runtime: std::path::PathBuf,
    systemd: std::process::Child,
    bus: std::process::Child,
}

impl UserManager {
    /// Starts one whose units live under `home`, or says why it cannot.
    fn start(sb: &Sandbox) -> Result<UserManager, String> {
        let runtime = sb.path("run");
        std::fs::create_dir_all(&runtime).map_err(|e| e.to_string())?;
        let bus_address = format!("unix:path={}/bus", runtime.display());
        let bus = std::process::Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile"])
            .arg(format!("--address={bus_address}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("dbus-daemon: {e}"))?;
        let socket = runtime.join("bus");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // The user manager (and so its bus connection) comes up only where
        // /run/systemd/system says systemd booted the machine: a private mount namespace
        // gives it that, and nothing outside sees it.
        let systemd = std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(
                "mount -t tmpfs tmpfs /run/systemd && mkdir /run/systemd/system \
                 && exec /lib/systemd/systemd --user",
            )
            .env("HOME", sb.path("home"))
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("DBUS_SESSION_BUS_ADDRESS", &bus_address)
            .env_remove("XDG_CONFIG_HOME")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("unshare: {e}"))?;
        let mut manager = UserManager {
            runtime,
            systemd,
            bus,
        };
        // Its private socket appears once it runs; its bus name a moment later.
        let private = manager.runtime.join("systemd/private");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !private.exists() {
            if let Ok(Some(status)) = manager.systemd.try_wait() {
                let mut why = String::new();
                if let Some(mut e) = manager.systemd.stderr.take() {
                    use std::io::Read as _;
                    let _ = e.read_to_string(&mut why);
                }
                return Err(format!("systemd --user ended ({status}): {}", why.trim()));
            }
            if Instant::now() > deadline {
                return Err("systemd --user did not come up within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(manager)
    }

    /// What a server reaching this manager needs in its environment.
    fn env(&self) -> [(&'static str, String); 2] {
        [
            ("XDG_RUNTIME_DIR", self.runtime.display().to_string()),
            (
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}/bus", self.runtime.display()),
            ),
        ]
    }
}

impl Drop for UserManager {
    fn drop(&mut self) {
        // SIGTERM: the manager stops its units (and their processes) before it ends.
        let pid = self.systemd.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.systemd.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.systemd.kill();
        let _ = self.systemd.wait();
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

fn unit(sb: &Sandbox, name: &str, body: &str) {
    sb.write_home(&format!(".config/systemd/user/{name}.service"), body);
}

async fn shell(
    sb: &Sandbox,
    manager: &UserManager,
    extra: &[&str],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut cmd = sb.serve(Path::new(crate::support::gantry()), &["--stdio"]);
    cmd.args(["--connector", "shell"]).args(extra);
    for (k, v) in manager.env() {
        cmd.env(k, v);
    }
    crate::support::stdio_client(cmd).await.1
}

fn service(r: &rmcp::model::CallToolResult) -> Value {
    assert!(!is_error(r), "{}", text(r));
    r.structured_content.clone().unwrap_or_default()
}

fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rfind(')').and_then(|i| s.get(i + 2..i + 3)) != Some("Z"))
}

/// Status reads what the manager says; start, reload, restart and stop each wait for their
/// job and answer the state after (a main process that really runs, then a new one, then
/// none); a job the manager fails says so; an allowed name with no unit is NOT_FOUND; a
/// service the config does not allow is refused before the manager hears of it; a name that
/// is no service name is refused naming `name`; without `service_control` only status is
/// listed; and the README's example policy narrows to one service by name.
#[tokio::test]
async fn services_are_read_and_driven_through_a_real_systemd_user_manager() {
    let sb = Sandbox::new();
    let marker = 50_000 + std::process::id() % 10_000;
    unit(
        &sb,
        "nginx",
        &format!(
            "[Unit]\nDescription=the probe web server\n[Service]\nExecStart=/bin/sleep {marker}1\nExecReload=/bin/true\n"
        ),
    );
    unit(
        &sb,
        "postgresql",
        &format!("[Service]\nExecStart=/bin/sleep {marker}2\n"),
    );
    unit(
        &sb,
        "broken",
        "[Service]\nType=oneshot\nExecStart=/bin/false\n",
    );
    // Another name for a unit [services] does not allow.
    std::os::unix::fs::symlink(
        "hidden.service",
        sb.path("home/.config/systemd/user/web.service"),
    )
    .unwrap();
    unit(
        &sb,
        "hidden",
        &format!("[Service]\nExecStart=/bin/sleep {marker}4\n"),
    );
    // A service whose program lies in the root, where the model writes.
    let script = sb.root().join("serve.sh");
    let ran = sb.path("scripted-ran");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch {}\nexec sleep {marker}3\n", ran.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    unit(
        &sb,
        "scripted",
        &format!("[Service]\nExecStart={}\n", script.display()),
    );
    let manager = match UserManager::start(&sb) {
        Ok(m) => m,
        Err(why) => {
            crate::support::cannot_check(&format!("no systemd user manager here: {why}"));
            return;
        }
    };
    sb.config(
        "[services]\nmanager = \"user\"\nallowed = [\"nginx\", \"broken\", \"absent\", \"postgresql\", \"web\", \"scripted\"]\n",
    );
    let client = shell(&sb, &manager, &[]).await;

    // The manager takes its bus name a moment after it starts.
    let deadline = Instant::now() + Duration::from_secs(20);
    let first = loop {
        let r = call(&client, "service.status", json!({ "name": "nginx" })).await;
        if !is_error(&r) || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let s = service(&first)["service"].clone();
    assert_eq!(s["name"], "nginx.service", "{s}");
    assert_eq!(s["manager"], "user", "{s}");
    assert_eq!(s["state"], "stopped", "{s}");
    assert_eq!(s["detail"], "inactive (dead)", "{s}");
    assert_eq!(s["description"], "the probe web server", "{s}");
    assert_eq!(s["starts"], "static", "{s}");
    assert!(s.get("pid").is_none(), "{s}");

    let r = call(
        &client,
        "service.control",
        json!({ "name": "nginx.service", "action": "start" }),
    )
    .await;
    let out = service(&r);
    assert_eq!(out["result"], "done", "{out}");
    assert_eq!(out["service"]["state"], "running", "{out}");
    let pid = out["service"]["pid"].as_i64().expect("a main process");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains(&format!("{marker}1")),
        "pid {pid} is not the service's sleep"
    );
    let s = service(&call(&client, "service.status", json!({ "name": "nginx" })).await);
    assert_eq!(s["service"]["pid"], pid, "{s}");
    assert_eq!(s["service"]["detail"], "active (running)", "{s}");

    let out = service(
        &call(
            &client,
            "service.control",
            json!({ "name": "nginx", "action": "reload" }),
        )
        .await,
    );
    assert_eq!(out["result"], "done", "{out}");
    assert_eq!(
        out["service"]["pid"], pid,
        "a reload keeps the process: {out}"
    );

    let out = service(
        &call(
            &client,
            "service.control",
            json!({ "name": "nginx", "action": "restart" }),
        )
        .await,
    );
    assert_eq!(out["result"], "done", "{out}");
    let restarted = out["service"]["pid"].as_i64().expect("a main process");
    assert_ne!(restarted, pid, "{out}");
    assert!(!alive(pid), "the old process outlived the restart");

    let out = service(
        &call(
            &client,
            "service.control",
            json!({ "name": "nginx", "action": "stop" }),
        )
        .await,
    );
    assert_eq!(out["result"], "done", "{out}");
    assert_eq!(out["service"]["state"], "stopped", "{out}");
    assert!(!alive(restarted), "the process outlived the stop");

    // A job the manager fails.
    let out = service(
        &call(
            &client,
            "service.control",
            json!({ "name": "broken", "action": "start" }),
        )
        .await,
    );
    assert_eq!(out["result"], "failed", "{out}");
    assert_eq!(out["service"]["state"], "failed", "{out}");

    // Refusals, none of which reaches the manager or starts anything.
    for (tool, args, code, names) in [
        (
            "service.status",
            json!({ "name": "absent" }),
            "NOT_FOUND",
            "`absent`",
        ),
        (
            "service.control",
            json!({ "name": "absent", "action": "start" }),
            "NOT_FOUND",
            "`absent`",
        ),
        (
            "service.status",
            json!({ "name": "sshd" }),
            "COMMAND_NOT_ALLOWED",
            "name `sshd`: `service_status` denied: the service is not allowed under [services]",
        ),
        (
            "service.control",
            json!({ "name": "other", "action": "start" }),
            "COMMAND_NOT_ALLOWED",
            "name `other`: `service_control:start` denied: the service is not allowed under [services]",
        ),
        (
            "service.status",
            json!({ "name": "../nginx" }),
            "INVALID_INPUT",
            "name:",
        ),
        (
            "service.status",
            json!({ "name": "web" }),
            "COMMAND_NOT_ALLOWED",
            "name: `web` is another name of `hidden.service`",
        ),
        (
            "service.control",
            json!({ "name": "web", "action": "start" }),
            "COMMAND_NOT_ALLOWED",
            "name: `web` is another name of `hidden.service`",
        ),
        (
            "service.control",
            json!({ "name": "scripted", "action": "start" }),
            "COMMAND_NOT_ALLOWED",
            "serve.sh, inside an approved root",
        ),
        (
            "service.control",
            json!({ "name": "nginx", "action": "kill" }),
            "INVALID_INPUT",
            "action",
        ),
    ] {
        let r = call(&client, tool, args.clone()).await;
        assert!(
            text(&r).starts_with(code) && text(&r).contains(names),
            "{tool} {args}: {}",
            text(&r)
        );
    }
    assert!(!ran.exists(), "the refused service's program ran");
    assert!(!crate::support::alive(&format!("sleep {marker}4")));
    client.cancel().await.unwrap();

    // A manager that reads units from inside a root reads what the model writes: nothing it
    // holds is driven.
    let units = sb.path("home/.config/systemd/user");
    let client = shell(&sb, &manager, &["--root", units.to_str().unwrap()]).await;
    let r = call(
        &client,
        "service.control",
        json!({ "name": "nginx", "action": "start" }),
    )
    .await;
    assert!(
        text(&r).starts_with("COMMAND_NOT_ALLOWED") && text(&r).contains("inside an approved root"),
        "{}",
        text(&r)
    );
    assert!(!crate::support::alive(&format!("sleep {marker}1")));
    client.cancel().await.unwrap();

    // No service allowed: neither tool is listed, and a call is refused.
    sb.config("[services]\nmanager = \"user\"\n");
    let client = shell(&sb, &manager, &[]).await;
    let names = crate::support::tool_names(&client).await;
    assert!(
        !names.iter().any(|n| n.starts_with("service.")),
        "{names:?}"
    );
    let r = call(&client, "service.status", json!({ "name": "nginx" })).await;
    assert!(text(&r).starts_with("PERMISSION_DENIED"), "{}", text(&r));
    client.cancel().await.unwrap();

    // service_control off: status stays, control goes.
    sb.config(
        "[permissions]\nservice_control = false\n[services]\nmanager = \"user\"\nallowed = [\"nginx\"]\n",
    );
    let client = shell(&sb, &manager, &[]).await;
    let names = crate::support::tool_names(&client).await;
    assert!(names.contains(&"service.status".to_string()), "{names:?}");
    assert!(!names.contains(&"service.control".to_string()), "{names:?}");
    let r = call(
        &client,
        "service.control",
        json!({ "name": "nginx", "action": "start" }),
    )
    .await;
    assert!(text(&r).starts_with("PERMISSION_DENIED"), "{}", text(&r));
    // A changed [services] refuses every call until gantry restarts.
    sb.config(
        "[permissions]\nservice_control = false\n[services]\nmanager = \"user\"\nallowed = [\"nginx\", \"postgresql\"]\n",
    );
    let r = call(&client, "service.status", json!({ "name": "nginx" })).await;
    assert!(
        is_error(&r) && text(&r).contains("[services] changed in the config file"),
        "{}",
        text(&r)
    );
    client.cancel().await.unwrap();

    // The README's example policy, as written there: one service, whatever [services] allows.
    let example = crate::support::readme_cedar_example("local.one_app");
    let policies = sb.path("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(policies.join("local.cedar"), example).unwrap();
    sb.config("[services]\nmanager = \"user\"\nallowed = [\"nginx\", \"postgresql\"]\n");
    let client = shell(
        &sb,
        &manager,
        &["--policies", &policies.display().to_string()],
    )
    .await;
    let r = call(
        &client,
        "service.control",
        json!({ "name": "postgresql", "action": "start" }),
    )
    .await;
    assert!(
        text(&r).contains("only nginx's service may be seen or driven"),
        "{}",
        text(&r)
    );
    assert!(!crate::support::alive(&format!("sleep {marker}2")));
    let out = service(
        &call(
            &client,
            "service.control",
            json!({ "name": "nginx", "action": "start" }),
        )
        .await,
    );
    assert_eq!(out["service"]["state"], "running", "{out}");
    client.cancel().await.unwrap();
    drop(manager);
    // The manager's end stopped what it ran.
    crate::support::gone(&format!("sleep {marker}1")).await;
}
