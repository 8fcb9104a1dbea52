//! Privacy and hygiene: queries that must never reach a snapshot.
//!
//! The contract (applied to the surface form): a query is dropped if it matches any of
//! - an e-mail address `[^\s@]+@[^\s@]+\.[^\s@]+`;
//! - nine or more digits, possibly joined by `-` or `.` `\d(?:[-.]?\d){8,}` (phone, card, SSN,
//!   account numbers);
//! - a URL with user info `://[^\s/]*@`;
//! - a URL secret `[?&](?:token|key|api_key|apikey|password|passwd|pwd|secret|session|sid|auth)=`.
//!
//! Each pattern has a cheap byte test that must hold for it to match, so the regular
//! expressions run only on the few queries that could match.

use regex::Regex;

/// Why a query was withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Contains an e-mail address.
    Email,
    /// Contains a long digit sequence (phone, card, SSN, account number).
    LongNumber,
    /// Contains a URL with user info.
    UrlUserInfo,
    /// Contains a URL secret parameter.
    UrlSecret,
}

impl Reason {
    /// Every reason, in summary order.
    pub const ALL: [Reason; 4] =
        [Reason::Email, Reason::LongNumber, Reason::UrlUserInfo, Reason::UrlSecret];

    /// Stable snake_case name for summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Email => "email",
            Reason::LongNumber => "long_number",
            Reason::UrlUserInfo => "url_userinfo",
            Reason::UrlSecret => "url_secret",
        }
    }
}

/// The compiled privacy rules.
#[derive(Debug, Clone)]
pub struct Privacy {
    email: Regex,
    number: Regex,
    userinfo: Regex,
    secret: Regex,
}

impl Default for Privacy {
    fn default() -> Self {
        Self::new()
    }
}

impl Privacy {
    /// Compiles the contract's patterns.
    pub fn new() -> Self {
        let re = |p: &str| Regex::new(p).expect("the privacy patterns are valid");
        Privacy {
            email: re(r"[^\s@]+@[^\s@]+\.[^\s@]+"),
            number: re(r"\d(?:[-.]?\d){8,}"),
            userinfo: re(r"://[^\s/]*@"),
            secret: re(
                r"[?&](?:token|key|api_key|apikey|password|passwd|pwd|secret|session|sid|auth)=",
            ),
        }
    }

    /// The first rule the surface form breaks, if any.
    pub fn check(&self, surface: &str) -> Option<Reason> {
        let b = surface.as_bytes();
        let has_at = b.contains(&b'@');
        if has_at && self.email.is_match(surface) {
            return Some(Reason::Email);
        }
        if could_be_long_number(surface) && self.number.is_match(surface) {
            return Some(Reason::LongNumber);
        }
        if has_at && self.userinfo.is_match(surface) {
            return Some(Reason::UrlUserInfo);
        }
        if b.contains(&b'=') && self.secret.is_match(surface) {
            return Some(Reason::UrlSecret);
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

    #[test]
    fn each_rule() {
        let p = Privacy::new();
        assert_eq!(p.check("mail john.doe@example.com now"), Some(Reason::Email));
        assert_eq!(p.check("call 555-123-4567"), Some(Reason::LongNumber));
        assert_eq!(p.check("ssn 123.45.6789"), Some(Reason::LongNumber));
        assert_eq!(p.check("card 4111111111111111"), Some(Reason::LongNumber));
        assert_eq!(p.check("١٢٣٤٥٦٧٨٩"), Some(Reason::LongNumber));
        assert_eq!(p.check("ftp://user:pw@host/x"), Some(Reason::UrlUserInfo));
        assert_eq!(p.check("site.com/?a=1&api_key=abc"), Some(Reason::UrlSecret));
        assert_eq!(p.check("http://x.com/login?password=hunter2"), Some(Reason::UrlSecret));
    }

    #[test]
    fn ordinary_queries_pass() {
        let p = Privacy::new();
        for q in
            ["ebay", "weather 90210", "1-800-flowers", "12345678", "a@b", "key=value", "mykey=1"]
        {
            assert_eq!(p.check(q), None, "{q}");
        }
    }
}
