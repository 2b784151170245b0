//! Sign-in over HTTP for the connectors whose `auth` is OAuth: the metadata documents
//! (RFC 9728, RFC 8414), registration (RFC 7591), the authorization page that waits for the
//! user's approval, the token endpoint, and the gate in front of each such connector.
//!
//! Nothing here approves a request: the page only shows the short code and looks again. The
//! user approves on the loopback control page or with `gantry auth approve`, which write the
//! answer into the store this reads.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};
use config::AuthMode;
use http::{HeaderValue, Method, StatusCode, header};
use oauth::{Auth, AuthError, Poll};

/// Largest registration or token request body.
const MAX_FORM_BYTES: usize = 16 << 10;
/// How often the waiting page looks again, in seconds.
const WAIT_REFRESH_S: u32 = 2;

/// How often one kind of refusal is audited: anyone on the internet can send them, and a
/// line for each would roll the audit log over (and away what the model did) in minutes.
const REFUSAL_AUDIT_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The sign-in of a server with a public host.
#[derive(Clone)]
pub struct SignIn {
    /// The store `gantry auth` and the control page share.
    pub store: Arc<Auth>,
    /// `https://<public host>`: the issuer, and the origin of the connectors' resources.
    pub issuer: String,
    /// Per kind of refusal: when it was last audited, and how many since were not.
    refusals: Arc<std::sync::Mutex<Vec<Refusals>>>,
    /// Fetches the documents of clients whose id is an https URL.
    documents: Arc<client_documents::Fetcher>,
}

/// One kind of refusal (event and outcome), as the audit throttles it.
#[derive(Debug)]
struct Refusals {
    what: &'static str,
    outcome: &'static str,
    audited: std::time::Instant,
    left_out: u64,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// What a sign-in event was, for the audit log.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// The connector, or `-` before one is known.
    pub connector: &'a str,
    /// `register`, `authorize`, `token`, `refresh`, `refused`.
    pub what: &'static str,
    /// The client's name (or id when that is all there is).
    pub client: &'a str,
    /// `ok` or the OAuth error code.
    pub outcome: &'a str,
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response {
    let mut r = (status, value.to_string()).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn oauth_error(status: StatusCode, e: &AuthError) -> Response {
    json(
        status,
        &serde_json::json!({ "error": e.code(), "error_description": e.to_string() }),
    )
}

fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '&' => "&amp;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// A page of the sign-in, never framed, never cached, sending no referrer (its URL holds
/// the request's handle), running no script.
fn page(status: StatusCode, title: &str, body: &str, refresh: bool) -> Response {
    let meta = if refresh {
        format!("<meta http-equiv=\"refresh\" content=\"{WAIT_REFRESH_S}\">")
    } else {
        String::new()
    };
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{meta}<title>{}</title>\
         <style>body{{font:16px system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em}}\
         .code{{font:bold 2.2em ui-monospace,monospace;letter-spacing:.08em}}</style></head>\
         <body><h1>{}</h1>{body}</body></html>",
        escape(title),
        escape(title)
    );
    let mut r = (status, html).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    r
}

fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

fn query_pairs(query: &str) -> Result<Vec<(String, String)>, AuthError> {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    for (i, (k, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(seen, _)| seen == k) {
            return Err(AuthError::InvalidRequest(format!(
                "{k}: given more than once"
            )));
        }
    }
    Ok(pairs)
}

fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

fn required<'a>(pairs: &'a [(String, String)], name: &str) -> Result<&'a str, AuthError> {
    field(pairs, name).ok_or_else(|| AuthError::InvalidRequest(format!("{name}: required")))
}

/// The value of cookie `name` on `request`.
fn cookie_of(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

async fn body_of(request: Request) -> Result<Vec<u8>, AuthError> {
    axum::body::to_bytes(request.into_body(), MAX_FORM_BYTES)
        .await
        .map(|b| b.to_vec())
        .map_err(|_| AuthError::InvalidRequest("the request body is over 16 KiB".into()))
}

impl SignIn {
    /// The sign-in kept in `store`, issued as `issuer` for `public_host`; `listens_on_loopback`
    /// when the server's socket takes connections from this machine only.
    pub fn new(
        store: Arc<Auth>,
        issuer: String,
        public_host: &str,
        listens_on_loopback: bool,
    ) -> Result<SignIn, String> {
        // A public host that is itself a loopback name, on a socket only this machine reaches,
        // serves only this machine's clients: their documents may be on loopback too. Any
        // other server fetches from public addresses only.
        let reach = if config::urls::is_loopback_name(public_host) && listens_on_loopback {
            client_documents::Reach::PublicAndLoopback
        } else {
            client_documents::Reach::Public
        };
        Ok(SignIn {
            store,
            issuer,
            refusals: Arc::default(),
            documents: Arc::new(client_documents::Fetcher::new(reach)?),
        })
    }

    /// Audits `event`; what anyone on the internet can cause (a refusal, a registration, a
    /// request made to wait) at most once a minute per kind, the next line counting those
    /// left out. Returns whether a line was written.
    fn audit(
        &self,
        sink: &(dyn Fn(Event<'_>) + Sync),
        event: Event<'_>,
        outcome: &'static str,
    ) -> bool {
        let refused = outcome != "ok" && outcome != "waiting";
        if !refused && !matches!(event.what, "register" | "authorize") {
            sink(event);
            return true;
        }
        let now = std::time::Instant::now();
        let left_out = {
            let mut seen = match self.refusals.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            match seen
                .iter_mut()
                .find(|r| r.what == event.what && r.outcome == outcome)
            {
                Some(r) if now.duration_since(r.audited) < REFUSAL_AUDIT_EVERY => {
                    r.left_out += 1;
                    return false;
                }
                Some(r) => {
                    r.audited = now;
                    std::mem::take(&mut r.left_out)
                }
                None => {
                    seen.push(Refusals {
                        what: event.what,
                        outcome,
                        audited: now,
                        left_out: 0,
                    });
                    0
                }
            }
        };
        let client = if left_out > 0 {
            format!("{} (and {left_out} more like it not logged)", event.client)
        } else {
            event.client.to_string()
        };
        sink(Event {
            client: &client,
            ..event
        });
        true
    }

    /// The resource (RFC 8707) that names `connector`.
    pub fn resource(&self, connector: &str) -> String {
        format!("{}/{connector}/mcp", self.issuer)
    }

    /// Where `connector`'s protected-resource metadata is.
    pub fn metadata_url(&self, connector: &str) -> String {
        format!(
            "{}/.well-known/oauth-protected-resource/{connector}/mcp",
            self.issuer
        )
    }

    /// The connector among `modes` (those signing in with OAuth) that `resource` names.
    fn connector_of(
        &self,
        modes: &[(&'static str, AuthMode)],
        resource: &str,
    ) -> Result<&'static str, AuthError> {
        let resource = resource.trim_end_matches('/');
        modes
            .iter()
            .filter(|(_, m)| m.oauth())
            .map(|(c, _)| *c)
            .find(|c| self.resource(c) == resource)
            .ok_or_else(|| {
                AuthError::InvalidTarget(format!(
                    "resource: `{}` is not a connector that signs in here",
                    resource.chars().take(200).collect::<String>()
                ))
            })
    }

    /// Answers `request` when it is for one of the sign-in endpoints; hands it back
    /// otherwise.
    pub(crate) async fn answer(
        &self,
        sink: &(dyn Fn(Event<'_>) + Sync),
        modes: &[(&'static str, AuthMode)],
        request: Request,
    ) -> Result<Response, Request> {
        let path = request.uri().path().to_string();
        let method = request.method().clone();
        match (method, path.as_str()) {
            (Method::GET, "/.well-known/oauth-authorization-server") => Ok(self.server_metadata()),
            (Method::GET, p) if p.starts_with("/.well-known/oauth-protected-resource/") => {
                let resource = format!(
                    "{}/{}",
                    self.issuer,
                    &p["/.well-known/oauth-protected-resource/".len()..]
                );
                Ok(match self.connector_of(modes, &resource) {
                    Ok(c) => json(
                        StatusCode::OK,
                        &serde_json::json!({
                            "resource": self.resource(c),
                            "authorization_servers": [self.issuer],
                            "bearer_methods_supported": ["header"],
                            "resource_name": format!("gantry {c}"),
                        }),
                    ),
                    Err(_) => StatusCode::NOT_FOUND.into_response(),
                })
            }
            (Method::POST, "/oauth/register") => Ok(self.register(sink, request).await),
            (Method::GET, "/oauth/authorize") => Ok(self
                .authorize(sink, modes, request.uri().query().unwrap_or(""))
                .await),
            (Method::GET, p) if p.starts_with("/oauth/wait/") => {
                let handle = &p["/oauth/wait/".len()..];
                let cookie = cookie_of(&request, &self.cookie_name(handle));
                Ok(self.wait(handle, cookie.as_deref()))
            }
            (Method::POST, "/oauth/token") => Ok(self.token(sink, modes, request).await),
            (
                _,
                "/.well-known/oauth-authorization-server"
                | "/oauth/register"
                | "/oauth/authorize"
                | "/oauth/token",
            ) => {
                // No approval, nor anything else, is reachable here by another method.
                Ok(StatusCode::METHOD_NOT_ALLOWED.into_response())
            }
            (_, p) if p.starts_with("/oauth/wait/") => {
                Ok(StatusCode::METHOD_NOT_ALLOWED.into_response())
            }
            _ => Err(request),
        }
    }

    fn server_metadata(&self) -> Response {
        let i = &self.issuer;
        json(
            StatusCode::OK,
            &serde_json::json!({
                "issuer": i,
                "authorization_endpoint": format!("{i}/oauth/authorize"),
                "token_endpoint": format!("{i}/oauth/token"),
                "registration_endpoint": format!("{i}/oauth/register"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "authorization_response_iss_parameter_supported": true,
                "client_id_metadata_document_supported": true,
            }),
        )
    }

    async fn register(&self, sink: &(dyn Fn(Event<'_>) + Sync), request: Request) -> Response {
        let outcome = async {
            let body = body_of(request).await?;
            let reg: oauth::Registration = serde_json::from_slice(&body).map_err(|e| {
                AuthError::InvalidClientMetadata(format!("the registration is not valid JSON: {e}"))
            })?;
            self.store.register(&reg)
        }
        .await;
        match outcome {
            Ok(client) => {
                self.audit(
                    sink,
                    Event {
                        connector: "-",
                        what: "register",
                        client: &client.name,
                        outcome: "ok",
                    },
                    "ok",
                );
                json(
                    StatusCode::CREATED,
                    &serde_json::json!({
                        "client_id": client.id,
                        "client_id_issued_at": client.created_ms / 1000,
                        "client_name": client.name,
                        "redirect_uris": client.redirect_uris,
                        "grant_types": ["authorization_code", "refresh_token"],
                        "response_types": ["code"],
                        "token_endpoint_auth_method": "none",
                    }),
                )
            }
            Err(e) => {
                self.audit(
                    sink,
                    Event {
                        connector: "-",
                        what: "register",
                        client: "-",
                        outcome: e.code(),
                    },
                    e.code(),
                );
                oauth_error(StatusCode::BAD_REQUEST, &e)
            }
        }
    }

    async fn authorize(
        &self,
        sink: &(dyn Fn(Event<'_>) + Sync),
        modes: &[(&'static str, AuthMode)],
        query: &str,
    ) -> Response {
        let outcome = async {
            let q = query_pairs(query)?;
            if required(&q, "response_type")? != "code" {
                return Err(AuthError::InvalidRequest(
                    "response_type: only `code` is supported".into(),
                ));
            }
            if required(&q, "code_challenge_method")? != "S256" {
                return Err(AuthError::InvalidRequest(
                    "code_challenge_method: only `S256` is supported".into(),
                ));
            }
            let connector = self.connector_of(modes, required(&q, "resource")?)?;
            let client_id = required(&q, "client_id")?;
            let redirect_uri = required(&q, "redirect_uri")?;
            let challenge = required(&q, "code_challenge")?;
            if oauth::is_document_id(client_id) {
                // Checked before anything is fetched: a request that cannot go on makes
                // gantry call nobody.
                if !oauth::challenge_is_well_formed(challenge) {
                    return Err(AuthError::InvalidRequest(
                        "code_challenge: an S256 challenge (43 base64url characters) is required"
                            .into(),
                    ));
                }
                // The document says who the client is today; one fetched whole in the last
                // ten minutes is not fetched again.
                let url = oauth::document_url(client_id)?;
                let body = self.documents.fetch(&url).await.map_err(|e| match e {
                    client_documents::FetchError::Busy => AuthError::DocumentsBusy(e.to_string()),
                    e => AuthError::ClientDocument(e.to_string()),
                })?;
                self.store
                    .remember_document(client_id, &body, redirect_uri)?;
            }
            let pending = self.store.begin(&oauth::Request {
                client_id,
                redirect_uri,
                challenge,
                state: field(&q, "state"),
                connector,
            })?;
            let name = self
                .store
                .client(client_id)?
                .map_or_else(|| "-".to_string(), |c| c.name);
            Ok::<_, AuthError>((pending, connector, name))
        }
        .await;
        match outcome {
            Ok((pending, connector, name)) => {
                self.audit(
                    sink,
                    Event {
                        connector,
                        what: "authorize",
                        client: &name,
                        outcome: "waiting",
                    },
                    "waiting",
                );
                // No code here: the user approves the one their own sign-in page shows, never
                // one read off a log that anyone's request can write to.
                tracing::warn!(
                    connector,
                    client = %name,
                    "a client asks to sign in; if you started it, approve it by typing the code your sign-in page shows on the control page, or with `gantry auth approve CODE`"
                );
                let mut r = see_other(&format!("{}/oauth/wait/{}", self.issuer, pending.handle));
                // The waiting page shows its code, and hands over the answer, only to the
                // browser that made the request: a link to it sent to someone else shows
                // nothing there to approve.
                let secure = if self.issuer.starts_with("https://") {
                    "; Secure"
                } else {
                    ""
                };
                let cookie = format!(
                    "{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
                    self.cookie_name(&pending.handle),
                    pending.browser,
                    oauth::REQUEST_WAIT_MS / 1000 + 120
                );
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                }
                r
            }
            Err(e) => {
                let written = self.audit(
                    sink,
                    Event {
                        connector: "-",
                        what: "authorize",
                        client: "-",
                        outcome: e.code(),
                    },
                    e.code(),
                );
                if written && matches!(e, AuthError::Busy) {
                    tracing::warn!(
                        "the sign-in waiting list is full: someone who knows your public host may be flooding it (requests expire after 5 minutes); if it goes on, stop the tunnel or change its name"
                    );
                }
                if written && matches!(e, AuthError::DocumentsBusy(_)) {
                    tracing::warn!(
                        "every slot for fetching client documents is taken: someone who knows your public host may be naming slow sites (each fetch ends within 5 s; a client whose document was fetched in the last 10 minutes is not held up); if it goes on, stop the tunnel or change its name"
                    );
                }
                // Never sent back to a redirect URI that was not checked: the user reads it.
                page(
                    StatusCode::BAD_REQUEST,
                    "This sign-in request was refused",
                    &format!(
                        "<p>{}</p><p>Start again from your client.</p>",
                        escape(&e.to_string())
                    ),
                    false,
                )
            }
        }
    }

    /// The cookie that names the browser which made the request with `handle` (`__Host-`
    /// bound to this origin where the issuer is https).
    fn cookie_name(&self, handle: &str) -> String {
        let id: String = handle.chars().take(12).collect();
        if self.issuer.starts_with("https://") {
            format!("__Host-gantry-signin-{id}")
        } else {
            format!("gantry-signin-{id}")
        }
    }

    fn wait(&self, handle: &str, browser: Option<&str>) -> Response {
        match self.store.poll(handle, browser, &self.issuer) {
            Ok(Poll::Waiting(p)) => page(
                StatusCode::OK,
                "Approve this sign-in on your computer",
                &format!(
                    "<p><b>{}</b> asks to use gantry's <b>{}</b> connector; the answer goes to <b>{}</b>.</p><p>{}</p>\
                     <p>Your code:</p><p class=\"code\">{}</p>\
                     <p>On the computer gantry runs on, open gantry's control page and approve the request with this code, \
                     or run <code>gantry auth approve {}</code>. This page moves on by itself once you have.</p>\
                     <p>Nothing on this page can approve it. If you did not start this, do nothing: it expires in a few minutes.</p>",
                    escape(&p.client_name),
                    escape(&p.connector),
                    escape(&p.redirect_host),
                    escape(&match &p.client_site {
                        Some(site) => format!("Its identity is vouched for by {site}, which serves its client document."),
                        None => "It registered itself here: its name is its own claim, checked by no one.".to_string(),
                    }),
                    escape(&p.user_code),
                    escape(&p.user_code),
                ),
                true,
            ),
            Ok(Poll::Approved { redirect } | Poll::Denied { redirect }) => see_other(&redirect),
            Ok(Poll::OtherBrowser) => page(
                StatusCode::FORBIDDEN,
                "This sign-in page belongs to another browser",
                "<p>It can be followed only in the browser that started the sign-in, from the client that asked. \
                 If someone sent you this link, do not approve anything for it: start a sign-in from your own client instead.</p>",
                false,
            ),
            Ok(Poll::Gone) => page(
                StatusCode::NOT_FOUND,
                "This sign-in request is over",
                "<p>It expired, was answered already, or never existed. Start again from your client.</p>",
                false,
            ),
            Err(e) => page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "The sign-in failed",
                &format!("<p>{}</p>", escape(&e.to_string())),
                false,
            ),
        }
    }

    async fn token(
        &self,
        sink: &(dyn Fn(Event<'_>) + Sync),
        modes: &[(&'static str, AuthMode)],
        request: Request,
    ) -> Response {
        // A public client may still send its id as HTTP Basic's user name.
        let basic_id = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(b.trim())
                    .ok()
            })
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.split_once(':').map(|(id, _)| id.to_string()));
        let mut what = "token";
        let mut connector: Option<&'static str> = None;
        let outcome = async {
            let body = body_of(request).await?;
            let form =
                query_pairs(std::str::from_utf8(&body).map_err(|_| {
                    AuthError::InvalidRequest("the request body is not UTF-8".into())
                })?)?;
            let client_id = field(&form, "client_id")
                .map(str::to_string)
                .or(basic_id)
                .ok_or_else(|| AuthError::InvalidRequest("client_id: required".into()))?;
            connector = field(&form, "resource")
                .map(|r| self.connector_of(modes, r))
                .transpose()?;
            match required(&form, "grant_type")? {
                "authorization_code" => self.store.exchange(
                    required(&form, "code")?,
                    required(&form, "code_verifier")?,
                    &client_id,
                    required(&form, "redirect_uri")?,
                    connector,
                ),
                "refresh_token" => {
                    what = "refresh";
                    self.store
                        .refresh(required(&form, "refresh_token")?, &client_id, connector)
                }
                other => Err(AuthError::InvalidRequest(format!(
                    "grant_type: `{}` is not supported (authorization_code, refresh_token)",
                    other.chars().take(50).collect::<String>()
                ))),
            }
        }
        .await;
        let shown = connector.unwrap_or("-");
        match outcome {
            Ok(issued) => {
                self.audit(
                    sink,
                    Event {
                        connector: shown,
                        what,
                        client: &issued.client_name,
                        outcome: "ok",
                    },
                    "ok",
                );
                json(
                    StatusCode::OK,
                    &serde_json::json!({
                        "access_token": issued.access_token,
                        "token_type": "Bearer",
                        "expires_in": issued.expires_in,
                        "refresh_token": issued.refresh_token,
                    }),
                )
            }
            Err(e) => {
                self.audit(
                    sink,
                    Event {
                        connector: shown,
                        what,
                        client: "-",
                        outcome: e.code(),
                    },
                    e.code(),
                );
                let status = if matches!(e, AuthError::Store(_)) {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::BAD_REQUEST
                };
                oauth_error(status, &e)
            }
        }
    }

    /// The gate in front of `connector`: its bearer token must be a live access token for
    /// it. Returns the refusal, if any: a 401 that tells the client where to sign in.
    pub(crate) fn gate(
        &self,
        sink: &(dyn Fn(Event<'_>) + Sync),
        connector: &'static str,
        token: Option<&str>,
    ) -> Option<Response> {
        let metadata = self.metadata_url(connector);
        let refuse = |e: Option<&AuthError>| {
            let challenge = match e {
                None => format!("Bearer resource_metadata=\"{metadata}\""),
                Some(e) => format!(
                    "Bearer error=\"invalid_token\", error_description=\"{e}\", resource_metadata=\"{metadata}\""
                ),
            };
            let mut r = (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: sign in to this connector (OAuth); its metadata names the way",
            )
                .into_response();
            if let Ok(v) = HeaderValue::from_str(&challenge) {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            r
        };
        let Some(token) = token else {
            return Some(refuse(None));
        };
        match self.store.check(token, connector) {
            Ok(_) => None,
            Err(e) => {
                self.audit(
                    sink,
                    Event {
                        connector,
                        what: "refused",
                        client: "-",
                        outcome: e.code(),
                    },
                    e.code(),
                );
                if matches!(e, AuthError::Store(_)) {
                    return Some(
                        (StatusCode::SERVICE_UNAVAILABLE, "the sign-in store failed")
                            .into_response(),
                    );
                }
                Some(refuse(Some(&e)))
            }
        }
    }
}
