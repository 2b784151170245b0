//! Clients known by a client ID metadata document: the `client_id` is an https URL, and the
//! site serving it vouches for the client. The site here is `tests/signin/document_server.py`
//! on loopback, its certificate from a test CA that gantry is told of through
//! `SSL_CERT_FILE`.

use super::*;

/// An https site on loopback serving documents; killed when dropped.
struct Site {
    origin: String,
    routes: PathBuf,
    ca: PathBuf,
    _child: tokio::process::Child,
}

impl Site {
    /// Starts the site, its certificate for `localhost` signed by a CA made here.
    async fn start(sb: &Sandbox) -> Option<Site> {
        if which("openssl").is_none() {
            cannot_check("the client document tests need openssl (tests/run installs it)");
            return None;
        }
        let dir = sb.path("site");
        std::fs::create_dir_all(&dir).unwrap();
        let openssl = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509", "-days", "2", "-subj", "/CN=gantry test CA"][..],
                &ec,
                &["-keyout", "ca.key", "-out", "ca.pem"],
                &["-addext", "basicConstraints=critical,CA:TRUE"],
                &["-addext", "keyUsage=critical,keyCertSign"],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req", "-subj", "/CN=localhost"][..],
                &ec,
                &["-keyout", "site.key", "-out", "site.csr"],
            ]
            .concat(),
        );
        std::fs::write(
            dir.join("site.ext"),
            "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            "site.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-extfile",
            "site.ext",
            "-out",
            "site.pem",
        ]);
        let routes = dir.join("routes.json");
        std::fs::write(&routes, "{}").unwrap();
        let mut child = tokio::process::Command::new("python3")
            .arg(workspace("tests/signin/document_server.py"))
            .args([dir.join("site.pem"), dir.join("site.key"), routes.clone()])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        Some(Site {
            origin: format!("https://localhost:{port}"),
            routes,
            ca: dir.join("ca.pem"),
            _child: child,
        })
    }

    /// The URL of the document at `path`.
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }

    /// Serves `routes`.
    fn serve(&self, routes: &[Route<'_>]) {
        let map: serde_json::Map<String, serde_json::Value> = routes
            .iter()
            .map(|(path, status, body, headers)| {
                let headers: serde_json::Map<String, serde_json::Value> = headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                    .collect();
                (
                    path.to_string(),
                    serde_json::json!({ "status": status, "body": body, "headers": headers }),
                )
            })
            .collect();
        std::fs::write(&self.routes, serde_json::Value::Object(map).to_string()).unwrap();
    }

    /// The paths asked for so far.
    fn asked(&self) -> Vec<String> {
        std::fs::read_to_string(self.routes.with_extension("json.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A document for `id`, as the Python SDK's client describes itself.
    fn document(id: &str, extra: serde_json::Value) -> String {
        let mut doc = serde_json::json!({
            "client_id": id,
            "client_name": "gantry sign-in test",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        if let (Some(d), Some(e)) = (doc.as_object_mut(), extra.as_object()) {
            d.extend(e.clone());
        }
        doc.to_string()
    }
}

/// What the site answers at `.0`: status `.1`, body `.2`, headers `.3`.
type Route<'a> = (&'a str, u16, String, &'a [(&'a str, &'a str)]);

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|f| f.is_file())
    })
}

#[tokio::test]
async fn a_client_known_by_its_document_signs_in_without_registering() {
    let Some(sdk) = python_sdk() else { return };
    let sb = Sandbox::new();
    let Some(site) = Site::start(&sb).await else {
        return;
    };
    let id = site.url("/client.json");
    site.serve(&[(
        "/client.json",
        200,
        Site::document(&id, serde_json::json!({})),
        &[],
    )]);
    let (server, origin) = public_server_with(&sb, &[("SSL_CERT_FILE", &site.ca)]).await;
    let metadata: serde_json::Value = http()
        .get(format!("{origin}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["client_id_metadata_document_supported"], true);
    python_sdk_session(&sb, &sdk, &server, &origin, Approver::Command, Some(&id)).await;
    assert!(
        site.asked().contains(&"/client.json".to_string()),
        "{:?}",
        site.asked()
    );
}

/// Asks `origin` to authorize `client_id` for `resource`; the page of the refusal.
async fn refused(origin: &str, client_id: &str, redirect: &str, resource: &str) -> String {
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", redirect)
        .append_pair(
            "code_challenge",
            &challenge_of("a verifier long enough to be one, 43 chars or more"),
        )
        .append_pair("code_challenge_method", "S256")
        .append_pair("resource", resource)
        .finish();
    let r = http()
        .get(format!("{origin}/oauth/authorize?{query}"))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let page = r.text().await.unwrap();
    assert_eq!(status, 400, "{page}");
    page
}

#[tokio::test]
async fn documents_that_do_not_hold_are_refused_and_private_addresses_never_fetched() {
    let sb = Sandbox::new();
    let Some(site) = Site::start(&sb).await else {
        return;
    };
    let good = site.url("/client.json");
    let padded = format!(
        "{}{}",
        Site::document(&site.url("/big.json"), serde_json::json!({})),
        " ".repeat(6000)
    );
    site.serve(&[
        (
            "/client.json",
            200,
            Site::document(&good, serde_json::json!({})),
            &[],
        ),
        (
            "/other.json",
            200,
            Site::document(&site.url("/client.json"), serde_json::json!({})),
            &[],
        ),
        (
            "/moved.json",
            302,
            String::new(),
            &[("Location", "/client.json")],
        ),
        ("/big.json", 200, padded, &[]),
        (
            "/secret.json",
            200,
            Site::document(
                &site.url("/secret.json"),
                serde_json::json!({"token_endpoint_auth_method": "client_secret_basic"}),
            ),
            &[],
        ),
        (
            "/anywhere.json",
            200,
            Site::document(
                &site.url("/anywhere.json"),
                serde_json::json!({"redirect_uris": ["http://attacker.example/cb"]}),
            ),
            &[],
        ),
        (
            "/echo.json",
            200,
            "\"SECRET-LOOKING <b>content</b>\"".to_string(),
            &[],
        ),
    ]);
    let (server, origin) = public_server_with(&sb, &[("SSL_CERT_FILE", &site.ca)]).await;
    let core = format!("{origin}/core/mcp");
    // The one that holds waits for the user, its site shown as vouching for it on the
    // sign-in page and on the control page.
    let (wait, _code) = authorize(
        &origin,
        &good,
        "a verifier for the document client, 43+ chars",
        "core",
    )
    .await;
    let page = wait.get().await.text().await.unwrap();
    assert!(
        page.contains("vouched for by localhost, which serves its client document"),
        "{page}"
    );
    let control = reqwest::get(server.admin.as_deref().expect("the control page"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        control.contains(
            "<tr data-pending><th scope=\"row\">gantry sign-in test</th><td>localhost</td>"
        ),
        "{control}"
    );
    for (path, says) in [
        (
            "/other.json",
            "its client_id is not the URL it was fetched from",
        ),
        ("/moved.json", "answered HTTP 302"),
        ("/big.json", "is over 5 KiB"),
        ("/secret.json", "token_endpoint_auth_method"),
        ("/anywhere.json", "only https, or http to this machine"),
        ("/gone.json", "answered HTTP 404"),
        (
            "/echo.json",
            "not a JSON object with the fields expected (at line 1",
        ),
    ] {
        let page = refused(&origin, &site.url(path), REDIRECT, &core).await;
        assert!(page.contains(says), "{path}: {page}");
        // What the site sent is not quoted back to whoever asked.
        assert!(!page.contains("SECRET-LOOKING"), "{path}: {page}");
    }
    // Fetched whole once, the document is not fetched again for ten minutes.
    assert_eq!(
        site.asked().iter().filter(|p| *p == "/client.json").count(),
        1,
        "{:?}",
        site.asked()
    );
    // A request that cannot go on fetches nothing.
    let asked = site.asked().len();
    let page = refused(&origin, &site.url("/never.json"), "", &core).await;
    assert!(page.contains("redirect_uri"), "{page}");
    assert_eq!(site.asked().len(), asked);
    // A redirect the document does not list.
    let page = refused(&origin, &good, "http://127.0.0.1:9/elsewhere", &core).await;
    assert!(page.contains("not one the client registered"), "{page}");
    // Ids are compared as strings: another spelling of the URL is refused before any fetch.
    let asked = site.asked().len();
    let page = refused(
        &origin,
        &good.replace("localhost", "LOCALHOST"),
        REDIRECT,
        &core,
    )
    .await;
    assert!(page.contains("normal form"), "{page}");
    assert_eq!(site.asked().len(), asked);
    let listed = gantry_auth(&sb, &["list"]).1;
    assert!(listed.contains("waiting for approval: 1"), "{listed}");

    // Without the CA, the site's certificate is refused.
    let sb2 = Sandbox::new();
    let (_server2, origin2) = public_server(&sb2).await;
    let page = refused(&origin2, &good, REDIRECT, &format!("{origin2}/core/mcp")).await;
    assert!(page.contains("could not be reached over https"), "{page}");

    // A public host on the internet: nobody there may make gantry call this machine or its
    // network, whatever the certificate.
    let sb3 = Sandbox::new();
    let port = machines::free_port();
    let mut cmd = sb3.serve(
        Path::new(gantry()),
        &[
            "--port",
            &port.to_string(),
            "--public-host",
            "gantry.example.com",
        ],
    );
    cmd.env("SSL_CERT_FILE", &site.ca);
    let _server3 = http_server(cmd).await;
    let asked = site.asked().len();
    let page = refused(
        &format!("http://127.0.0.1:{port}"),
        &good,
        REDIRECT,
        "https://gantry.example.com/core/mcp",
    )
    .await;
    assert!(
        page.contains("does not lead to a public address of another machine"),
        "{page}"
    );
    assert_eq!(site.asked().len(), asked, "nothing was fetched");
}

/// The public address of one of this machine's own interfaces (as a cloud machine has) is
/// refused like loopback, before anything is dialled: in a network namespace of its own with
/// 1.2.3.4 on its loopback, a server on the internet's name is asked for a document there.
#[tokio::test]
async fn this_machines_own_public_address_is_never_fetched() {
    if which("unshare").is_none() || which("ip").is_none() {
        cannot_check("the own-address test needs unshare and ip (util-linux, iproute2)");
        return;
    }
    let sb = Sandbox::new();
    // Run whole inside the namespace: the server, and a client asking it to authorize a
    // client whose document would be on the machine's own address (where a site listens).
    let script = format!(
        r#"
import subprocess, sys, time, urllib.request, urllib.error, urllib.parse, socket, threading
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", "1.2.3.4/32", "dev", "lo"], check=True)
site = socket.socket(); site.bind(("0.0.0.0", 8443)); site.listen(8)
asked = []
threading.Thread(target=lambda: asked.append(site.accept()), daemon=True).start()
server = subprocess.Popen([{gantry:?}, "serve"] + {args:?} + ["--port", "47123", "--public-host", "gantry.example.com", "--no-admin"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
server.stdout.readline()
query = urllib.parse.urlencode({{
    "response_type": "code", "client_id": "https://1.2.3.4:8443/client.json",
    "redirect_uri": "http://127.0.0.1:9/callback",
    "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    "code_challenge_method": "S256", "resource": "https://gantry.example.com/core/mcp"}})
try:
    urllib.request.urlopen("http://127.0.0.1:47123/oauth/authorize?" + query, timeout=10)
    print("ANSWERED")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
time.sleep(0.5)
print("DIALLED" if asked else "NOT DIALLED")
server.kill()
"#,
        gantry = gantry(),
        args = sb.args(),
    );
    let out = std::process::Command::new("unshare")
        .args(["--net", "python3", "-c", &script])
        .env("HOME", sb.path("home"))
        .env("GANTRY_LOG", "warn")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("Operation not permitted") {
        cannot_check(&format!(
            "a network namespace could not be made here: {err}"
        ));
        return;
    }
    assert!(
        said.contains("400")
            && said.contains("does not lead to a public address of another machine"),
        "{said}{err}"
    );
    assert!(said.contains("NOT DIALLED"), "{said}{err}");
}
