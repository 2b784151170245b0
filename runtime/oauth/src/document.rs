//! Clients known by a client ID metadata document (the `client_id` is an https URL whose
//! document lists the client's name and redirect URIs): what such an id and its document
//! must look like. The site serving the document vouches for the client, which a client
//! that registered itself cannot claim.

use crate::error::AuthError;

/// The longest URI taken from a client (a client id, a redirect, a `state`).
pub(crate) const MAX_URI_BYTES: usize = 2000;

/// Whether `client_id` names a client document rather than a client registered here (ids
/// given at registration are random and never look like a URL).
pub fn is_document_id(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

/// The URL `client_id` names, when it is a client document's as the draft requires: https,
/// a host, a path other than `/`, no credentials, no fragment, no `.` or `..` segment, and
/// written in its normal form (ids are compared as strings).
pub fn document_url(client_id: &str) -> Result<url::Url, AuthError> {
    let refuse = |why: &str| AuthError::ClientDocument(format!("client_id: {why}"));
    if client_id.len() > MAX_URI_BYTES {
        return Err(refuse("longer than 2000 bytes"));
    }
    let url = url::Url::parse(client_id).map_err(|e| refuse(&format!("not a URL ({e})")))?;
    if url.scheme() != "https" || url.host().is_none() {
        return Err(refuse("a client document's URL must be https, with a host"));
    }
    if url.path() == "/" {
        return Err(refuse("a client document's URL must have a path"));
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(refuse(
            "a client document's URL must carry no credentials and no fragment",
        ));
    }
    if url.as_str() != client_id {
        return Err(refuse(&format!(
            "not in its normal form (it would be `{}`)",
            url.as_str().chars().take(200).collect::<String>()
        )));
    }
    Ok(url)
}

/// The site vouching for the client `client_id`: its document's host, or `None` for a
/// client that registered itself.
pub fn site_of(client_id: &str) -> Option<String> {
    if !is_document_id(client_id) {
        return None;
    }
    url::Url::parse(client_id)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
}

/// A client as the user is shown it: who vouches for it first (a name can say anything,
/// so nothing it says can pass for this part), then its name.
pub fn described(name: &str, site: Option<&str>) -> String {
    match site {
        Some(site) => format!("[document on {site}] {name}"),
        None => format!("[registered itself, unchecked] {name}"),
    }
}

/// What a client document says, the fields gantry uses.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Document {
    pub client_id: String,
    #[serde(default)]
    pub client_name: Option<String>,
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    #[serde(default)]
    pub token_endpoint_auth_method: Option<String>,
}

impl Document {
    /// The document in `body`, checked against the id it was fetched for.
    pub(crate) fn parse(client_id: &str, body: &[u8]) -> Result<Document, AuthError> {
        let refuse = |why: String| AuthError::ClientDocument(format!("the client document: {why}"));
        // Not serde's own words: they quote what the site sent.
        let doc: Document = serde_json::from_slice(body).map_err(|e| {
            refuse(format!(
                "not a JSON object with the fields expected (at line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        if doc.client_id != client_id {
            return Err(refuse(
                "its client_id is not the URL it was fetched from".into(),
            ));
        }
        match doc.token_endpoint_auth_method.as_deref() {
            None | Some("none") => Ok(doc),
            Some(other) => Err(refuse(format!(
                "token_endpoint_auth_method: `{}` is not supported; gantry signs in public clients (`none`) with PKCE",
                other.chars().take(60).collect::<String>()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_id_is_an_https_url_with_a_path_in_normal_form() {
        assert!(document_url("https://chatgpt.com/oauth/client.json").is_ok());
        for bad in [
            "http://chatgpt.com/client.json",
            "https://chatgpt.com/",
            "https://chatgpt.com",
            "https://user:pw@chatgpt.com/c.json",
            "https://chatgpt.com/c.json#x",
            "https://chatgpt.com/a/../c.json",
            "https://ChatGPT.com/c.json",
            "https://chatgpt.com:443/c.json",
        ] {
            let e = document_url(bad).unwrap_err();
            assert_eq!(e.code(), "invalid_client", "{bad}");
            assert!(e.to_string().starts_with("client_id: "), "{e}");
        }
    }

    #[test]
    fn a_document_must_name_itself_and_be_for_a_public_client() {
        let id = "https://example.com/c.json";
        let ok = br#"{"client_id":"https://example.com/c.json","client_name":"X","redirect_uris":["https://example.com/cb"]}"#;
        assert_eq!(
            Document::parse(id, ok).unwrap().client_name.as_deref(),
            Some("X")
        );
        let other = br#"{"client_id":"https://evil.example/c.json","redirect_uris":[]}"#;
        assert!(
            Document::parse(id, other)
                .unwrap_err()
                .to_string()
                .contains("client_id")
        );
        let secret = br#"{"client_id":"https://example.com/c.json","token_endpoint_auth_method":"client_secret_basic"}"#;
        assert!(
            Document::parse(id, secret)
                .unwrap_err()
                .to_string()
                .contains("token_endpoint_auth_method")
        );
        assert!(Document::parse(id, b"[1,2]").is_err());
    }
}
