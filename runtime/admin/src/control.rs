//! The control page: one place where the user sees and switches what the model may do.
//!
//! It is served by `gantry serve` on a listener of its own, bound to 127.0.0.1 whatever
//! `--host` says, so a tunnel that carries the MCP port never reaches it. Every request must
//! carry the page's secret as the first path segment (a fresh 256-bit value each start,
//! printed at start and by `gantry admin`), a loopback `Host` naming the page's own port,
//! and no foreign `Origin` or cross-site `Sec-Fetch-Site`; a form that changes something
//! must also carry the page's CSRF token. Anything else gets 403, or 404 for a wrong secret.
//!
//! Changes go where a hand edit would: the config file (through [`config::edit`],
//! comments and layout kept) and the tokens file, and apply from the next call. A change
//! that leaves the config unusable is undone.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use tokio_util::sync::CancellationToken;

use config::edit::Change;
use server::app::App;
use state_dir::LiveTokens;

use crate::page;

/// The largest form a request may post.
const MAX_FORM_BYTES: usize = 16 << 10;
/// Audit lines the live tail shows before new ones arrive.
const TAIL_BACKLOG: usize = 50;
/// The name of the file that tells `gantry admin` where the page of a running server is.
pub const URL_FILE: &str = "admin.url";
/// Beside [`URL_FILE`]: where the server serving the page serves its connectors (`port N`)
/// and the public host it was started with (`public NAME`, when it has one), so `gantry
/// token rotate` can print the URLs to paste.
pub const SERVING_FILE: &str = "admin.serving";

/// The server whose control page answers for a state directory, as it recorded itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    /// The port its connectors are served on.
    pub port: u16,
    /// Its public host, a well-formed authority.
    pub public_host: Option<String>,
}

/// The server whose control page answers for `state_dir`, if one does. What it recorded is
/// read as untrusted (a command may have written it): a bounded regular file, a port, and a
/// public host only in the form `--public-host` takes.
pub fn running(state_dir: &std::path::Path) -> Option<Running> {
    let url = state_dir::read_own_input(&state_dir.join(URL_FILE)).ok()?;
    if !answers(url.text.trim()) {
        return None;
    }
    let record = state_dir::read_own_input(&state_dir.join(SERVING_FILE)).ok()?;
    let mut port = None;
    let mut public_host = None;
    for line in record.text.lines() {
        match line.split_once(' ') {
            Some(("port", p)) => port = p.trim().parse::<u16>().ok(),
            Some(("public", h)) => {
                public_host = Some(config::hosts::authority_of(h.trim()).ok()?);
            }
            _ => return None,
        }
    }
    Some(Running {
        port: port?,
        public_host,
    })
}

/// Whether something listens where `url` (a page URL from [`URL_FILE`]) points: a server
/// that died without removing the file is not reported as running.
pub fn answers(url: &str) -> bool {
    let Some(authority) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
    else {
        return false;
    };
    let Some(addr) = authority
        .parse::<SocketAddr>()
        .ok()
        .filter(|a| a.ip().is_loopback())
    else {
        return false;
    };
    // A real request for the page's stylesheet, answered 200 only by the page whose secret
    // the URL holds (a bare connect would count any program on that port, and would be gone
    // before the page could see who opened it).
    let path = url
        .strip_prefix("http://")
        .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("/");
    let asked = || -> std::io::Result<bool> {
        use std::io::{Read as _, Write as _};
        let timeout = std::time::Duration::from_millis(1500);
        let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        write!(
            stream,
            "GET {}style.css HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n",
            if path.ends_with('/') {
                path.to_string()
            } else {
                format!("{path}/")
            }
        )?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head)?;
        Ok(head.starts_with(b"HTTP/1.1 200"))
    };
    asked().unwrap_or(false)
}

/// What the page needs from the running server.
pub struct Control {
    app: Arc<App>,
    secret: String,
    csrf: String,
    port: u16,
    mcp: SocketAddr,
    connectors: Vec<&'static tool_api::ConnectorSpec>,
    tokens: LiveTokens,
}

fn random_secret() -> Result<String, String> {
    state_dir::new_secret().map_err(|e| format!("cannot draw a random secret: {e}"))
}

fn same(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// A page of gantry's own, with the headers that keep it to itself: no framing, no caching,
/// no referrer beyond the page itself (the URL holds the secret; a same-origin referrer keeps
/// the `Origin` of its own forms, which `no-referrer` would turn into `null`), scripts and styles only from itself.
fn own(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn refuse(status: StatusCode, why: &'static str) -> Response {
    own((status, why).into_response())
}

/// Binds the page's socket on loopback (`port` 0 picks a free one), before anything else is
/// set up.
pub fn bind_port(port: u16) -> Result<std::net::TcpListener, String> {
    let listener =
        std::net::TcpListener::bind((IpAddr::V4(Ipv4Addr::LOCALHOST), port)).map_err(|e| {
            format!(
                "control page: {} (or --no-admin)",
                transport::http::listen_error("127.0.0.1", port, &e)
            )
        })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("control page: {e}"))?;
    Ok(listener)
}

/// Sets the page up on the socket [`bind_port`] made (needs a tokio runtime) and writes where
/// it is for `gantry admin`.
pub fn start(
    app: Arc<App>,
    socket: std::net::TcpListener,
    mcp: SocketAddr,
    connectors: Vec<&'static tool_api::ConnectorSpec>,
) -> Result<(Arc<Control>, tokio::net::TcpListener), String> {
    let listener =
        tokio::net::TcpListener::from_std(socket).map_err(|e| format!("control page: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let names: Vec<&'static str> = connectors.iter().map(|c| c.name).collect();
    let tokens = LiveTokens::new(&app.settings.state_dir, &names)?;
    let control = Arc::new(Control {
        secret: random_secret()?,
        csrf: random_secret()?,
        port: bound.port(),
        mcp,
        connectors,
        tokens,
        app,
    });
    // Recorded sessions never show the page's secret, whatever a command prints.
    use server::server::Served as _;
    control
        .app
        .learn_secrets(vec![control.secret.clone(), control.csrf.clone()]);
    let file = control.app.settings.state_dir.join(URL_FILE);
    if let Err(e) = state_dir::write_private(&file, format!("{}\n", control.url()).as_bytes()) {
        tracing::warn!(error = %e, file = %file.display(), "cannot record where the control page is; `gantry admin` will not find it");
    }
    let serving = control.app.settings.state_dir.join(SERVING_FILE);
    let mut record = format!("port {}\n", control.mcp.port());
    if let Some(host) = &control.app.settings.public_host {
        record.push_str(&format!("public {host}\n"));
    }
    if let Err(e) = state_dir::write_private(&serving, record.as_bytes()) {
        tracing::warn!(error = %e, file = %serving.display(), "cannot record where the connectors are served; `gantry token rotate` will not print their URLs");
    }
    Ok((control, listener))
}

/// Serves one connection until it ends, is evicted or the server stops; a refused opener's
/// connection answers once and closes.
async fn serve_connection<S>(
    stream: tokio::net::TcpStream,
    service: S,
    refused: bool,
    evicted: &CancellationToken,
    shutdown: &CancellationToken,
) where
    S: hyper::service::Service<
            http::Request<hyper::body::Incoming>,
            Response = Response,
            Error = std::convert::Infallible,
        >,
    S::Future: Send + 'static,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(!refused)
        .header_read_timeout(std::time::Duration::from_secs(if refused { 2 } else { 10 }));
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        () = evicted.cancelled() => {}
        () = shutdown.cancelled() => {}
    }
}

impl Control {
    /// The page's URL (the secret is part of it).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/{}/", self.port, self.secret)
    }

    /// Serves the page until `shutdown` fires, then removes the file `gantry admin` reads.
    /// Each connection sends its headers within 10 s; who holds how many connections is
    /// [`crate::connections`]'s rule, so idle sockets can neither eat the server's
    /// descriptors nor lock the user out.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: CancellationToken,
    ) {
        use crate::connections::{MAX_CHECKING, MAX_REFUSED_CONNECTIONS, MAX_WAITING, Pool};
        let checking = Arc::new(tokio::sync::Semaphore::new(MAX_CHECKING));
        // Connections waiting for their opener to be looked up: they wait their turn (a
        // flood must not turn the user's connection away) but are bounded (nor hold every
        // descriptor).
        let waiting = Arc::new(tokio::sync::Semaphore::new(MAX_WAITING));
        let refused_slots = Arc::new(tokio::sync::Semaphore::new(MAX_REFUSED_CONNECTIONS));
        let pool = Arc::new(Pool::default());
        loop {
            let (stream, peer) = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(_) => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let Ok(queued) = waiting.clone().try_acquire_owned() else {
                continue;
            };
            let checking = checking.clone();
            let Ok(local) = stream.local_addr() else {
                continue;
            };
            let control = self.clone();
            let shutdown = shutdown.clone();
            let refused_slots = refused_slots.clone();
            let pool = pool.clone();
            tokio::spawn(async move {
                let Ok(Ok(check)) = tokio::time::timeout(
                    std::time::Duration::from_secs(5),
                    checking.acquire_owned(),
                )
                .await
                else {
                    return;
                };
                drop(queued);
                // Who opened the connection is looked up once, before any request on it is
                // read: a command gantry ran may know the page's address (it can read the
                // state directory), and must neither read the page nor change anything.
                let refused: Option<Arc<str>> = tokio::task::spawn_blocking(move || {
                    transport::peer::started_by_gantry(peer, local)
                })
                .await
                .unwrap_or_else(|_| Some("the check of who opened the connection failed".into()))
                .map(Arc::from);
                drop(check);
                // A refused opener gets a few slots of its own and one answer each; the
                // user's connections are admitted apart, so a flood of refused sockets
                // never takes their place.
                let (refused_slot, admitted) = match &refused {
                    Some(why) => {
                        tracing::warn!(why = %why, "the control page refused a connection");
                        let Ok(slot) = refused_slots.try_acquire_owned() else {
                            return;
                        };
                        (Some(slot), None)
                    }
                    None => {
                        let Some(admitted) = pool.admit() else {
                            return;
                        };
                        (None, Some(Arc::new(admitted)))
                    }
                };
                let evicted = admitted
                    .as_ref()
                    .map_or_else(CancellationToken::new, |a| a.end.clone());
                let service = hyper::service::service_fn(
                    move |request: http::Request<hyper::body::Incoming>| {
                        let control = control.clone();
                        let refused = refused.clone();
                        let busy = admitted.as_ref().map(|a| a.busy());
                        async move {
                            let response = control.handle(request.map(Body::new), refused).await;
                            drop(busy);
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    },
                );
                serve_connection(stream, service, refused_slot.is_some(), &evicted, &shutdown)
                    .await;
            });
        }
        let _ = std::fs::remove_file(self.app.settings.state_dir.join(URL_FILE));
        let _ = std::fs::remove_file(self.app.settings.state_dir.join(SERVING_FILE));
    }

    /// Whether the request comes from the page itself, in a browser on this machine.
    fn admits(&self, request: &Request) -> Result<(), (StatusCode, &'static str)> {
        let own_hosts = [
            format!("127.0.0.1:{}", self.port),
            format!("localhost:{}", self.port),
        ];
        let host = request
            .headers()
            .get_all(header::HOST)
            .iter()
            .map(|h| h.to_str().unwrap_or(""))
            .collect::<Vec<_>>();
        if host.len() != 1 || !own_hosts.iter().any(|h| h.eq_ignore_ascii_case(host[0])) {
            return Err((
                StatusCode::FORBIDDEN,
                "Forbidden: the control page answers only as 127.0.0.1 or localhost on its own port",
            ));
        }
        // One Origin, one Sec-Fetch-Site: a second one (the page's own first) is not a
        // browser's request, and must not be judged by its first value alone.
        if request.headers().get_all(header::ORIGIN).iter().count() > 1
            || request.headers().get_all("sec-fetch-site").iter().count() > 1
        {
            return Err((
                StatusCode::FORBIDDEN,
                "Forbidden: a request with more than one Origin or Sec-Fetch-Site header",
            ));
        }
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let ok = origin.to_str().is_ok_and(|o| {
                own_hosts
                    .iter()
                    .any(|h| o.eq_ignore_ascii_case(&format!("http://{h}")))
            });
            if !ok {
                return Err((
                    StatusCode::FORBIDDEN,
                    "Forbidden: a page of another origin cannot use the control page",
                ));
            }
        }
        if let Some(site) = request.headers().get("sec-fetch-site")
            && !matches!(site.as_bytes(), b"same-origin" | b"none")
        {
            return Err((
                StatusCode::FORBIDDEN,
                "Forbidden: the control page is not reachable from another site",
            ));
        }
        Ok(())
    }

    async fn handle(self: Arc<Self>, request: Request, refused: Option<Arc<str>>) -> Response {
        if let Some(why) = refused {
            let mut response = (
                StatusCode::FORBIDDEN,
                format!(
                    "Forbidden: the control page serves only programs the user started, and {why}"
                ),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return own(response);
        }
        if let Err((status, why)) = self.admits(&request) {
            return refuse(status, why);
        }
        let path = request.uri().path().to_string();
        let Some(rest) = path
            .strip_prefix('/')
            .and_then(|p| p.split_once('/'))
            .filter(|(secret, _)| same(secret, &self.secret))
            .map(|(_, rest)| rest.to_string())
        else {
            return own(StatusCode::NOT_FOUND.into_response());
        };
        let query = request.uri().query().unwrap_or("").to_string();
        let method = request.method().clone();
        match (method, rest.as_str()) {
            (Method::GET, "") => self.page(&query).await,
            (Method::GET, "app.js") => asset("text/javascript", page::SCRIPT),
            (Method::GET, "style.css") => asset("text/css", page::STYLE),
            (Method::GET, "fragment/sessions") => {
                html(page::sessions(&self.app.terminal.list(), &self.csrf))
            }
            (Method::GET, "audit") => self.audit_stream(&query).await,
            (Method::POST, action) => {
                let action = action.to_string();
                match read_form(request).await {
                    Ok(form) if form.get("csrf").is_some_and(|t| same(t, &self.csrf)) => {
                        let said = self.act(&action, &form).await;
                        see_page(&self.secret, &said)
                    }
                    Ok(_) => refuse(
                        StatusCode::FORBIDDEN,
                        "Forbidden: the form's token is missing or stale; reload the page",
                    ),
                    Err((status, why)) => refuse(status, why),
                }
            }
            _ => own(StatusCode::NOT_FOUND.into_response()),
        }
    }

    /// Does what a form asked; returns what to tell the user.
    async fn act(&self, action: &str, form: &Form) -> String {
        let field = |name: &str| form.get(name).unwrap_or("").to_string();
        match action {
            "permission" => {
                let name = field("name");
                let on = field("on") == "true";
                self.change(
                    Change::Permission(name.clone(), on),
                    &format!(
                        "{name} is now {} (from the next call)",
                        if on { "on" } else { "off" }
                    ),
                )
            }
            "read-only" => {
                if let Some(from) = self.read_only_fixed() {
                    return format!(
                        "read-only mode is set by {from} for this run; the config file cannot change it"
                    );
                }
                let on = field("on") == "true";
                self.change(
                    Change::ReadOnly(on),
                    &format!(
                        "read-only mode is now {} (from the next call)",
                        if on { "on" } else { "off" }
                    ),
                )
            }
            "roots/add" | "roots/remove" => {
                if let Some(from) = self.roots_fixed() {
                    return format!(
                        "the roots are set by {from} for this run; the config file cannot change them"
                    );
                }
                let dir = std::path::PathBuf::from(field("path").trim());
                if action == "roots/remove" {
                    return self.change(
                        Change::RemoveRoot(dir.clone()),
                        &format!("{} is no longer a root (from the next call)", dir.display()),
                    );
                }
                if !dir.is_absolute() {
                    return format!("{}: give an absolute path", dir.display());
                }
                let dir = match confine::path_policy::new_root(&dir) {
                    Ok(d) => d,
                    Err(why) => return why,
                };
                self.change(
                    Change::AddRoot(dir.clone()),
                    &format!("{} is now a root (from the next call)", dir.display()),
                )
            }
            "sessions/kill" => {
                let Ok(id) = field("id").parse::<u64>() else {
                    return "id: not a session id".into();
                };
                if self.app.terminal.end_any(id).await {
                    tracing::info!(
                        session = id,
                        "the user ended a command session from the control page"
                    );
                    format!("session {id} and its process tree were ended")
                } else {
                    format!("session {id} had already ended")
                }
            }
            "agents/end" => match self.app.agents.end_run().await {
                Ok(Some((run, programs))) => format!(
                    "run {run} was ended: {programs} worker program(s) and their process trees were stopped, and its workers are finished"
                ),
                Ok(None) => "there is no worker run".into(),
                Err(e) => e,
            },
            "tokens/rotate" => {
                let names: Vec<&'static str> = self.connectors.iter().map(|c| c.name).collect();
                let which = field("connector");
                match state_dir::Tokens::rotate(&self.app.settings.state_dir, &names, Some(&which))
                {
                    Ok(_) => {
                        let fresh = self.tokens.get();
                        use server::server::Served as _;
                        self.app.learn_secrets(
                            fresh.get(&which).map(str::to_string).into_iter().collect(),
                        );
                        tracing::info!(connector = %which, "the user rotated a connector secret from the control page");
                        format!(
                            "{which} has a new secret: its old URL stopped working; paste the new one into your clients"
                        )
                    }
                    Err(e) => e,
                }
            }
            "auth/decide" => {
                let Some(sign_in) = &self.app.sign_in else {
                    return "no connector signs in with OAuth on this server".into();
                };
                let (approval, what) = match field("decide").as_str() {
                    "approve" => (oauth::Approval::Approve, "approve"),
                    "deny" => (oauth::Approval::Deny, "deny"),
                    _ => return "decide: approve or deny".into(),
                };
                match sign_in.store.decide(&field("code"), approval) {
                    Ok(p) => {
                        server::server::audit_sign_in(
                            &self.app.audit,
                            &transport::signin::Event {
                                connector: &p.connector,
                                what,
                                client: &p.client_name,
                                outcome: "ok",
                            },
                        );
                        if approval == oauth::Approval::Approve {
                            format!(
                                "{} may now use {}: its sign-in page moves on within seconds",
                                p.client_name, p.connector
                            )
                        } else {
                            format!("{} was refused {}", p.client_name, p.connector)
                        }
                    }
                    Err(e) => e.to_string(),
                }
            }
            "auth/revoke" => {
                let Some(sign_in) = &self.app.sign_in else {
                    return "no connector signs in with OAuth on this server".into();
                };
                match sign_in.store.revoke(&field("grant")) {
                    Ok(g) => {
                        server::server::audit_sign_in(
                            &self.app.audit,
                            &transport::signin::Event {
                                connector: &g.connector,
                                what: "revoke",
                                client: &g.client_name,
                                outcome: "ok",
                            },
                        );
                        format!(
                            "{} no longer signs in to {}: its tokens stop working at their next request",
                            g.client_name, g.connector
                        )
                    }
                    Err(e) => e.to_string(),
                }
            }
            _ => "unknown action".into(),
        }
    }

    /// Writes a change to the config file and applies it now; undoes it if the server cannot
    /// use the result.
    fn change(&self, change: Change, done: &str) -> String {
        let roots = self.app.live_config_roots();
        // Undone only when the change itself breaks something: a problem that was there
        // before (a broken policy file, an [exec] change awaiting a restart) is not its doing.
        let broken_before = self.app.live().broken.clone();
        let applied =
            config::edit::apply_checked(&self.app.settings.config_path, &change, &roots, || {
                // gantry wrote the file whole: it applies now, not after the settling time.
                match &self.app.adopt_config().broken {
                    Some(why) if broken_before.as_ref() != Some(why) => Err(why.clone()),
                    _ => Ok(()),
                }
            });
        // Reloaded either way: after an undo, the restored file is what applies.
        self.app.adopt_config();
        match applied {
            Ok(()) => {
                tracing::info!(change = %change, "the user changed the config from the control page");
                done.to_string()
            }
            Err(e) => e.to_string(),
        }
    }

    fn read_only_fixed(&self) -> Option<String> {
        self.app
            .run_args()
            .read_only
            .map(|_| config::from_env_or_flag("--read-only", "GANTRY_READ_ONLY"))
    }

    fn roots_fixed(&self) -> Option<String> {
        if !self.app.run_args().roots.is_empty() {
            Some("--root".into())
        } else if std::env::var_os("GANTRY_ROOTS").is_some_and(|v| !v.is_empty()) {
            Some("GANTRY_ROOTS (environment)".into())
        } else {
            None
        }
    }

    async fn page(&self, query: &str) -> Response {
        let params: Form = parse_form(query.as_bytes());
        let live = self.app.live();
        let tokens = self.tokens.get();
        let exe = std::env::current_exe().unwrap_or_else(|_| "gantry".into());
        // The setups name the port the server really listens on (`--port 0` picks one).
        let settings = config::Settings {
            port: self.mcp.port(),
            ..self.app.settings.clone()
        };
        let connectors: Vec<page::Connector> = self
            .connectors
            .iter()
            .map(|c| {
                let token = tokens.get(c.name).unwrap_or_default();
                let snippets = page::CLIENTS
                    .iter()
                    .map(|(label, client)| {
                        let (text, _) = config::client_setup::render(
                            *client,
                            &settings,
                            self.app.run_args(),
                            c.name,
                            &exe,
                            token,
                        );
                        (*label, text)
                    })
                    .collect();
                let oauth = self.app.settings.auth_of(c.name).oauth()
                    && self.app.settings.public_host.is_some();
                page::Connector {
                    name: c.name,
                    title: c.title,
                    local: if oauth {
                        config::urls::connector_url_without_secret(self.mcp, c.name)
                    } else {
                        config::urls::connector_url(self.mcp, token)
                    },
                    public: self.app.settings.public_host.as_ref().map(|h| {
                        if oauth {
                            config::urls::oauth_url(h, c.name)
                        } else {
                            config::urls::public_url(h, token)
                        }
                    }),
                    oauth,
                    snippets,
                }
            })
            .collect();
        let recorded = self.recorded(params.get("q")).await;
        html(page::render(&page::View {
            csrf: &self.csrf,
            said: params.get("said"),
            broken: live.broken.as_deref(),
            read_only: live.permissions.read_only(),
            read_only_fixed: self.read_only_fixed(),
            permissions: &live.permissions,
            roots: self
                .app
                .roots
                .get()
                .all()
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            roots_fixed: self.roots_fixed(),
            connectors,
            sessions: self.app.terminal.list(),
            workers: self.app.agents.overview(),
            recorded_query: params.get("q").unwrap_or(""),
            recorded,
            config_path: self.app.settings.config_path.display().to_string(),
            tools: {
                // A name two connectors publish is one choice of the filter.
                let mut names: Vec<&'static str> = Vec::new();
                for t in generated::TOOLS.iter().filter(|t| !t.upstream) {
                    if !names.contains(&t.name) {
                        names.push(t.name);
                    }
                }
                names
            },
            sign_ins: self.app.sign_in.as_ref().map(|s| {
                (
                    s.store.pending().unwrap_or_default(),
                    s.store.grants().unwrap_or_default(),
                )
            }),
        }))
    }

    /// The newest recorded sessions, or those matching `query`, as `session` renders them.
    async fn recorded(&self, query: Option<&str>) -> String {
        let recorder = self.app.recorder.clone();
        let query = query.map(str::to_string);
        tokio::task::spawn_blocking(move || {
            recorder.refresh_for_lookup();
            let (store, redactor) = match recorder.store() {
                Ok(s) => s,
                Err(e) => return format!("recorded sessions are not available: {e}"),
            };
            let everyone = |_: &recordings::store::SessionInfo| true;
            match store.search(
                recordings::Search {
                    query: query.as_deref(),
                    source: None,
                    cursor: None,
                },
                &everyone,
                redactor,
                recordings::Budgets {
                    search_tokens: 3000,
                    read_tokens: 3000,
                    newest: 20,
                },
            ) {
                Ok(page) => page.text,
                Err(e) => format!("recorded sessions: {e}"),
            }
        })
        .await
        .unwrap_or_default()
    }

    /// The audit log as server-sent events: the last lines that pass the filter, then each
    /// new one as it is written.
    async fn audit_stream(&self, query: &str) -> Response {
        let params = parse_form(query.as_bytes());
        let filter = audit::Filter {
            tool: params
                .get("tool")
                .filter(|t| !t.is_empty())
                .map(str::to_string),
            decision: params
                .get("decision")
                .filter(|d| !d.is_empty())
                .map(str::to_string),
        };
        // Subscribed before the backlog is read, so no line falls between the two.
        let live = self.app.audit.subscribe();
        let path = self.app.settings.state_dir.join(audit::FILE_NAME);
        let backlog_filter = filter.clone();
        let backlog = tokio::task::spawn_blocking(move || {
            audit::last_lines(&path, &backlog_filter, TAIL_BACKLOG)
                .map(|(lines, _)| lines)
                .unwrap_or_default()
        })
        .await
        .unwrap_or_default();
        use axum::response::sse::Event;
        use tokio::sync::broadcast::error::RecvError;
        let stream = futures_util::stream::unfold(
            (backlog, live, filter),
            |(mut backlog, mut live, filter)| async move {
                if let Some(line) = backlog.pop_front() {
                    let event = Ok::<_, std::convert::Infallible>(Event::default().data(line));
                    return Some((event, (backlog, live, filter)));
                }
                loop {
                    match live.recv().await {
                        Ok(line) if filter.keeps(&line) => {
                            let event = Ok(Event::default().data(&*line));
                            return Some((event, (backlog, live, filter)));
                        }
                        // A reader that fell behind skips ahead; the file keeps every line.
                        Ok(_) | Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => return None,
                    }
                }
            },
        );
        let mut response = axum::response::sse::Sse::new(stream)
            .keep_alive(axum::response::sse::KeepAlive::default())
            .into_response();
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        own(response)
    }
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    own(([(header::CONTENT_TYPE, kind)], body).into_response())
}

fn html(body: String) -> Response {
    own(([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response())
}

/// After a change, back to the page with what happened (post/redirect/get).
fn see_page(secret: &str, said: &str) -> Response {
    let said: String = form_urlencoded::byte_serialize(said.as_bytes()).collect();
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(to) = HeaderValue::from_str(&format!("/{secret}/?said={said}")) {
        response.headers_mut().insert(header::LOCATION, to);
    }
    own(response)
}

/// A decoded form (or query string): each name's first value.
#[derive(Debug, Default)]
struct Form(Vec<(String, String)>);

impl Form {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn parse_form(bytes: &[u8]) -> Form {
    Form(
        form_urlencoded::parse(bytes)
            .take(32)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
    )
}

async fn read_form(request: Request) -> Result<Form, (StatusCode, &'static str)> {
    let is_form = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the control page takes only its own forms",
        ));
    }
    let bytes = axum::body::to_bytes(request.into_body(), MAX_FORM_BYTES)
        .await
        .map_err(|_| (StatusCode::PAYLOAD_TOO_LARGE, "form too large"))?;
    Ok(parse_form(&bytes))
}
