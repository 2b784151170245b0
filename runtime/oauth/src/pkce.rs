//! PKCE (RFC 7636), S256 only: the plain method would hand the code to whoever saw the
//! authorization request.

use base64::Engine as _;
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

/// RFC 7636 §4.1: 43 to 128 characters, each unreserved.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Whether `challenge` can be an S256 challenge: the base64url (no padding) of 32 bytes.
pub fn challenge_is_well_formed(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `verifier` is well formed and its S256 transform is `challenge`.
pub fn verifier_matches(verifier: &str, challenge: &str) -> bool {
    if !(43..=128).contains(&verifier.len()) || !verifier.bytes().all(unreserved) {
        return false;
    }
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    computed.as_bytes().ct_eq(challenge.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_7636_example_matches_and_nothing_else_does() {
        // RFC 7636 Appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(challenge_is_well_formed(challenge));
        assert!(verifier_matches(verifier, challenge));
        assert!(!verifier_matches(&verifier.replace('d', "e"), challenge));
        // A verifier that is its own challenge (the plain method) never passes.
        assert!(!verifier_matches(challenge, challenge));
        assert!(!verifier_matches("short", challenge));
        assert!(!challenge_is_well_formed(
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-c="
        ));
    }
}
