//! `auth.db`: clients, requests waiting for the user, grants and hashed tokens. The server
//! and `gantry auth` open it alike; every change is one transaction.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use base64::Engine as _;
use rusqlite::{Connection, OptionalExtension as _, params};
use sha2::Digest as _;

use crate::document::{MAX_URI_BYTES, site_of};
use crate::error::AuthError;
use crate::pkce;

/// The store's file name in the state directory.
pub const AUTH_DB: &str = "auth.db";
/// How long a request waits for the user's approval.
pub const REQUEST_WAIT_MS: i64 = 5 * 60 * 1000;
/// How long an authorization code can be exchanged, once the user approved.
pub const CODE_MS: i64 = 60 * 1000;
/// How long an access token works.
pub const ACCESS_TOKEN_MS: i64 = 60 * 60 * 1000;
/// How long a refresh token works (each use replaces it).
pub const REFRESH_TOKEN_MS: i64 = 30 * 24 * 60 * 60 * 1000;
/// Requests waiting for the user at once, and per client: anyone who reaches the public host
/// can start one. The user approves by typing the code their own page shows, so the list
/// need not stay short to be safe; it stays bounded.
pub const MAX_PENDING: i64 = 50;
const MAX_PENDING_PER_CLIENT: i64 = 3;
/// Spent refresh tokens kept per grant (to recognise one presented again).
const SPENT_KEPT: i64 = 20;
/// Registered clients kept: registration needs no credential, so the oldest clients that
/// hold no grant make room.
const MAX_CLIENTS: i64 = 200;
/// A client's name as shown, at most.
const MAX_NAME_CHARS: usize = 80;
/// Redirect URIs per client, and their length.
const MAX_REDIRECTS: usize = 8;
/// `last_used_ms` is written at most this often per grant: a write per request would cost
/// more than the check.
const LAST_USED_EVERY_MS: i64 = 60 * 1000;
/// The short code's alphabet: no 0/O, 1/I/L.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS client(
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  redirect_uris TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS request(
  handle_hash TEXT PRIMARY KEY,
  user_code TEXT NOT NULL UNIQUE,
  client_id TEXT NOT NULL,
  connector TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  challenge TEXT NOT NULL,
  state TEXT,
  created_ms INTEGER NOT NULL,
  status TEXT NOT NULL,
  code_hash TEXT UNIQUE,
  code_ms INTEGER,
  grant_id TEXT,
  browser_hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS grants(
  id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  connector TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  last_used_ms INTEGER NOT NULL,
  revoked_ms INTEGER
);
CREATE TABLE IF NOT EXISTS token(
  hash TEXT PRIMARY KEY,
  grant_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  expires_ms INTEGER NOT NULL,
  spent INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS token_grant ON token(grant_id);
";

/// What a client sent to register (RFC 7591), the fields gantry uses.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Registration {
    /// Its name as the user will see it.
    #[serde(default)]
    pub client_name: Option<String>,
    /// Where codes may be sent.
    #[serde(default)]
    pub redirect_uris: Vec<String>,
}

/// A registered client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// Its `client_id`.
    pub id: String,
    /// Its name, cleaned for display.
    pub name: String,
    /// Its redirect URIs, exact.
    pub redirect_uris: Vec<String>,
    /// When it registered.
    pub created_ms: i64,
}

/// An authorization request as the authorization endpoint checked it.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// `client_id`.
    pub client_id: &'a str,
    /// `redirect_uri`: one of the client's, exactly.
    pub redirect_uri: &'a str,
    /// `code_challenge` (S256).
    pub challenge: &'a str,
    /// `state`, handed back unchanged.
    pub state: Option<&'a str>,
    /// The connector the `resource` names.
    pub connector: &'a str,
}

/// A request now waiting for the user.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The waiting page's secret handle: whoever holds it gets the code once approved (and
    /// needs the PKCE verifier to use it).
    pub handle: String,
    /// The short code the user types on the control page.
    pub user_code: String,
    /// When it expires.
    pub expires_ms: i64,
    /// A secret for the browser that made the request (a cookie): only that browser is
    /// shown the code and sent on with the answer.
    pub browser: String,
}

/// A waiting request as the user sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingView {
    /// The short code, `XXXX-XXXX`.
    pub user_code: String,
    /// The client's name.
    pub client_name: String,
    /// The site that vouches for the client: the host serving its client document, or
    /// `None` for a client that registered itself here (its name is its own say-so).
    pub client_site: Option<String>,
    /// Where the code would go (the redirect URI's host).
    pub redirect_host: String,
    /// The connector asked for.
    pub connector: String,
    /// When it was made.
    pub created_ms: i64,
}

/// What the waiting page learns when it looks again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll {
    /// Still waiting for the user.
    Waiting(PendingView),
    /// Approved: send the browser to `redirect` (the code and state in its query).
    Approved {
        /// The client's redirect URI with `code`, `state` and `iss` added.
        redirect: String,
    },
    /// Refused by the user: send the browser back with `error=access_denied`.
    Denied {
        /// The client's redirect URI with the error and `state`.
        redirect: String,
    },
    /// Expired, already answered, or unknown.
    Gone,
    /// Asked by a browser other than the one that made the request (a link someone sent):
    /// it is shown neither the code nor the answer.
    OtherBrowser,
}

/// The user's answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Let the client in.
    Approve,
    /// Refuse it.
    Deny,
}

/// A pair of tokens, handed to the client once and stored only hashed.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The bearer token for the connector.
    pub access_token: String,
    /// The token that gets the next pair.
    pub refresh_token: String,
    /// Seconds the access token works.
    pub expires_in: i64,
    /// The grant they belong to.
    pub grant_id: String,
    /// Its client's name.
    pub client_name: String,
}

/// Who an access token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    /// The grant.
    pub grant_id: String,
    /// The client's name.
    pub client_name: String,
}

/// A grant as the user sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantView {
    /// Its id, what `revoke` takes.
    pub id: String,
    /// The client's name.
    pub client_name: String,
    /// As [`PendingView::client_site`].
    pub client_site: Option<String>,
    /// The connector it opens.
    pub connector: String,
    /// When the user approved it.
    pub created_ms: i64,
    /// When a token of it was last used (to the minute).
    pub last_used_ms: i64,
}

/// The sign-in store.
pub struct Auth {
    conn: Mutex<Connection>,
    clock: Box<dyn Fn() -> i64 + Send + Sync>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Auth")
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// 256 bits from the OS, base64url: every token, code and handle.
fn secret() -> Result<String, AuthError> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| AuthError::Store(format!("no randomness: {e}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

/// What is stored of a secret: its SHA-256, hex. A copy of the file opens nothing.
fn hash(secret: &str) -> String {
    sha2::Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn user_code() -> Result<String, AuthError> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| AuthError::Store(format!("no randomness: {e}")))?;
    let chars: Vec<char> = b
        .iter()
        .map(|x| char::from(CODE_ALPHABET[usize::from(*x) % CODE_ALPHABET.len()]))
        .collect();
    Ok(format!(
        "{}-{}",
        chars[..4].iter().collect::<String>(),
        chars[4..].iter().collect::<String>()
    ))
}

/// `XXXX-XXXX` from what a user typed (any case, with or without the dash or spaces).
fn normalize_code(typed: &str) -> String {
    let plain: String = typed
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if plain.len() == 8 {
        format!("{}-{}", &plain[..4], &plain[4..])
    } else {
        plain
    }
}

/// A name fit to show: control characters dropped, bounded.
fn clean_name(name: &str) -> String {
    // Control characters, and the invisible ones that reorder or hide text (bidi controls,
    // zero-width marks), which could make one name look like another.
    // Line and paragraph separators, and the blank-looking fillers and tag characters too.
    let invisible = |c: char| {
        matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}' | '\u{061C}' | '\u{180E}' | '\u{00AD}'
            | '\u{2028}' | '\u{2029}' | '\u{3164}' | '\u{115F}' | '\u{1160}' | '\u{FFA0}' | '\u{034F}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{E0000}'..='\u{E007F}' | '\u{E0100}'..='\u{E01EF}')
    };
    name.chars()
        .filter(|c| !c.is_control() && !invisible(*c))
        .take(MAX_NAME_CHARS)
        .collect::<String>()
        .trim()
        .to_string()
}

/// Checks a client's redirect URIs: one to [`MAX_REDIRECTS`], each as [`check_redirect`] says.
fn check_redirects(uris: &[String]) -> Result<(), AuthError> {
    if uris.is_empty() || uris.len() > MAX_REDIRECTS {
        return Err(AuthError::InvalidRedirectUri(format!(
            "redirect_uris: give 1 to {MAX_REDIRECTS}"
        )));
    }
    uris.iter().try_for_each(|u| check_redirect(u))
}

/// Whether a redirect URI may receive codes: https anywhere, http only to this machine
/// (RFC 8252 §7.3), never with a fragment or credentials.
fn check_redirect(uri: &str) -> Result<(), AuthError> {
    let refuse = |why: &str| AuthError::InvalidRedirectUri(format!("redirect_uris: {why}"));
    if uri.len() > MAX_URI_BYTES {
        return Err(refuse("longer than 2000 bytes"));
    }
    let parsed = url::Url::parse(uri).map_err(|e| refuse(&format!("not a URL ({e})")))?;
    if parsed.fragment().is_some() {
        return Err(refuse("a redirect URI must not have a fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(refuse("a redirect URI must not carry credentials"));
    }
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" if parsed.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(refuse(
            "only https, or http to this machine (localhost, 127.0.0.1, [::1])",
        )),
    }
}

/// The host a redirect URI sends the user to, for the approval list.
fn redirect_host(uri: &str) -> String {
    url::Url::parse(uri)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default()
}

fn with_query(uri: &str, pairs: &[(&str, &str)]) -> String {
    match url::Url::parse(uri) {
        Ok(mut u) => {
            {
                let mut q = u.query_pairs_mut();
                for (k, v) in pairs {
                    q.append_pair(k, v);
                }
            }
            u.to_string()
        }
        // Checked at registration; never reached.
        Err(_) => uri.to_string(),
    }
}

fn lock(m: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn create_private(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    state_dir::force_private(&options.open(path)?)
}

impl Auth {
    /// Opens (or makes) the store at `path`, readable by the user only.
    pub fn open(path: &Path) -> Result<Auth, AuthError> {
        Auth::open_with_clock(path, Box::new(now_ms))
    }

    /// The same, with the time taken from `clock` (ms since the epoch): tests move it.
    pub fn open_with_clock(
        path: &Path,
        clock: Box<dyn Fn() -> i64 + Send + Sync>,
    ) -> Result<Auth, AuthError> {
        create_private(path).map_err(|e| AuthError::Store(format!("{}: {e}", path.display())))?;
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000;",
        )?;
        conn.execute_batch(SCHEMA)?;
        Ok(Auth {
            conn: Mutex::new(conn),
            clock,
        })
    }

    fn now(&self) -> i64 {
        (self.clock)()
    }

    fn write<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>, i64) -> Result<T, AuthError>,
    ) -> Result<T, AuthError> {
        let now = self.now();
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let out = f(&tx, now);
        // A refusal keeps what it did (a grant ended because its code or refresh token was
        // replayed); only a failure of the store itself is rolled back.
        if !matches!(out, Err(AuthError::Store(_))) {
            tx.commit()?;
        }
        out
    }

    /// Registers a client (RFC 7591): a name to show and its exact redirect URIs.
    pub fn register(&self, reg: &Registration) -> Result<Client, AuthError> {
        let name = clean_name(reg.client_name.as_deref().unwrap_or_default());
        if name.is_empty() {
            return Err(AuthError::InvalidClientMetadata(
                "client_name: required, so the user can tell who asks".into(),
            ));
        }
        check_redirects(&reg.redirect_uris)?;
        let id = secret()?;
        self.keep_client(&id, &name, &reg.redirect_uris)
    }

    /// Keeps the client whose document (fetched from its id, an https URL) is `body`, asked
    /// for with `redirect_uri`: its name and redirect URIs as the document says today, its
    /// site vouching for it. A document that does not hold, or does not list the redirect,
    /// is refused with nothing written.
    pub fn remember_document(
        &self,
        client_id: &str,
        body: &[u8],
        redirect_uri: &str,
    ) -> Result<Client, AuthError> {
        crate::document::document_url(client_id)?;
        let doc = crate::document::Document::parse(client_id, body)?;
        let mut name = clean_name(doc.client_name.as_deref().unwrap_or_default());
        if name.is_empty() {
            name = crate::document::site_of(client_id).unwrap_or_default();
        }
        check_redirects(&doc.redirect_uris)
            .map_err(|e| AuthError::ClientDocument(format!("the client document: {e}")))?;
        if !doc.redirect_uris.iter().any(|u| u == redirect_uri) {
            return Err(AuthError::InvalidRequest(
                "redirect_uri: not one the client registered".into(),
            ));
        }
        self.keep_client(client_id, &name, &doc.redirect_uris)
    }

    /// Writes client `id` (new, or as its document now says), making room among the
    /// clients: registration is open to anyone on the public host, so the oldest that hold no
    /// grant go first; one with a request not yet over is kept too.
    fn keep_client(
        &self,
        id: &str,
        name: &str,
        redirect_uris: &[String],
    ) -> Result<Client, AuthError> {
        let uris =
            serde_json::to_string(redirect_uris).map_err(|e| AuthError::Store(e.to_string()))?;
        let created_ms = self.write(|tx, now| {
            tx.execute(
                "INSERT INTO client(id, name, redirect_uris, created_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(id) DO UPDATE SET name = excluded.name, redirect_uris = excluded.redirect_uris",
                params![id, name, uris, now],
            )?;
            tx.execute(
                "DELETE FROM client WHERE id IN (
                   SELECT id FROM client
                   WHERE id NOT IN (SELECT client_id FROM grants WHERE revoked_ms IS NULL)
                     AND id NOT IN (SELECT client_id FROM request WHERE created_ms >= ?2)
                     AND id <> ?3
                   ORDER BY created_ms DESC LIMIT -1 OFFSET ?1)",
                params![MAX_CLIENTS, now - REQUEST_WAIT_MS - CODE_MS, id],
            )?;
            Ok(tx.query_row(
                "SELECT created_ms FROM client WHERE id = ?1",
                params![id],
                |r| r.get::<_, i64>(0),
            )?)
        })?;
        Ok(Client {
            id: id.to_string(),
            name: name.to_string(),
            redirect_uris: redirect_uris.to_vec(),
            created_ms,
        })
    }

    /// The client registered as `id`.
    pub fn client(&self, id: &str) -> Result<Option<Client>, AuthError> {
        let conn = lock(&self.conn);
        client_of(&conn, id)
    }

    /// Starts a request that waits for the user: the client, its redirect and the
    /// connector checked, nothing granted.
    pub fn begin(&self, req: &Request<'_>) -> Result<Pending, AuthError> {
        if !pkce::challenge_is_well_formed(req.challenge) {
            return Err(AuthError::InvalidRequest(
                "code_challenge: an S256 challenge (43 base64url characters) is required".into(),
            ));
        }
        if req.state.is_some_and(|s| s.len() > MAX_URI_BYTES) {
            return Err(AuthError::InvalidRequest(
                "state: longer than 2000 bytes".into(),
            ));
        }
        let handle = secret()?;
        let browser = secret()?;
        let code = user_code()?;
        self.write(|tx, now| {
            let client = client_of(tx, req.client_id)?.ok_or(AuthError::InvalidClient)?;
            if !client.redirect_uris.iter().any(|u| u == req.redirect_uri) {
                return Err(AuthError::InvalidRequest(
                    "redirect_uri: not one the client registered".into(),
                ));
            }
            tx.execute(
                "DELETE FROM request WHERE created_ms < ?1",
                params![now - REQUEST_WAIT_MS - CODE_MS],
            )?;
            // Counted as the user's list shows them: a request whose client is gone is gone.
            tx.execute(
                "DELETE FROM request WHERE client_id NOT IN (SELECT id FROM client)",
                [],
            )?;
            let (waiting, of_client): (i64, i64) = tx.query_row(
                "SELECT COUNT(*), COALESCE(SUM(client_id = ?2), 0) FROM request
                 WHERE status = 'pending' AND created_ms >= ?1",
                params![now - REQUEST_WAIT_MS, req.client_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            if waiting >= MAX_PENDING || of_client >= MAX_PENDING_PER_CLIENT {
                return Err(AuthError::Busy);
            }
            tx.execute(
                "INSERT INTO request(handle_hash, user_code, client_id, connector, redirect_uri, challenge, state, created_ms, status, browser_hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9)",
                params![
                    hash(&handle),
                    code,
                    req.client_id,
                    req.connector,
                    req.redirect_uri,
                    req.challenge,
                    req.state,
                    now,
                    hash(&browser)
                ],
            )?;
            Ok(Pending {
                handle: handle.clone(),
                user_code: code.clone(),
                expires_ms: now + REQUEST_WAIT_MS,
                browser: browser.clone(),
            })
        })
    }

    /// The requests waiting for the user, oldest first.
    pub fn pending(&self) -> Result<Vec<PendingView>, AuthError> {
        let now = self.now();
        let conn = lock(&self.conn);
        let mut st = conn.prepare(
            "SELECT r.user_code, c.name, r.redirect_uri, r.connector, r.created_ms, c.id
             FROM request r JOIN client c ON c.id = r.client_id
             WHERE r.status = 'pending' AND r.created_ms >= ?1 ORDER BY r.created_ms",
        )?;
        let rows = st.query_map(params![now - REQUEST_WAIT_MS], pending_view)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The user's answer to the request showing `user_code`. Only the user's side (the
    /// control page, `gantry auth approve`) calls this.
    pub fn decide(&self, user_code: &str, approval: Approval) -> Result<PendingView, AuthError> {
        let code = normalize_code(user_code);
        self.write(|tx, now| {
            let view = tx
                .query_row(
                    "SELECT r.user_code, c.name, r.redirect_uri, r.connector, r.created_ms, c.id
                     FROM request r JOIN client c ON c.id = r.client_id
                     WHERE r.user_code = ?1 AND r.status = 'pending' AND r.created_ms >= ?2",
                    params![code, now - REQUEST_WAIT_MS],
                    pending_view,
                )
                .optional()?
                .ok_or_else(|| AuthError::UnknownCode(code.clone()))?;
            let status = match approval {
                Approval::Approve => "approved",
                Approval::Deny => "denied",
            };
            tx.execute(
                "UPDATE request SET status = ?1, code_ms = ?2 WHERE user_code = ?3",
                params![status, now, code],
            )?;
            Ok(view)
        })
    }

    /// What the waiting page holding `handle`, in the browser holding `browser` (its
    /// cookie), should do now. An approved request yields its code once: a second look finds
    /// it gone. Another browser is told nothing.
    pub fn poll(
        &self,
        handle: &str,
        browser: Option<&str>,
        issuer: &str,
    ) -> Result<Poll, AuthError> {
        let handle_hash = hash(handle);
        self.write(|tx, now| {
            let Some((status, code, client, redirect, connector, created, decided, state, browser_hash, client_id)) = tx
                .query_row(
                    "SELECT r.status, r.user_code, c.name, r.redirect_uri, r.connector, r.created_ms, r.code_ms, r.state, r.browser_hash, c.id
                     FROM request r JOIN client c ON c.id = r.client_id WHERE r.handle_hash = ?1",
                    params![handle_hash],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, i64>(5)?,
                            r.get::<_, Option<i64>>(6)?,
                            r.get::<_, Option<String>>(7)?,
                            r.get::<_, String>(8)?,
                            r.get::<_, String>(9)?,
                        ))
                    },
                )
                .optional()?
            else {
                return Ok(Poll::Gone);
            };
            let same_browser = browser.is_some_and(|b| {
                subtle::ConstantTimeEq::ct_eq(hash(b).as_bytes(), browser_hash.as_bytes()).into()
            });
            if !same_browser {
                return Ok(Poll::OtherBrowser);
            }
            let mut back: Vec<(&str, &str)> = Vec::new();
            if let Some(s) = state.as_deref() {
                back.push(("state", s));
            }
            back.push(("iss", issuer));
            match status.as_str() {
                "pending" if now - created <= REQUEST_WAIT_MS => Ok(Poll::Waiting(PendingView {
                    user_code: code,
                    client_name: client,
                    client_site: site_of(&client_id),
                    redirect_host: redirect_host(&redirect),
                    connector,
                    created_ms: created,
                })),
                "approved" if decided.is_some_and(|d| now - d <= CODE_MS) => {
                    let auth_code = secret()?;
                    tx.execute(
                        "UPDATE request SET status = 'delivered', code_hash = ?1 WHERE handle_hash = ?2",
                        params![hash(&auth_code), handle_hash],
                    )?;
                    back.insert(0, ("code", &auth_code));
                    Ok(Poll::Approved {
                        redirect: with_query(&redirect, &back),
                    })
                }
                "denied" => {
                    tx.execute(
                        "DELETE FROM request WHERE handle_hash = ?1",
                        params![handle_hash],
                    )?;
                    back.insert(0, ("error", "access_denied"));
                    Ok(Poll::Denied {
                        redirect: with_query(&redirect, &back),
                    })
                }
                _ => Ok(Poll::Gone),
            }
        })
    }

    /// Exchanges an authorization code (once, within [`CODE_MS`]) for tokens: the client,
    /// the redirect URI, the PKCE verifier and the connector must all be the request's.
    pub fn exchange(
        &self,
        code: &str,
        verifier: &str,
        client_id: &str,
        redirect_uri: &str,
        connector: Option<&str>,
    ) -> Result<Issued, AuthError> {
        let refused = "the code is unknown, used, expired, or was issued for another client, redirect_uri, code_verifier or resource";
        self.write(|tx, now| {
            let row = tx
                .query_row(
                    "SELECT client_id, redirect_uri, challenge, connector, code_ms, status, grant_id
                     FROM request WHERE code_hash = ?1",
                    params![hash(code)],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, Option<i64>>(4)?,
                            r.get::<_, String>(5)?,
                            r.get::<_, Option<String>>(6)?,
                        ))
                    },
                )
                .optional()?;
            let Some((rc, rr, challenge, rconn, decided, status, grant)) = row else {
                return Err(AuthError::InvalidGrant(refused));
            };
            if status == "exchanged" {
                // A code used twice was seen by someone else: what it gave is taken back
                // (RFC 6749 §4.1.2).
                if let Some(g) = grant {
                    revoke_in(tx, &g, now)?;
                }
                return Err(AuthError::InvalidGrant(refused));
            }
            let fresh = decided.is_some_and(|d| now - d <= CODE_MS);
            if !fresh
                || rc != client_id
                || rr != redirect_uri
                || connector.is_some_and(|c| c != rconn)
                || !pkce::verifier_matches(verifier, &challenge)
            {
                return Err(AuthError::InvalidGrant(refused));
            }
            let grant_id = secret()?[..16].to_string();
            tx.execute(
                "INSERT INTO grants(id, client_id, connector, created_ms, last_used_ms) VALUES (?1, ?2, ?3, ?4, ?4)",
                params![grant_id, client_id, rconn, now],
            )?;
            tx.execute(
                "UPDATE request SET status = 'exchanged', grant_id = ?1 WHERE code_hash = ?2",
                params![grant_id, hash(code)],
            )?;
            issue(tx, &grant_id, now)
        })
    }

    /// A new pair of tokens for a refresh token, which is spent by it. A spent refresh token
    /// presented again ends its grant: one of the two holders is not the client.
    pub fn refresh(
        &self,
        refresh_token: &str,
        client_id: &str,
        connector: Option<&str>,
    ) -> Result<Issued, AuthError> {
        let refused = "the refresh token is unknown, expired, revoked, or was issued for another client or resource";
        self.write(|tx, now| {
            let row = tx
                .query_row(
                    "SELECT t.grant_id, t.expires_ms, t.spent, g.client_id, g.connector, g.revoked_ms
                     FROM token t JOIN grants g ON g.id = t.grant_id
                     WHERE t.hash = ?1 AND t.kind = 'refresh'",
                    params![hash(refresh_token)],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, bool>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, Option<i64>>(5)?,
                        ))
                    },
                )
                .optional()?;
            let Some((grant, expires, spent, gc, gconn, revoked)) = row else {
                return Err(AuthError::InvalidGrant(refused));
            };
            if spent {
                revoke_in(tx, &grant, now)?;
                return Err(AuthError::InvalidGrant(refused));
            }
            if revoked.is_some()
                || expires < now
                || gc != client_id
                || connector.is_some_and(|c| c != gconn)
            {
                return Err(AuthError::InvalidGrant(refused));
            }
            tx.execute(
                "UPDATE token SET spent = 1 WHERE hash = ?1",
                params![hash(refresh_token)],
            )?;
            issue(tx, &grant, now)
        })
    }

    /// Who `access_token` speaks for on `connector`: refused when it is unknown, expired,
    /// revoked, or for another connector.
    pub fn check(&self, access_token: &str, connector: &str) -> Result<Granted, AuthError> {
        let now = self.now();
        let conn = lock(&self.conn);
        let row = conn
            .prepare_cached(
                "SELECT t.grant_id, t.expires_ms, g.connector, g.revoked_ms, g.last_used_ms, c.name
                 FROM token t JOIN grants g ON g.id = t.grant_id LEFT JOIN client c ON c.id = g.client_id
                 WHERE t.hash = ?1 AND t.kind = 'access'",
            )?
            .query_row(params![hash(access_token)], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<String>>(5)?,
                ))
            })
            .optional()?;
        let Some((grant_id, expires, gconn, revoked, last_used, name)) = row else {
            return Err(AuthError::InvalidToken(
                "the access token is not known here",
            ));
        };
        if revoked.is_some() {
            return Err(AuthError::InvalidToken(
                "the access token's grant was revoked",
            ));
        }
        if expires < now {
            return Err(AuthError::InvalidToken("the access token expired"));
        }
        if gconn != connector {
            return Err(AuthError::InvalidToken(
                "the access token is for another connector",
            ));
        }
        if now - last_used >= LAST_USED_EVERY_MS {
            conn.execute(
                "UPDATE grants SET last_used_ms = ?1 WHERE id = ?2",
                params![now, grant_id],
            )?;
        }
        Ok(Granted {
            grant_id,
            client_name: name.unwrap_or_default(),
        })
    }

    /// The grants in force, newest first.
    pub fn grants(&self) -> Result<Vec<GrantView>, AuthError> {
        let conn = lock(&self.conn);
        let mut st = conn.prepare(
            "SELECT g.id, COALESCE(c.name, ''), g.connector, g.created_ms, g.last_used_ms, g.client_id
             FROM grants g LEFT JOIN client c ON c.id = g.client_id
             WHERE g.revoked_ms IS NULL ORDER BY g.created_ms DESC",
        )?;
        let rows = st.query_map([], |r| {
            Ok(GrantView {
                id: r.get(0)?,
                client_name: r.get(1)?,
                client_site: site_of(&r.get::<_, String>(5)?),
                connector: r.get(2)?,
                created_ms: r.get(3)?,
                last_used_ms: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Ends grant `id`: its tokens stop working at their next use. Returns what it was.
    pub fn revoke(&self, id: &str) -> Result<GrantView, AuthError> {
        let id = id.trim();
        let view = self
            .grants()?
            .into_iter()
            .find(|g| g.id == id)
            .ok_or_else(|| AuthError::InvalidRequest(format!("no grant in force has id {id}")))?;
        self.write(|tx, now| revoke_in(tx, id, now))?;
        Ok(view)
    }
}

/// A waiting request as the user sees it, from a row of (code, client name, redirect URI,
/// connector, created, client id).
fn pending_view(r: &rusqlite::Row<'_>) -> rusqlite::Result<PendingView> {
    Ok(PendingView {
        user_code: r.get(0)?,
        client_name: r.get(1)?,
        client_site: site_of(&r.get::<_, String>(5)?),
        redirect_host: redirect_host(&r.get::<_, String>(2)?),
        connector: r.get(3)?,
        created_ms: r.get(4)?,
    })
}

fn client_of(conn: &Connection, id: &str) -> Result<Option<Client>, AuthError> {
    let row = conn
        .query_row(
            "SELECT id, name, redirect_uris, created_ms FROM client WHERE id = ?1",
            params![id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            },
        )
        .optional()?;
    Ok(row.map(|(id, name, uris, created_ms)| Client {
        id,
        name,
        redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
        created_ms,
    }))
}

fn revoke_in(tx: &Connection, grant: &str, now: i64) -> Result<(), AuthError> {
    tx.execute(
        "UPDATE grants SET revoked_ms = ?1 WHERE id = ?2 AND revoked_ms IS NULL",
        params![now, grant],
    )?;
    tx.execute("DELETE FROM token WHERE grant_id = ?1", params![grant])?;
    Ok(())
}

fn issue(tx: &Connection, grant: &str, now: i64) -> Result<Issued, AuthError> {
    tx.execute(
        // Spent refresh tokens stay until they expire: one presented again ends the grant.
        "DELETE FROM token WHERE grant_id = ?1 AND expires_ms < ?2",
        params![grant, now],
    )?;
    tx.execute(
        "DELETE FROM token WHERE hash IN (
           SELECT hash FROM token WHERE grant_id = ?1 AND spent = 1
           ORDER BY expires_ms DESC LIMIT -1 OFFSET ?2)",
        params![grant, SPENT_KEPT],
    )?;
    let client_name: String = tx
        .query_row(
            "SELECT COALESCE(c.name, '') FROM grants g LEFT JOIN client c ON c.id = g.client_id WHERE g.id = ?1",
            params![grant],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or_default();
    let access = secret()?;
    let refresh = secret()?;
    tx.execute(
        "INSERT INTO token(hash, grant_id, kind, expires_ms) VALUES (?1, ?2, 'access', ?3), (?4, ?2, 'refresh', ?5)",
        params![
            hash(&access),
            grant,
            now + ACCESS_TOKEN_MS,
            hash(&refresh),
            now + REFRESH_TOKEN_MS
        ],
    )?;
    Ok(Issued {
        access_token: access,
        refresh_token: refresh,
        expires_in: ACCESS_TOKEN_MS / 1000,
        grant_id: grant.to_string(),
        client_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};

    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
    const REDIRECT: &str = "https://chatgpt.com/connector_platform_oauth_redirect";
    const ISSUER: &str = "https://example.trycloudflare.com";

    fn store() -> (tempfile::TempDir, Auth, Arc<AtomicI64>) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(AtomicI64::new(1_000_000));
        let c = clock.clone();
        let auth = Auth::open_with_clock(
            &dir.path().join(AUTH_DB),
            Box::new(move || c.load(Ordering::SeqCst)),
        )
        .unwrap();
        (dir, auth, clock)
    }

    #[test]
    fn a_document_is_kept_only_when_it_lists_the_redirect_asked_for() {
        let (_dir, auth, _clock) = store();
        let id = "https://example.com/client.json";
        let body = br#"{"client_id":"https://example.com/client.json","client_name":"Example\u2028 \u3164App","redirect_uris":["https://example.com/cb"]}"#;
        let refused = auth
            .remember_document(id, body, "https://example.com/other")
            .unwrap_err();
        assert!(refused.to_string().contains("redirect_uri"), "{refused}");
        assert!(auth.client(id).unwrap().is_none(), "nothing written");
        let kept = auth
            .remember_document(id, body, "https://example.com/cb")
            .unwrap();
        // Invisible and line-breaking characters are taken out of the name.
        assert_eq!(kept.name, "Example App");
        assert_eq!(auth.client(id).unwrap().unwrap().name, "Example App");
    }

    fn client(auth: &Auth) -> Client {
        auth.register(&Registration {
            client_name: Some("ChatGPT\u{1b}[31m".into()),
            redirect_uris: vec![REDIRECT.into()],
        })
        .unwrap()
    }

    fn request<'a>(client: &'a Client, connector: &'a str) -> Request<'a> {
        Request {
            client_id: &client.id,
            redirect_uri: REDIRECT,
            challenge: CHALLENGE,
            state: Some("xyz"),
            connector,
        }
    }

    fn code_of(redirect: &str) -> String {
        let u = url::Url::parse(redirect).unwrap();
        u.query_pairs()
            .find(|(k, _)| k == "code")
            .map(|(_, v)| v.into_owned())
            .unwrap()
    }

    /// Approves a fresh request and returns its authorization code.
    fn approved_code(auth: &Auth, client: &Client, connector: &str) -> String {
        let p = auth.begin(&request(client, connector)).unwrap();
        auth.decide(
            &p.user_code.to_lowercase().replace('-', " "),
            Approval::Approve,
        )
        .unwrap();
        match auth.poll(&p.handle, Some(&p.browser), ISSUER).unwrap() {
            Poll::Approved { redirect } => {
                assert!(redirect.starts_with(REDIRECT), "{redirect}");
                assert!(
                    redirect.contains("state=xyz") && redirect.contains("iss="),
                    "{redirect}"
                );
                code_of(&redirect)
            }
            other => panic!("not approved: {other:?}"),
        }
    }

    #[test]
    fn a_request_waits_for_the_user_and_its_code_is_bound_to_client_redirect_verifier_and_connector()
     {
        let (_d, auth, _) = store();
        let c = client(&auth);
        assert_eq!(c.name, "ChatGPT[31m", "control characters are dropped");
        let p = auth.begin(&request(&c, "core")).unwrap();
        // Nothing is granted by asking again.
        assert!(matches!(
            auth.poll(&p.handle, Some(&p.browser), ISSUER).unwrap(),
            Poll::Waiting(_)
        ));
        assert_eq!(auth.pending().unwrap()[0].redirect_host, "chatgpt.com");
        auth.decide(&p.user_code, Approval::Approve).unwrap();
        // A link to the waiting page opened in another browser is told nothing, approved
        // or not, and takes nothing away from the browser that asked.
        for other in [None, Some("another browser's cookie")] {
            assert_eq!(
                auth.poll(&p.handle, other, ISSUER).unwrap(),
                Poll::OtherBrowser
            );
        }
        let Poll::Approved { redirect } = auth.poll(&p.handle, Some(&p.browser), ISSUER).unwrap()
        else {
            panic!("approved")
        };
        // The code is handed out once.
        assert_eq!(
            auth.poll(&p.handle, Some(&p.browser), ISSUER).unwrap(),
            Poll::Gone
        );
        let code = code_of(&redirect);
        let wrong_verifier = VERIFIER.replace('d', "e");
        for (verifier, client_id, redirect_uri, connector) in [
            (wrong_verifier.as_str(), c.id.as_str(), REDIRECT, "core"),
            (VERIFIER, "someone-else", REDIRECT, "core"),
            (VERIFIER, c.id.as_str(), "https://evil.example/cb", "core"),
            (VERIFIER, c.id.as_str(), REDIRECT, "files"),
        ] {
            let e = auth
                .exchange(&code, verifier, client_id, redirect_uri, Some(connector))
                .unwrap_err();
            assert_eq!(e.code(), "invalid_grant");
        }
        let issued = auth
            .exchange(&code, VERIFIER, &c.id, REDIRECT, Some("core"))
            .unwrap();
        assert_eq!(
            auth.check(&issued.access_token, "core").unwrap().grant_id,
            issued.grant_id
        );
        assert_eq!(
            auth.check(&issued.access_token, "files")
                .unwrap_err()
                .code(),
            "invalid_token",
            "a token never works on another connector"
        );
        assert!(auth.check(&issued.refresh_token, "core").is_err());
        // The same code again: refused, and what it gave is taken back.
        assert!(
            auth.exchange(&code, VERIFIER, &c.id, REDIRECT, Some("core"))
                .is_err()
        );
        assert!(auth.check(&issued.access_token, "core").is_err());
    }

    #[test]
    fn refresh_rotates_and_a_replayed_refresh_token_ends_the_grant() {
        let (_d, auth, _) = store();
        let c = client(&auth);
        let code = approved_code(&auth, &c, "core");
        let first = auth
            .exchange(&code, VERIFIER, &c.id, REDIRECT, Some("core"))
            .unwrap();
        assert!(
            auth.refresh(&first.refresh_token, &c.id, Some("files"))
                .is_err()
        );
        let second = auth
            .refresh(&first.refresh_token, &c.id, Some("core"))
            .unwrap();
        assert!(auth.check(&second.access_token, "core").is_ok());
        let e = auth
            .refresh(&first.refresh_token, &c.id, Some("core"))
            .unwrap_err();
        assert_eq!(e.code(), "invalid_grant");
        assert!(auth.check(&second.access_token, "core").is_err());
        assert!(
            auth.refresh(&second.refresh_token, &c.id, Some("core"))
                .is_err()
        );
        assert!(auth.grants().unwrap().is_empty());
    }

    #[test]
    fn tokens_expire_requests_expire_and_revocation_stops_the_next_use() {
        let (_d, auth, clock) = store();
        let c = client(&auth);
        let code = approved_code(&auth, &c, "core");
        let issued = auth
            .exchange(&code, VERIFIER, &c.id, REDIRECT, Some("core"))
            .unwrap();
        clock.fetch_add(ACCESS_TOKEN_MS + 1, Ordering::SeqCst);
        assert_eq!(
            auth.check(&issued.access_token, "core")
                .unwrap_err()
                .to_string(),
            "the access token expired"
        );
        let again = auth
            .refresh(&issued.refresh_token, &c.id, Some("core"))
            .unwrap();
        let listed = auth.grants().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].connector, "core");
        auth.revoke(&listed[0].id).unwrap();
        assert!(auth.check(&again.access_token, "core").is_err());
        assert!(
            auth.refresh(&again.refresh_token, &c.id, Some("core"))
                .is_err()
        );

        // A request nobody approves expires, and cannot be approved after.
        let p = auth.begin(&request(&c, "core")).unwrap();
        clock.fetch_add(REQUEST_WAIT_MS + 1, Ordering::SeqCst);
        assert!(auth.pending().unwrap().is_empty());
        assert_eq!(
            auth.decide(&p.user_code, Approval::Approve)
                .unwrap_err()
                .code(),
            "unknown_code"
        );
        assert_eq!(
            auth.poll(&p.handle, Some(&p.browser), ISSUER).unwrap(),
            Poll::Gone
        );

        // A code not exchanged in time is refused.
        let code = approved_code(&auth, &c, "core");
        clock.fetch_add(CODE_MS + 1, Ordering::SeqCst);
        assert!(
            auth.exchange(&code, VERIFIER, &c.id, REDIRECT, Some("core"))
                .is_err()
        );
    }

    #[test]
    fn a_denied_request_goes_back_with_access_denied() {
        let (_d, auth, _) = store();
        let c = client(&auth);
        let p = auth.begin(&request(&c, "core")).unwrap();
        auth.decide(&p.user_code, Approval::Deny).unwrap();
        let Poll::Denied { redirect } = auth.poll(&p.handle, Some(&p.browser), ISSUER).unwrap()
        else {
            panic!("denied")
        };
        assert!(redirect.contains("error=access_denied") && redirect.contains("state=xyz"));
        assert!(auth.grants().unwrap().is_empty());
    }

    #[test]
    fn bad_registrations_and_requests_are_refused_naming_the_field() {
        let (_d, auth, _) = store();
        for (name, uri, field) in [
            (Some("x"), "http://example.com/cb", "redirect_uris"),
            (Some("x"), "https://example.com/cb#frag", "redirect_uris"),
            (Some("x"), "https://user:pw@example.com/cb", "redirect_uris"),
            (Some("x"), "javascript:alert(1)", "redirect_uris"),
            (None, "https://example.com/cb", "client_name"),
        ] {
            let e = auth
                .register(&Registration {
                    client_name: name.map(str::to_string),
                    redirect_uris: vec![uri.into()],
                })
                .unwrap_err();
            assert!(e.to_string().starts_with(field), "{uri}: {e}");
        }
        assert!(
            auth.register(&Registration {
                client_name: Some("local".into()),
                redirect_uris: vec!["http://127.0.0.1:33418/callback".into()],
            })
            .is_ok()
        );
        let hidden = auth
            .register(&Registration {
                client_name: Some("Chat\u{202E}G\u{200B}PT\u{FEFF}".into()),
                redirect_uris: vec![REDIRECT.into()],
            })
            .unwrap();
        assert_eq!(hidden.name, "ChatGPT", "invisible characters are dropped");
        let c = client(&auth);
        let mut r = request(&c, "core");
        r.redirect_uri = "https://chatgpt.com/other";
        assert!(
            auth.begin(&r)
                .unwrap_err()
                .to_string()
                .starts_with("redirect_uri")
        );
        let mut r = request(&c, "core");
        r.challenge = "plain";
        assert!(
            auth.begin(&r)
                .unwrap_err()
                .to_string()
                .starts_with("code_challenge")
        );
        let mut r = request(&c, "core");
        r.client_id = "nobody";
        assert_eq!(auth.begin(&r).unwrap_err().code(), "invalid_client");
    }

    #[test]
    fn the_waiting_list_is_bounded_and_only_hashes_are_stored() {
        let (dir, auth, _) = store();
        let c = client(&auth);
        let mut handles = Vec::new();
        for _ in 0..MAX_PENDING_PER_CLIENT {
            handles.push(auth.begin(&request(&c, "core")).unwrap());
        }
        // One client cannot fill the list; many can, up to its bound.
        assert_eq!(
            auth.begin(&request(&c, "core")).unwrap_err().code(),
            "temporarily_unavailable"
        );
        let others: Vec<Client> = (MAX_PENDING_PER_CLIENT..MAX_PENDING)
            .map(|_| client(&auth))
            .collect();
        for o in &others {
            auth.begin(&request(o, "core")).unwrap();
        }
        let late = client(&auth);
        assert_eq!(
            auth.begin(&request(&late, "core")).unwrap_err().code(),
            "temporarily_unavailable"
        );
        // A flood of registrations drops no client whose request still waits.
        for _ in 0..MAX_CLIENTS {
            client(&auth);
        }
        assert_eq!(auth.pending().unwrap().len() as i64, MAX_PENDING);
        assert!(auth.client(&c.id).unwrap().is_some());
        let code = {
            let p = auth.pending().unwrap()[0].user_code.clone();
            auth.decide(&p, Approval::Approve).unwrap();
            handles
                .iter()
                .find_map(
                    |h| match auth.poll(&h.handle, Some(&h.browser), ISSUER).unwrap() {
                        Poll::Approved { redirect } => Some(code_of(&redirect)),
                        _ => None,
                    },
                )
                .unwrap()
        };
        let issued = auth
            .exchange(&code, VERIFIER, &c.id, REDIRECT, Some("core"))
            .unwrap();
        drop(auth);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join(AUTH_DB))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let mut bytes = Vec::new();
        for e in std::fs::read_dir(dir.path()).unwrap() {
            bytes.extend(std::fs::read(e.unwrap().path()).unwrap());
        }
        let text = String::from_utf8_lossy(&bytes);
        for secret in [
            &issued.access_token,
            &issued.refresh_token,
            &code,
            &handles[0].handle,
            &handles[0].browser,
        ] {
            assert!(
                !text.contains(secret.as_str()),
                "a secret was stored in clear"
            );
        }
    }
}
