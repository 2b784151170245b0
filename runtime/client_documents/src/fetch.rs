//! The guarded GET of a client document: resolve, check every address, connect to the
//! checked one, TLS against the compiled-in roots, one HTTP/1.1 request, a bounded body.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject as _};
use tokio::sync::Semaphore;

use crate::address::is_public;

/// The most a client document may weigh (the draft's own suggestion).
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// How long a fetch may take, from the lookup to the last byte.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Fetches under way at once; more are refused rather than queued, so a flood of sign-in
/// requests naming slow URLs holds no more than this.
const AT_ONCE: usize = 8;
/// The most the answer's status line and headers may weigh (hyper's least).
const MAX_HEAD_BYTES: usize = 8192;
/// How long a document fetched whole stays good: a client signing in again within it is not
/// fetched again, and a flood of slow URLs cannot keep it out.
const KEPT_FOR: Duration = Duration::from_secs(10 * 60);
/// Documents kept at most.
const KEPT_MAX: usize = 64;
/// Longest error text taken from below (TLS, sockets).
const MAX_WHY_CHARS: usize = 160;

/// A fetch that did not give a document. The message names the URL's host, never its path,
/// query, the addresses it resolves to or what the site sent.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Not an https URL with a host.
    #[error("client_id: a client document is fetched only from an https URL with a host")]
    NotHttps,
    /// The name did not resolve.
    #[error("client_id: `{0}` could not be looked up")]
    Lookup(String),
    /// The name resolves to an address that is not public, or that is this machine's own.
    #[error(
        "client_id: `{0}` does not lead to a public address of another machine; client documents are fetched only from the public internet"
    )]
    NotPublic(String),
    /// The connection or TLS failed.
    #[error("client_id: `{host}` could not be reached over https ({why})")]
    Unreachable {
        /// The URL's host.
        host: String,
        /// What failed (no secret: the TLS or socket error).
        why: String,
    },
    /// Anything but 200.
    #[error(
        "client_id: `{host}` answered HTTP {status} for the client document (redirects are not followed)"
    )]
    Status {
        /// The URL's host.
        host: String,
        /// Its status.
        status: u16,
    },
    /// Over [`MAX_DOCUMENT_BYTES`] (or its head over [`MAX_HEAD_BYTES`]).
    #[error("client_id: the client document at `{0}` is over 5 KiB")]
    TooLarge(String),
    /// Over [`FETCH_TIMEOUT`].
    #[error("client_id: the client document at `{0}` did not arrive within 5 s")]
    TimedOut(String),
    /// [`AT_ONCE`] fetches are under way.
    #[error("client_id: too many client documents are being fetched; try again in a moment")]
    Busy,
}

/// Which addresses a [`Fetcher`] may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Public addresses only: a server whose public host is on the internet.
    Public,
    /// Public ones and this machine's loopback: a server whose public host is itself a
    /// loopback name (a trial, or the tests), which nobody else can reach anyway.
    PublicAndLoopback,
}

/// Fetches client documents.
pub struct Fetcher {
    tls: tokio_rustls::TlsConnector,
    reach: Reach,
    slots: Semaphore,
    /// Documents fetched whole lately, by URL: when, and the body.
    kept: std::sync::Mutex<Vec<(String, std::time::Instant, Bytes)>>,
}

impl Fetcher {
    /// A fetcher trusting Mozilla's roots and those in `SSL_CERT_FILE`, if set. A file
    /// that cannot be read adds nothing (and the log says so): fewer sites are trusted,
    /// never more.
    pub fn new(reach: Reach) -> Result<Fetcher, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(file) = std::env::var_os("SSL_CERT_FILE") {
            let read = CertificateDer::pem_file_iter(&file)
                .map_err(|e| e.to_string())
                .and_then(|certs| {
                    certs
                        .map(|c| c.map_err(|e| e.to_string()))
                        .collect::<Result<Vec<_>, _>>()
                });
            match read {
                Ok(certs) => {
                    let (_, refused) = roots.add_parsable_certificates(certs);
                    if refused > 0 {
                        tracing::warn!(
                            file = %file.to_string_lossy(),
                            refused,
                            "SSL_CERT_FILE holds certificates that are not usable as roots; they are not trusted"
                        );
                    }
                }
                Err(e) => tracing::warn!(
                    file = %file.to_string_lossy(),
                    "SSL_CERT_FILE cannot be read ({e}); client documents are checked against the built-in roots only"
                ),
            }
        }
        // ring lacks the post-quantum key exchange (hence the deprecation); what crosses
        // this connection is a public document whose integrity matters, not its secrecy in
        // ten years, and aws-lc would need cmake and break the cross builds.
        #[allow(deprecated)]
        let provider = rustls::crypto::ring::default_provider();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Fetcher {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            reach,
            slots: Semaphore::new(AT_ONCE),
            kept: std::sync::Mutex::default(),
        })
    }

    /// The document at `url`: its body, when the answer was 200 within the bounds (or it
    /// was, within the last ten minutes).
    pub async fn fetch(&self, url: &url::Url) -> Result<Bytes, FetchError> {
        let host = match (url.scheme(), url.host_str()) {
            ("https", Some(h)) => h.to_string(),
            _ => return Err(FetchError::NotHttps),
        };
        if let Some(body) = self.kept(url.as_str()) {
            return Ok(body);
        }
        let _slot = self.slots.try_acquire().map_err(|_| FetchError::Busy)?;
        let body = tokio::time::timeout(FETCH_TIMEOUT, self.get(url, &host))
            .await
            .map_err(|_| FetchError::TimedOut(host.clone()))??;
        self.keep(url.as_str(), body.clone());
        Ok(body)
    }

    fn kept(&self, url: &str) -> Option<Bytes> {
        let kept = match self.kept.lock() {
            Ok(k) => k,
            Err(p) => p.into_inner(),
        };
        kept.iter()
            .find(|(u, at, _)| u == url && at.elapsed() < KEPT_FOR)
            .map(|(_, _, body)| body.clone())
    }

    fn keep(&self, url: &str, body: Bytes) {
        let mut kept = match self.kept.lock() {
            Ok(k) => k,
            Err(p) => p.into_inner(),
        };
        kept.retain(|(u, at, _)| u != url && at.elapsed() < KEPT_FOR);
        if kept.len() >= KEPT_MAX {
            kept.remove(0);
        }
        kept.push((url.to_string(), std::time::Instant::now(), body));
    }

    async fn get(&self, url: &url::Url, host: &str) -> Result<Bytes, FetchError> {
        let address = self.address_of(url, host).await?;
        let unreachable = |why: String| FetchError::Unreachable {
            host: host.to_string(),
            why: why.chars().take(MAX_WHY_CHARS).collect(),
        };
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let name = match url.host() {
            Some(url::Host::Ipv4(ip)) => ServerName::IpAddress(IpAddr::V4(ip).into()),
            Some(url::Host::Ipv6(ip)) => ServerName::IpAddress(IpAddr::V6(ip).into()),
            _ => ServerName::try_from(host.to_string()).map_err(|e| unreachable(e.to_string()))?,
        };
        let tls = self.tls.connect(name, tcp).await.map_err(|e| {
            // Not rustls's own words: they list every name the certificate holds.
            let refused = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)));
            unreachable(if refused {
                "its certificate is not trusted, or not for this name".to_string()
            } else {
                "the TLS handshake failed".to_string()
            })
        })?;
        let (mut send, connection) = hyper::client::conn::http1::Builder::new()
            .max_buf_size(MAX_HEAD_BYTES)
            .handshake(TokioIo::new(tls))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        // The connection is driven beside the request; it ends with the fetch's timeout at
        // the latest, as dropping the task's handle does not stop it.
        let driver = tokio::spawn(connection);
        let _stop = AbortOnDrop(driver);
        let target = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        let authority = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or(host)),
            None => url.host_str().unwrap_or(host).to_string(),
        };
        let request = http::Request::get(target)
            .header(http::header::HOST, authority)
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::USER_AGENT,
                concat!("gantry/", env!("CARGO_PKG_VERSION")),
            )
            .body(Empty::<Bytes>::new())
            .map_err(|e| unreachable(e.to_string()))?;
        let response = send.send_request(request).await.map_err(|e| {
            if e.is_parse_too_large() {
                FetchError::TooLarge(host.to_string())
            } else {
                unreachable(e.to_string())
            }
        })?;
        if response.status() != http::StatusCode::OK {
            return Err(FetchError::Status {
                host: host.to_string(),
                status: response.status().as_u16(),
            });
        }
        let too_large = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64);
        if too_large {
            return Err(FetchError::TooLarge(host.to_string()));
        }
        Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    FetchError::TooLarge(host.to_string())
                } else {
                    unreachable(e.to_string())
                }
            })
    }

    /// The one address to connect to: the name resolved once, every address it gives checked
    /// (a name that mixes a public address with a private one is refused, not filtered), and
    /// none of them this machine's own (a public address on one of its interfaces reaches its
    /// services as loopback would).
    async fn address_of(&self, url: &url::Url, host: &str) -> Result<SocketAddr, FetchError> {
        let port = url.port_or_known_default().unwrap_or(443);
        let addresses: Vec<SocketAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(ip.into(), port)],
            Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(ip.into(), port)],
            _ => tokio::net::lookup_host((host, port))
                .await
                .map_err(|_| FetchError::Lookup(host.to_string()))?
                .collect(),
        };
        let loopback_ok = self.reach == Reach::PublicAndLoopback;
        for a in &addresses {
            let allowed = if a.ip().is_loopback() {
                loopback_ok
            } else {
                is_public(a.ip()) && !is_own(*a).await
            };
            if !allowed {
                return Err(FetchError::NotPublic(host.to_string()));
            }
        }
        addresses
            .first()
            .copied()
            .ok_or_else(|| FetchError::Lookup(host.to_string()))
    }
}

/// Whether `to` is an address of this machine: the route the kernel picks for it starts from
/// that same address. A UDP socket's `connect` only looks the route up; nothing is sent. A
/// route that cannot be found counts as this machine's, so the fetch is refused.
async fn is_own(to: SocketAddr) -> bool {
    let any: SocketAddr = if to.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let Ok(socket) = tokio::net::UdpSocket::bind(any).await else {
        return true;
    };
    if socket.connect(to).await.is_err() {
        return true;
    }
    socket
        .local_addr()
        .map_or(true, |from| from.ip() == to.ip())
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_ssl_cert_file_adds_nothing_and_stops_nothing() {
        // No other test of this crate reads the environment, so none races this write.
        #[allow(unsafe_code)]
        // SAFETY: no other thread of this test binary reads or writes the environment.
        unsafe {
            std::env::set_var("SSL_CERT_FILE", "/nonexistent/gantry-test-ca.pem");
        }
        assert!(Fetcher::new(Reach::Public).is_ok());
    }
}
