//! Sign-in for the public connectors: `gantry serve --public-host 127.0.0.1:PORT` (the public
//! host on loopback, as a tunnel would deliver it) signs OAuth clients in only once the user
//! approves on the control page (headless Chromium) or with `gantry auth approve`. The client
//! is the official MCP Python SDK's (`tests/signin/oauth_client.py`, the SDK installed by
//! `tests/run`); the refusals are driven over raw HTTP.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use sha2::Digest as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use crate::support::*;

const REDIRECT: &str = "http://127.0.0.1:9/callback";

mod documents;

/// A server whose public host is loopback, on a port chosen first; its origin.
async fn public_server(sb: &Sandbox) -> (HttpServer, String) {
    public_server_with(sb, &[]).await
}

/// The same, `env` set for it.
async fn public_server_with(sb: &Sandbox, env: &[(&str, &Path)]) -> (HttpServer, String) {
    sb.write("hello.txt", "hello from the root\n");
    let (server, port) = public_host_server(sb, env).await;
    (server, format!("http://127.0.0.1:{port}"))
}

/// `connector`'s URL secret, as the state directory keeps it (OAuth connectors print none).
fn url_secret(sb: &Sandbox, connector: &str) -> String {
    let tokens: toml::Table =
        toml::from_str(&std::fs::read_to_string(sb.path("state/tokens.toml")).unwrap()).unwrap();
    tokens[connector].as_str().unwrap().to_string()
}

/// The MCP Python SDK, where `tests/run` put it.
fn python_sdk() -> Option<PathBuf> {
    let dir = workspace("target/python-mcp");
    if dir.join("mcp").is_dir() {
        return Some(dir);
    }
    cannot_check(&format!(
        "the sign-in test's client needs the MCP Python SDK in {} (tests/run installs it)",
        dir.display()
    ));
    None
}

/// `gantry auth ARGS` on the sandbox's settings: whether it succeeded, and what it said.
fn gantry_auth(sb: &Sandbox, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(gantry())
        .arg("auth")
        .args(args)
        .args(sb.args())
        .env("HOME", sb.path("home"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The id of the grant `gantry auth list` shows for `client` on `connector`.
fn grant_of(sb: &Sandbox, client: &str, connector: &str) -> String {
    let (ok, listed) = gantry_auth(sb, &["list"]);
    assert!(ok, "{listed}");
    listed
        .lines()
        .find(|l| l.contains(client) && l.contains(&format!(" on {connector},")))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no grant of {client} on {connector}: {listed}"))
        .to_string()
}

fn audit_lines(sb: &Sandbox) -> Vec<serde_json::Value> {
    std::fs::read_to_string(sb.path("state/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["tool"] == "sign-in")
        .collect()
}

/// Whether the audit holds a sign-in line of `event` with `outcome`.
fn audited(lines: &[serde_json::Value], event: &str, outcome: &str) -> bool {
    lines.iter().any(|l| {
        l["outcome"] == outcome
            && l["attempted"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|i| i["input"] == "event" && i["value"] == event)
            })
    })
}

enum Approver {
    ControlPage,
    Command,
}

async fn next_line(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    child: &mut tokio::process::Child,
) -> String {
    match tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await {
        Ok(Ok(Some(line))) => line,
        other => {
            let _ = child.start_kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use tokio::io::AsyncReadExt as _;
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), e.read_to_string(&mut err)).await;
            }
            panic!("the Python client stopped ({other:?}): {err}");
        }
    }
}

async fn the_python_sdk_signs_in_reads_refreshes_and_is_refused_once_revoked(by: Approver) {
    let Some(sdk) = python_sdk() else { return };
    if matches!(by, Approver::ControlPage) && crate::admin::browser().is_none() {
        return;
    }
    let sb = Sandbox::new();
    let (server, origin) = public_server(&sb).await;
    python_sdk_session(&sb, &sdk, &server, &origin, by, None).await;
}

/// The Python SDK's whole session against `server`: sign-in (registering, or known by the
/// client document at `document`), approval `by` the user, a read, a refresh, revocation and
/// the refusal after it, each audited.
async fn python_sdk_session(
    sb: &Sandbox,
    sdk: &Path,
    server: &HttpServer,
    origin: &str,
    by: Approver,
    document: Option<&str>,
) {
    let url = format!("{origin}/core/mcp");
    assert_eq!(
        server.public["core"], url,
        "the URL to paste holds no secret"
    );
    let page = server.admin.clone().expect("the control page");
    let mut child = tokio::process::Command::new("python3")
        .arg(workspace("tests/signin/oauth_client.py"))
        .args([&url, "hello.txt"])
        .args(document)
        .env("PYTHONPATH", sdk)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();

    // Registration, discovery and the authorization request happened; nothing is granted
    // until the user approves the code the sign-in page shows.
    let first = next_line(&mut lines, &mut child).await;
    let code = first
        .strip_prefix("CODE ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let listed = gantry_auth(sb, &["list"]).1;
    assert!(listed.contains("grants in force: 0"), "{listed}");
    // Who vouches for the client is shown beside its name.
    let vouched = match document {
        Some(_) => "[document on localhost] gantry sign-in test",
        None => "[registered itself, unchecked] gantry sign-in test",
    };
    assert!(listed.contains(vouched), "{listed}");
    match by {
        Approver::ControlPage => {
            crate::admin::drive("approve-sign-in", &page, &code, async || {}).await
        }
        Approver::Command => {
            let (ok, said) = gantry_auth(sb, &["approve", &code.to_lowercase()]);
            assert!(
                ok && said.contains("approved: gantry sign-in test"),
                "{said}"
            );
        }
    }
    let read = next_line(&mut lines, &mut child).await;
    assert!(
        read.starts_with("READ ") && read.contains("hello from the root"),
        "{read}"
    );
    let refreshed = next_line(&mut lines, &mut child).await;
    assert!(
        refreshed.starts_with("REFRESHED ") && refreshed.contains("hello from the root"),
        "{refreshed}"
    );

    let grant = grant_of(sb, "gantry sign-in test", "core");
    match by {
        Approver::ControlPage => {
            let said = crate::admin::post_form(&page, "auth/revoke", &[("grant", &grant)]).await;
            assert!(said.contains("no longer signs in to core"), "{said}");
        }
        Approver::Command => {
            let (ok, said) = gantry_auth(sb, &["revoke", &grant]);
            assert!(
                ok && said.contains("revoked: gantry sign-in test on core"),
                "{said}"
            );
        }
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").await.unwrap();
    let refused = next_line(&mut lines, &mut child).await;
    assert!(refused.starts_with("REFUSED"), "{refused}");
    assert_eq!(next_line(&mut lines, &mut child).await, "ok");

    let audit = audit_lines(sb);
    // A client known by its document never registers.
    assert_eq!(audited(&audit, "register", "ok"), document.is_none());
    for (event, outcome) in [
        ("authorize", "waiting"),
        ("approve", "ok"),
        ("token", "ok"),
        ("refresh", "ok"),
        ("revoke", "ok"),
        ("refused", "invalid_token"),
    ] {
        assert!(
            audited(&audit, event, outcome),
            "no {event} {outcome} in {audit:#?}"
        );
    }
}

#[tokio::test]
async fn the_python_sdk_signs_in_once_approved_on_the_control_page() {
    the_python_sdk_signs_in_reads_refreshes_and_is_refused_once_revoked(Approver::ControlPage)
        .await;
}

#[tokio::test]
async fn the_python_sdk_signs_in_once_approved_with_gantry_auth_approve() {
    the_python_sdk_signs_in_reads_refreshes_and_is_refused_once_revoked(Approver::Command).await;
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn challenge_of(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

fn query_of(location: &str, name: &str) -> Option<String> {
    let query = location.split_once('?')?.1;
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A client registered over raw HTTP.
async fn register(origin: &str) -> String {
    let r = http()
        .post(format!("{origin}/oauth/register"))
        .json(&serde_json::json!({ "client_name": "raw client", "redirect_uris": [REDIRECT] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    r.json::<serde_json::Value>().await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A browser's look at a waiting page: the page's URL and the cookie its authorization set.
struct Waiting {
    url: String,
    cookie: String,
}

impl Waiting {
    async fn get(&self) -> reqwest::Response {
        http()
            .get(&self.url)
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap()
    }
}

/// Starts an authorization for `connector` with `verifier`'s challenge: the waiting page (in
/// the browser that asked) and the code it shows.
async fn authorize(
    origin: &str,
    client: &str,
    verifier: &str,
    connector: &str,
) -> (Waiting, String) {
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", client)
        .append_pair("redirect_uri", REDIRECT)
        .append_pair("code_challenge", &challenge_of(verifier))
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", "s1")
        .append_pair("resource", &format!("{origin}/{connector}/mcp"))
        .finish();
    let r = http()
        .get(format!("{origin}/oauth/authorize?{query}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
    let set = r.headers()["set-cookie"].to_str().unwrap();
    let wait = Waiting {
        url: r.headers()["location"].to_str().unwrap().to_string(),
        cookie: set.split(';').next().unwrap().to_string(),
    };
    // Without the browser's cookie (a link someone sent), the page shows no code.
    let elsewhere = http().get(&wait.url).send().await.unwrap();
    assert_eq!(elsewhere.status(), 403);
    assert!(!elsewhere.text().await.unwrap().contains("class=\"code\""));
    let page = wait.get().await.text().await.unwrap();
    let code = page
        .split("class=\"code\">")
        .nth(1)
        .and_then(|s| s.split('<').next())
        .unwrap_or_else(|| panic!("no code on {page}"))
        .to_string();
    (wait, code)
}

/// The authorization code the waiting page hands over once approved.
async fn code_after_approval(wait: &Waiting) -> String {
    // Never to another browser, approved or not.
    assert_eq!(http().get(&wait.url).send().await.unwrap().status(), 403);
    let r = wait.get().await;
    assert_eq!(r.status(), 303);
    let back = r.headers()["location"].to_str().unwrap();
    assert!(back.starts_with(REDIRECT), "{back}");
    assert_eq!(query_of(back, "state").as_deref(), Some("s1"));
    query_of(back, "code").unwrap()
}

async fn token(origin: &str, form: &[(&str, &str)]) -> (u16, serde_json::Value) {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let r = http()
        .post(format!("{origin}/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn initialize(url: &str, bearer: Option<&str>) -> reqwest::Response {
    let mut req = http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string(),
        );
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn every_way_around_the_users_approval_is_refused() {
    let sb = Sandbox::new();
    let (server, origin) = public_server(&sb).await;
    let core = format!("{origin}/core/mcp");

    // No token: 401, naming where to learn how to sign in.
    let r = initialize(&core, None).await;
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    let metadata = format!("{origin}/.well-known/oauth-protected-resource/core/mcp");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
        "{challenge}"
    );
    let prm: serde_json::Value = http()
        .get(&metadata)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(prm["resource"], core);
    assert_eq!(prm["authorization_servers"][0], origin);

    // The URL secret alone opens nothing where the connector signs in.
    let secret = &url_secret(&sb, "core");
    // The same 404 as a wrong secret: an old secret is not even confirmed.
    assert_eq!(
        initialize(&format!("{origin}/{secret}/mcp"), None)
            .await
            .status(),
        404
    );
    assert_eq!(
        initialize(&format!("{origin}/mcp"), Some(secret))
            .await
            .status(),
        404
    );

    let client = register(&origin).await;
    let verifier = "v".repeat(50);

    // An unregistered redirect is refused on a page, never sent anywhere.
    let r = http()
        .get(format!(
            "{origin}/oauth/authorize?response_type=code&client_id={client}&redirect_uri=https%3A%2F%2Fevil.example%2Fcb&code_challenge={}&code_challenge_method=S256&resource={}",
            challenge_of(&verifier),
            form_urlencoded::byte_serialize(core.as_bytes()).collect::<String>()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.headers().get("location").is_none());
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("redirect_uri: not one the client registered")
    );

    // The sign-in page cannot approve itself: nothing on the public side takes an answer.
    let (wait, code) = authorize(&origin, &client, &verifier, "core").await;
    let form = format!("code={code}&approve=1");
    for path in [
        wait.url.trim_start_matches(&origin).to_string(),
        "/oauth/authorize".into(),
        "/oauth/approve".into(),
        "/oauth/wait".into(),
    ] {
        let r = http()
            .post(format!("{origin}{path}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.clone())
            .send()
            .await
            .unwrap();
        assert!(
            r.status() == 405 || r.status() == 404,
            "{path}: {}",
            r.status()
        );
    }
    let still = wait.get().await;
    assert_eq!(still.status(), 200, "still waiting for the user");

    // Approved by the user; then a wrong verifier is refused, the right one works once.
    assert!(gantry_auth(&sb, &["approve", &code]).0);
    let auth_code = code_after_approval(&wait).await;
    let exchange = |verifier: String| {
        let (origin, client, auth_code, core) = (
            origin.clone(),
            client.clone(),
            auth_code.clone(),
            core.clone(),
        );
        async move {
            token(
                &origin,
                &[
                    ("grant_type", "authorization_code"),
                    ("code", &auth_code),
                    ("redirect_uri", REDIRECT),
                    ("client_id", &client),
                    ("code_verifier", &verifier),
                    ("resource", &core),
                ],
            )
            .await
        }
    };
    let (status, body) = exchange("w".repeat(50)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, tokens) = exchange(verifier.clone()).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(initialize(&core, Some(&access)).await.status(), 200);

    // Never on another connector, never on the control page.
    let r = initialize(&format!("{origin}/files/mcp"), Some(&access)).await;
    assert_eq!(r.status(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    let admin = server.admin.clone().unwrap();
    let admin_origin = &admin[..admin["http://".len()..].find('/').unwrap() + "http://".len()];
    let r = http()
        .get(format!("{admin_origin}/"))
        .bearer_auth(&access)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // Revoked: the next request is refused, and so is the refresh token.
    let grant = grant_of(&sb, "raw client", "core");
    assert!(gantry_auth(&sb, &["revoke", &grant]).0);
    let r = initialize(&core, Some(&access)).await;
    assert_eq!(r.status(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    let (status, body) = token(
        &origin,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("client_id", &client),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // A request the user never answers cannot be approved by a code that was never shown.
    let (ok, said) = gantry_auth(&sb, &["approve", "AAAA-2222"]);
    assert!(
        !ok && said.contains("no sign-in request is waiting with code AAAA-2222"),
        "{said}"
    );
}

#[tokio::test]
async fn without_a_public_host_connectors_keep_their_url_secret_and_serve_no_sign_in() {
    let sb = Sandbox::new();
    let server = sb.http(&[]).await;
    let base = server.base();
    let r = http()
        .get(format!("{base}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(initialize(server.url("core"), None).await.status(), 200);
    // `auth = "oauth"` needs the public host its pages are reached at.
    sb.config("[auth]\ncore = \"oauth\"\n");
    let said = sb.check();
    assert!(
        said.contains("[auth] core: `oauth` needs a public host"),
        "{said}"
    );
}

#[tokio::test]
async fn a_command_the_model_runs_cannot_approve_a_sign_in() {
    // With command cgroups, and without them (the first command of a cold shell is then the
    // server's own child: its parent carries no tag, but is a gantry server).
    for exec in ["", "[exec]\ncgroup = false\nwarm_shell = false\n"] {
        a_command_cannot_approve(exec).await;
    }
}

async fn a_command_cannot_approve(exec: &str) {
    let sb = Sandbox::new();
    sb.config(&format!("[permissions]\nexec = true\n{exec}"));
    let (_server, origin) = public_server(&sb).await;
    let client = register(&origin).await;
    let (wait, code) = authorize(&origin, &client, &"v".repeat(50), "core").await;
    // The model, told by a page it read to "run gantry auth approve", tries.
    let model = sb.stdio(&[]).await;
    let args = sb.args().join(" ");
    // Plainly, and with the tag cleared from its own environment.
    for prefix in ["", "env -u GANTRY_SESSION_TAG "] {
        let r = call(
            &model,
            "exec_command",
            serde_json::json!({ "cmd": format!("{prefix}{} auth approve {code} {args}", gantry()), "yield_time_ms": 10000 }),
        )
        .await;
        let said = command_output(&r);
        assert!(
            said.contains("refuses to run inside a command gantry started"),
            "{exec}{prefix}: {}",
            text(&r)
        );
    }
    let still = wait.get().await;
    assert_eq!(still.status(), 200, "the request still waits for the user");
    assert!(
        gantry_auth(&sb, &["list"])
            .1
            .contains("waiting for approval: 1")
    );
}

#[tokio::test]
async fn a_flood_of_refused_tokens_leaves_one_audit_line_a_minute() {
    let sb = Sandbox::new();
    let (_server, origin) = public_server(&sb).await;
    for i in 0..50 {
        let r = initialize(&format!("{origin}/core/mcp"), Some(&format!("forged-{i}"))).await;
        assert_eq!(r.status(), 401);
    }
    let refused: Vec<_> = audit_lines(&sb)
        .into_iter()
        .filter(|l| audited(std::slice::from_ref(l), "refused", "invalid_token"))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:#?}");
    // Registering needs no credential either.
    for _ in 0..20 {
        register(&origin).await;
    }
    let registered = audit_lines(&sb)
        .into_iter()
        .filter(|l| audited(std::slice::from_ref(l), "register", "ok"))
        .count();
    assert_eq!(registered, 1);
}

#[tokio::test]
async fn during_a_change_over_both_the_url_secret_and_a_sign_in_open_the_connector() {
    let sb = Sandbox::new();
    sb.config("[auth]\ncore = \"both\"\n");
    let (server, origin) = public_server(&sb).await;
    // The URL printed is the sign-in one; the secret is the one pasted before.
    assert_eq!(server.public["core"], format!("{origin}/core/mcp"));
    let secret = &url_secret(&sb, "core");
    assert_eq!(
        initialize(&format!("{origin}/{secret}/mcp"), None)
            .await
            .status(),
        200
    );
    let r = initialize(&format!("{origin}/core/mcp"), None).await;
    assert_eq!(r.status(), 401, "the sign-in path still asks for a token");
    // Other connectors keep the default with a public host: their secret opens nothing.
    let files = &url_secret(&sb, "files");
    assert_eq!(
        initialize(&format!("{origin}/{files}/mcp"), None)
            .await
            .status(),
        404
    );
}
