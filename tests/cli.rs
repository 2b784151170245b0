//! The command line as a new user meets it: typos get a suggestion, a bad value names where
//! it came from, and failures to start say what to do.

use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::support::{Sandbox, gantry};

fn run(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(gantry())
        .args(args)
        .args(sb.args())
        .envs(env.iter().copied())
        .env("HOME", sb.path("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn a_mistyped_flag_or_command_gets_the_right_one_suggested() {
    let sb = Sandbox::new();
    let (code, said) = run(&sb, &["serve", "--readonly"], &[]);
    assert_eq!(code, Some(2));
    assert!(
        said.contains("a similar argument exists: '--read-only'"),
        "{said}"
    );
    let out = Command::new(gantry()).arg("server").output().unwrap();
    let said = String::from_utf8(out.stderr).unwrap();
    assert!(
        said.contains("a similar subcommand exists: 'serve'"),
        "{said}"
    );
}

#[test]
fn help_says_what_gantry_is_and_lists_its_commands() {
    let out = Command::new(gantry()).arg("--help").output().unwrap();
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        said.starts_with("The gantry server: serves the generated surface over MCP"),
        "{said}"
    );
    for command in ["serve", "check", "config", "token", "audit", "admin"] {
        assert!(
            said.contains(&format!("\n  {command} ")),
            "{command}: {said}"
        );
    }
}

#[test]
fn a_bad_value_from_the_environment_names_the_variable() {
    let sb = Sandbox::new();
    let (code, said) = run(&sb, &["serve"], &[("GANTRY_PORT", "abc")]);
    assert_eq!(code, Some(2));
    assert!(
        said.contains("environment variable GANTRY_PORT=\"abc\" is not a valid --port value"),
        "{said}"
    );
    // Given on the command line, the flag is named as usual.
    let (_, said) = run(&sb, &["serve", "--port", "abc"], &[]);
    assert!(!said.contains("GANTRY_PORT"), "{said}");
    // The usual ways of saying yes are understood.
    for yes in ["1", "yes", "true", "on"] {
        let (code, said) = run(&sb, &["check"], &[("GANTRY_READ_ONLY", yes)]);
        assert_eq!(code, Some(0), "{yes}: {said}");
    }
}

#[test]
fn a_port_in_use_says_what_to_do() {
    let sb = Sandbox::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (code, said) = run(&sb, &["serve", "--port", &port], &[]);
    assert_eq!(code, Some(2));
    assert!(said.contains("the port is in use"), "{said}");
    assert!(said.contains("--port N"), "{said}");
    // Nothing was set up or written before the port was tried, and nothing claims it started.
    let left: Vec<_> = std::fs::read_dir(sb.path("state")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!said.contains("approved roots"), "{said}");
}

#[test]
fn junk_on_stdio_says_an_mcp_client_is_expected() {
    let sb = Sandbox::new();
    let mut child = Command::new(gantry())
        .args(["serve", "--stdio"])
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    assert!(said.contains("no MCP client on the other end"), "{said}");
    assert!(said.contains("gantry config"), "{said}");
    assert!(
        out.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}
