//! Privacy and hygiene: queries that must never reach a snapshot.
//!
//! The rules run on the surface form, on the key, and on the key without any combining mark: a
//! rule written for what people see can be dodged by what folding removes (combining marks
//! between digit groups fold away, leaving a bare card number in the key; a keycap mark is not
//! folded, so it goes in the third form). A query is withheld if any form matches any of:
//!
//! | reason | pattern (lowercase text) |
//! |---|---|
//! | `email` | `[^\s@]+@[^\s@]+[.。][^\s@]+`; an `@` with optional spaces between a word and a domain (spaces around its dots too) `\w\s*@\s*\w[\w-]*(?:\s?\.\s?[\w-]+)*\s?\.\s?[a-z]{2}`; "NAME at DOMAIN dot TLD" spelled out (` at `/`@`/`(at)`/`[at]`, ` dot `/`(dot)`/`[dot]`, brackets with or without spaces, common TLDs) |
//! | `long_number` | 9 or more digits, consecutive digits separated by at most three characters of space, `- . / _ , ( ) +`, a Unicode dash (U+2010..U+2015), minus (U+2212) or Arabic separator (U+066B, U+066C) (cards, phone numbers in every usual shape, SSNs, accounts) |
//! | `url_userinfo` | `://[^\s/]*@` |
//! | `url_secret` | a secret parameter after `?`, `&`, `#` or `;`: `access_token`, `token`, `api-key`, `jsessionid`, `code`, `signature`, `sig`, ... followed by `=` |
//! | `password` | `password`, `passwd` (also ending a longer name: `db_password`), `pwd` or `pin` (as a word or after `_`) followed by `:` or `=` and a value |
//!
//! Zero-width characters between digits never hide a number: normalization removes them first
//! (`typeahead_core::normalize`). Nor do look-alikes it keeps: a fourth form reads symbols
//! Unicode counts as digits (category No: `➊`, `⓵`) as digits, every dash (category Pd, `➖`)
//! as `-`, the ideographic full stop as `.`, and drops format characters (category Cf). Each pattern has a cheap byte test that must hold for it to
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
    /// Every combining mark, for the third form the rules see.
    marks: Regex,
    /// What stands for a digit (group 1: category No, ➊ ⓵ ❶ have no compatibility form), a
    /// dash (group 2: category Pd, 〜 ⸺ ֊, and ➖) or a dot (group 3: 。) without being one to
    /// the patterns, or is not seen at all (category Cf), for the fourth form
    /// (see [`Privacy::check`]).
    look_alikes: Regex,
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

/// An address; its last dot may be the ideographic full stop, a domain dot under IDNA.
const EMAIL: &str = r"[^\s@]+@[^\s@]+[.\x{3002}][^\s@]+";

/// An `@` between a word and a domain, with spaces around the `@` and the dots.
const SPACED_EMAIL: &str = r"\w\s*@\s*\w[\w-]*(?:\s?\.\s?[\w-]+)*\s?\.\s?[a-z]{2}";

/// Nine or more digits, consecutive ones apart by at most three characters of space or
/// separators: ASCII `- . / _ , ( ) +`, the Unicode dashes U+2010..U+2015 and minus U+2212,
/// and the Arabic decimal and thousands separators U+066B, U+066C.
const LONG_NUMBER: &str =
    r"\d(?:[\s\-./_,()+\x{2010}-\x{2015}\x{2212}\x{066B}\x{066C}]{0,3}\d){8,}";

/// A password or PIN given as `name: value`; `password` and `passwd` also at the end of a
/// longer name (`db_password=`, `mypassword:`), `pwd` and `pin` only as a word or after `_`.
const PASSWORD: &str = r"(?:password|passwd|(?:\b|_)(?:pwd|pin))\s*[:=]\s*\S";

/// Top-level domains an address spelled out in words must end in.
const SPELLED_TLDS: &str =
    "com|net|org|edu|gov|mil|info|biz|io|co|us|uk|ca|de|fr|au|jp|ru|cn|in|me|tv";

/// "NAME at DOMAIN dot TLD": `at` and `dot` as words, or bracketed (`(at)`, `[dot]`) with or
/// without spaces; an `@` counts as an `at` here too ("john@gmail dot com").
fn spelled_email() -> String {
    let at = r"(?: at | ?@ ?| ?[(\[]at[)\]] ?)";
    let dot = r"(?: dot | ?[(\[]dot[)\]] ?)";
    format!(r"\w+{at}[\w-]+(?:{dot}[\w-]+)*{dot}(?:{SPELLED_TLDS})\b")
}

impl Privacy {
    /// Compiles the contract's patterns.
    pub fn new() -> Self {
        let re = |p: &str| Regex::new(p).expect("the privacy patterns are valid");
        Privacy {
            email: re(EMAIL),
            spaced_email: re(SPACED_EMAIL),
            spelled_email: re(&spelled_email()),
            number: re(LONG_NUMBER),
            userinfo: re(r"://[^\s/]*@"),
            secret: re(&format!(r"[?&#;](?:{SECRET_PARAMETERS})=")),
            password: re(PASSWORD),
            marks: re(r"\p{M}+"),
            look_alikes: re(r"(\p{No})|([\p{Pd}\x{2796}])|(\x{3002})|\p{Cf}"),
        }
    }

    /// The first rule the surface form, the key, the key without any combining mark, or that
    /// with its look-alikes made plain breaks, if any. Folding removes only the common
    /// diacritics (U+0300..U+036F); a keycap or another mark between digit groups would
    /// otherwise hide a number in both forms. Normalization keeps symbols that only look like
    /// digits, dashes and dots (`➍➊➊➊ ➊➊➊➊ ...`, `555〜123〜4567`, `gmail 。com`) and a few
    /// invisible format characters (U+FFF9..U+FFFB): the fourth form reads them as the digit
    /// (any: only their count matters), `-` and `.` they stand for, and drops the invisible ones.
    pub fn check(&self, surface: &str, key: &str) -> Option<Reason> {
        self.check_one(surface)
            .or_else(|| (key != surface).then(|| self.check_one(key)).flatten())
            .or_else(|| {
                if key.is_ascii() {
                    return None;
                }
                let bare = self.marks.replace_all(key, "");
                let plain = self.plain(&bare);
                let forms = [(bare != key).then_some(&bare), (plain != bare).then_some(&plain)];
                forms.into_iter().flatten().find_map(|form| self.check_one(form))
            })
    }

    /// `text` with its look-alike digits, dashes and dots made plain, its format characters gone.
    fn plain<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        self.look_alikes.replace_all(text, |found: &regex::Captures<'_>| {
            ["0", "-", "."]
                .into_iter()
                .zip(1..)
                .find_map(|(plain, group)| found.get(group).map(|_| plain))
                .unwrap_or("")
        })
    }

    /// The first rule `text` breaks, if any.
    fn check_one(&self, text: &str) -> Option<Reason> {
        let b = text.as_bytes();
        let has_at = b.contains(&b'@');
        if (has_at && (self.email.is_match(text) || self.spaced_email.is_match(text)))
            || text.contains("dot") && self.spelled_email.is_match(text)
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
            // The forms a later review found served.
            ("call 555 - 123 - 4567", Reason::LongNumber),
            ("555\u{2013}123\u{2013}4567", Reason::LongNumber),
            ("4111\u{2010}1111\u{2010}1111\u{2010}1111", Reason::LongNumber),
            ("555\u{2212}123\u{2212}4567", Reason::LongNumber),
            ("١٢٣٬٤٥٦٬٧٨٩", Reason::LongNumber),
            ("4111\u{1ab0}1111\u{1ab0}1111\u{1ab0}1111", Reason::LongNumber),
            (
                "4\u{20e3}1\u{20e3}1\u{20e3}1\u{20e3}5\u{20e3}5\u{20e3}5\u{20e3}1\u{20e3}2\u{20e3}",
                Reason::LongNumber,
            ),
            ("555\u{b4}\u{b4} 123\u{b4}\u{b4} 4567", Reason::LongNumber),
            ("db_password=hunter2", Reason::Password),
            ("mypassword: hunter2", Reason::Password),
            ("db_pwd=x", Reason::Password),
            ("john(at)gmail(dot)com", Reason::Email),
            ("john[at]gmail[dot]com", Reason::Email),
            ("john@gmail dot com", Reason::Email),
            ("john @ gmail . com", Reason::Email),
            ("john@gmail\u{3002}com", Reason::Email),
            // Look-alikes that normalization keeps, found by a review of the builder.
            (
                "\u{278d}\u{278a}\u{278a}\u{278a} \u{278a}\u{278a}\u{278a}\u{278a} \u{278a}\u{278a}",
                Reason::LongNumber,
            ),
            (
                "\u{2776}\u{2777}\u{2778}\u{2779}\u{277a}\u{277b}\u{277c}\u{277d}\u{277e}",
                Reason::LongNumber,
            ),
            (
                "\u{24f5}\u{24f6}\u{24f7} \u{24f5}\u{24f6}\u{24f7} \u{24f5}\u{24f6}\u{24f7}",
                Reason::LongNumber,
            ),
            ("555\u{301c}123\u{301c}4567", Reason::LongNumber),
            ("555\u{2e3a}123\u{2e3a}4567", Reason::LongNumber),
            ("555\u{58a}123\u{58a}4567", Reason::LongNumber),
            ("555\u{2796}123\u{2796}4567", Reason::LongNumber),
            ("4111\u{fffb}1111\u{fffb}1111\u{fffb}1111", Reason::LongNumber),
            ("john @ gmail\u{3002}com", Reason::Email),
            ("john@gmail \u{3002}com", Reason::Email),
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
            "spin cycle",
            "shipping: free",
            "1999 - 2000",
            "at home dot com",
            "\u{2460}\u{2461} \u{2794} \u{301c}",
            "1\u{2013}2 \u{bd} cup",
        ] {
            assert_eq!(check(&p, q), None, "{q}");
        }
    }
}
