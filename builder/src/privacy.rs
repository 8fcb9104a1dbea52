//! Privacy and hygiene: queries that must never reach a snapshot.
//!
//! The rules run on the surface form *and* on the key: a rule written for what people see can
//! be dodged by what folding removes (combining marks between digit groups fold away, leaving a
//! bare card number in the key). A query is withheld if either form matches any of:
//!
//! | reason | pattern (lowercase text) |
//! |---|---|
//! | `email` | `[^\s@]+@[^\s@]+\.[^\s@]+`; an `@` with optional spaces between a word and a domain `\w\s*@\s*\w[\w-]*(?:\.[\w-]+)*\.[a-z]{2}`; "NAME at DOMAIN dot TLD" spelled out (`at`/`(at)`/`[at]`, `dot`/`(dot)`/`[dot]`, common TLDs) |
//! | `long_number` | 9 or more digits, consecutive digits separated by at most two characters of space or `- . / _ , ( ) +`: `\d(?:[\s\-./_,()+]{0,2}\d){8,}` (cards, phone numbers in every usual shape, SSNs, accounts) |
//! | `url_userinfo` | `://[^\s/]*@` |
//! | `url_secret` | a secret parameter after `?`, `&`, `#` or `;`: `access_token`, `token`, `api-key`, `jsessionid`, `code`, `signature`, `sig`, ... followed by `=` |
//! | `password` | `password`, `passwd`, `pwd` or `pin` followed by `:` or `=` and a value |
//!
//! Zero-width characters between digits never hide a number: normalization removes them first
//! (`typeahead_core::normalize`). Each pattern has a cheap byte test that must hold for it to
//! match, so the regular expressions run only on the few queries that could match.
//!
//! The number rule withholds some harmless queries too (three years in a row, page ranges of a
//! citation: six of the AOL sample's 139,948 distinct queries); that is the price of catching
//! `4111 1111 1111 1111` and `(555) 123-4567`.

use regex::Regex;

/// Why a query was withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Contains an e-mail address (also spaced or spelled out).
    Email,
    /// Contains a long digit sequence (phone, card, SSN, account number).
    LongNumber,
    /// Contains a URL with user info.
    UrlUserInfo,
    /// Contains a URL secret parameter.
    UrlSecret,
    /// Contains a password or PIN given as `name: value`.
    Password,
}

impl Reason {
    /// Every reason, in summary order.
    pub const ALL: [Reason; 5] = [
        Reason::Email,
        Reason::LongNumber,
        Reason::UrlUserInfo,
        Reason::UrlSecret,
        Reason::Password,
    ];

    /// Stable snake_case name for summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Email => "email",
            Reason::LongNumber => "long_number",
            Reason::UrlUserInfo => "url_userinfo",
            Reason::UrlSecret => "url_secret",
            Reason::Password => "password",
        }
    }
}

/// The compiled privacy rules.
#[derive(Debug, Clone)]
pub struct Privacy {
    email: Regex,
    spaced_email: Regex,
    spelled_email: Regex,
    number: Regex,
    userinfo: Regex,
    secret: Regex,
    password: Regex,
}

impl Default for Privacy {
    fn default() -> Self {
        Self::new()
    }
}

/// URL parameters that carry secrets.
const SECRET_PARAMETERS: &str = "access_token|refresh_token|id_token|auth_token|token|api_key|\
    api-key|apikey|key|password|passwd|pwd|secret|client_secret|session|session_id|sessionid|\
    jsessionid|phpsessid|sid|auth|code|signature|sig|x-amz-signature|x-amz-credential";

/// Top-level domains an address spelled out in words must end in.
const SPELLED_TLDS: &str =
    "com|net|org|edu|gov|mil|info|biz|io|co|us|uk|ca|de|fr|au|jp|ru|cn|in|me|tv";

impl Privacy {
    /// Compiles the contract's patterns.
    pub fn new() -> Self {
        let re = |p: &str| Regex::new(p).expect("the privacy patterns are valid");
        let (at, dot) = (r"(?:at|\(at\)|\[at\])", r"(?:dot|\(dot\)|\[dot\])");
        Privacy {
            email: re(r"[^\s@]+@[^\s@]+\.[^\s@]+"),
            spaced_email: re(r"\w\s*@\s*\w[\w-]*(?:\.[\w-]+)*\.[a-z]{2}"),
            spelled_email: re(&format!(
                r"\w+ {at} [\w-]+(?: {dot} [\w-]+)* {dot} (?:{SPELLED_TLDS})\b"
            )),
            number: re(r"\d(?:[\s\-./_,()+]{0,2}\d){8,}"),
            userinfo: re(r"://[^\s/]*@"),
            secret: re(&format!(r"[?&#;](?:{SECRET_PARAMETERS})=")),
            password: re(r"\b(?:password|passwd|pwd|pin)\s*[:=]\s*\S"),
        }
    }

    /// The first rule the surface form or the key breaks, if any.
    pub fn check(&self, surface: &str, key: &str) -> Option<Reason> {
        self.check_one(surface).or_else(|| (key != surface).then(|| self.check_one(key)).flatten())
    }

    /// The first rule `text` breaks, if any.
    fn check_one(&self, text: &str) -> Option<Reason> {
        let b = text.as_bytes();
        let has_at = b.contains(&b'@');
        if (has_at && (self.email.is_match(text) || self.spaced_email.is_match(text)))
            || (text.contains(" dot ") || text.contains("(dot)") || text.contains("[dot]"))
                && self.spelled_email.is_match(text)
        {
            return Some(Reason::Email);
        }
        if could_be_long_number(text) && self.number.is_match(text) {
            return Some(Reason::LongNumber);
        }
        if has_at && self.userinfo.is_match(text) {
            return Some(Reason::UrlUserInfo);
        }
        if b.contains(&b'=') && self.secret.is_match(text) {
            return Some(Reason::UrlSecret);
        }
        if (b.contains(&b':') || b.contains(&b'=')) && self.password.is_match(text) {
            return Some(Reason::Password);
        }
        None
    }
}

/// Nine digits are needed; ASCII-only text with fewer ASCII digits cannot match (non-ASCII
/// text may hold other Unicode digits, so it always goes to the regex).
fn could_be_long_number(s: &str) -> bool {
    !s.is_ascii() || s.bytes().filter(u8::is_ascii_digit).count() >= 9
}

#[cfg(test)]
mod tests {
    use super::*;
    use typeahead_core::normalize;

    /// The rules see a query as the builder does: its surface form and its key.
    fn check(p: &Privacy, q: &str) -> Option<Reason> {
        let (surface, key) = normalize::surface_and_key(q)?;
        p.check(&surface, &key)
    }

    #[test]
    fn each_rule() {
        let p = Privacy::new();
        assert_eq!(check(&p, "mail john.doe@example.com now"), Some(Reason::Email));
        assert_eq!(check(&p, "call 555-123-4567"), Some(Reason::LongNumber));
        assert_eq!(check(&p, "ssn 123.45.6789"), Some(Reason::LongNumber));
        assert_eq!(check(&p, "card 4111111111111111"), Some(Reason::LongNumber));
        assert_eq!(check(&p, "١٢٣٤٥٦٧٨٩"), Some(Reason::LongNumber));
        assert_eq!(check(&p, "ftp://user:pw@host/x"), Some(Reason::UrlUserInfo));
        assert_eq!(check(&p, "site.com/?a=1&api_key=abc"), Some(Reason::UrlSecret));
        assert_eq!(check(&p, "http://x.com/login?password=hunter2"), Some(Reason::UrlSecret));
    }

    /// The forms the attacker's pass found served, one per line of the issue.
    #[test]
    fn common_forms_are_withheld() {
        let p = Privacy::new();
        let cases: &[(&str, Reason)] = &[
            ("4111 1111 1111 1111", Reason::LongNumber),
            ("(555) 123-4567", Reason::LongNumber),
            ("555 123 4567", Reason::LongNumber),
            ("+1 555 123 4567", Reason::LongNumber),
            ("123 45 6789", Reason::LongNumber),
            ("4111\u{200b}1111\u{200b}1111\u{200b}1111", Reason::LongNumber),
            ("4111\u{2060}1111\u{feff}1111\u{ad}1111", Reason::LongNumber),
            ("4111_1111_1111_1111", Reason::LongNumber),
            ("4111,1111,1111,1111", Reason::LongNumber),
            ("4111/1111/1111/1111", Reason::LongNumber),
            // A combining mark between groups: the surface has no 9-digit run, the key does.
            (
                "4111\u{301}\u{301}\u{301}1111\u{301}\u{301}\u{301}1111\u{301}\u{301}\u{301}1111",
                Reason::LongNumber,
            ),
            ("site.com/?access_token=abc", Reason::UrlSecret),
            ("x.com/#token=abc", Reason::UrlSecret),
            ("x.com/?api-key=1", Reason::UrlSecret),
            ("x.com/a;jsessionid=1", Reason::UrlSecret),
            ("x.com/cb?code=abc&state=1", Reason::UrlSecret),
            ("password: hunter2", Reason::Password),
            ("my pin=1234", Reason::Password),
            ("pwd:x", Reason::Password),
            ("john doe at gmail dot com", Reason::Email),
            ("john (at) mail (dot) co (dot) uk", Reason::Email),
            ("john.doe @ gmail.com", Reason::Email),
            ("john.doe@ gmail.com", Reason::Email),
        ];
        for &(q, reason) in cases {
            assert_eq!(check(&p, q), Some(reason), "{q:?}");
        }
    }

    #[test]
    fn ordinary_queries_pass() {
        let p = Privacy::new();
        for q in [
            "ebay",
            "weather 90210",
            "1-800-flowers",
            "12345678",
            "a@b",
            "key=value",
            "mykey=1",
            "pin cushion",
            "at home dot",
            "where to eat at joes",
            "password recovery",
            "2005 2006 tax forms",
            "@home",
        ] {
            assert_eq!(check(&p, q), None, "{q}");
        }
    }
}
