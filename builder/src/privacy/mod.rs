//! Privacy and hygiene: queries that must never reach a snapshot.
//!
//! The rules run on the surface form, on the key, and on the key without any combining mark: a
//! rule written for what people see can be dodged by what folding removes (combining marks
//! between digit groups fold away, leaving a bare card number in the key; a keycap mark is not
//! folded, so it goes in the third form). When the key holds a percent escape or a character
//! reference (`john%40gmail.com`, `&#64;`), the key of its decoded text goes through the same
//! forms. A query is withheld if any form matches any of:
//!
//! | reason | pattern (lowercase text) |
//! |---|---|
//! | `email` | `[^\s@]+@[^\s@]+[.。·・•,][^\s@]+`; an `@` with optional spaces between a word and a domain (spaces around its dots too) `\w\s*@\s*\w[\w-]*(?:\s?\.\s?[\w-]+)*\s?\.\s?(?:[a-z]{2}|IDN)` (IDN: common top-level domains in other scripts, `рф`, `中国`, `한국`...: `почта.рф`, `例子.中国`); an `@` or a bracketed `at` before a mailbox provider's name (`john@gmail com`); "NAME at DOMAIN dot TLD" spelled out (` at `/`@`/`(at)`, ` dot `/`(dot)`, any of `()[]{}<>` as brackets, with or without spaces, common TLDs); a bracketed `at` followed by a domain with a dot (`john(at)gmail.com`); "NAME at PROVIDER.TLD" (`john.doe at gmail.com`) |
//! | `long_number` | 9 or more digits, consecutive digits separated by at most four characters that are neither a letter, a digit nor `:` (or are letters that stand for a dash, a bar or a tick: any modifier letter such as `ー` or `ˈ`, `ꞏ`, the clicks `ǀ`-`ǃ`, Hangul `ㅡ` `ㅣ`, CJK `一` `丨`; see [`SEPARATOR`]) (cards, phone numbers in every usual shape, SSNs, accounts; a time of day is not one); 7 or more after a word that announces a number (`call`, `tel`, `phone`, `ph`, `mobile`, `mob`, `cell`, `fax`, `whatsapp`, `ssn`, `dob`) |
//! | `url_userinfo` | `://[^\s/]*@` |
//! | `url_secret` | a secret parameter after `?`, `&`, `#` or `;`: `access_token`, `token`, `api-key`, `jsessionid`, `code`, `signature`, `sig`, ... followed by `=`; a credential's own name (`access_token`, `api_key`, `client_secret`, ...) at the start or after a space, followed by `=` or `:` and a value |
//! | `password` | `password`, `passwd`, `passwort`, `passcode` (also ending a longer name: `db_password`), the same word in a few languages, `pwd`, `pin`, `pw` or `pass` (as a word or after `_`) followed by `:` or `=` and a value |
//! | `token` | a credential by its shape: the published prefixes of GitHub, GitLab, Slack, Stripe, OpenAI, AWS and Google keys, a JSON Web Token (`eyJ...` in three dotted parts), or a run of 20 or more ASCII letters and digits that switches between letters and digits at least 4 times (hashes, random keys), also with base64's `+ / _ -` in it, at most one in 8 characters |
//!
//! Zero-width characters between digits never hide a number: normalization removes them first
//! (`typeahead_core::normalize`). Nor do look-alikes it keeps: a fourth form reads symbols
//! Unicode counts as digits (category No: `➊`, `⓵`) as digits, every dash (category Pd, `➖`)
//! as `-`, the ideographic full stop and the dot look-alikes ([`DOTS`]) as `.`, the blank
//! braille pattern as a space, and drops format characters (category Cf); the third and fourth
//! forms make each whitespace run one space, as a mark folded away between spaces leaves two. Each
//! pattern has a cheap byte test that must hold for it to match, so the regular expressions
//! run only on the few queries that could match.
//!
//! The rules withhold some harmless queries too (three years in a row, page ranges of a
//! citation, `npm install lodash@4.17.21`, `problems at hotmail.com`); that is the price of
//! catching `4111 1111 1111 1111`, `(555) 123-4567` and `john.doe at gmail.com`. What they do
//! not try to recognise: street addresses and dates of birth without a word announcing them,
//! and numbers of fewer than 9 digits without one (`9123 4567`): these look like ordinary
//! searches (`1600 pennsylvania ave`, `1984 book`).

use regex::Regex;
use typeahead_core::normalize;

/// Why a query was withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Contains an e-mail address (also spaced or spelled out).
    Email,
    /// Contains a long digit sequence (phone, card, SSN, account number).
    LongNumber,
    /// Contains a URL with user info.
    UrlUserInfo,
    /// Contains a secret parameter (in a URL, or given as `name=value`).
    UrlSecret,
    /// Contains a password or PIN given as `name: value`.
    Password,
    /// Contains a credential recognised by its shape (an API key, a token, a hash).
    Token,
}

impl Reason {
    /// Every reason, in summary order.
    pub const ALL: [Reason; 6] = [
        Reason::Email,
        Reason::LongNumber,
        Reason::UrlUserInfo,
        Reason::UrlSecret,
        Reason::Password,
        Reason::Token,
    ];

    /// Stable snake_case name for summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Email => "email",
            Reason::LongNumber => "long_number",
            Reason::UrlUserInfo => "url_userinfo",
            Reason::UrlSecret => "url_secret",
            Reason::Password => "password",
            Reason::Token => "token",
        }
    }
}

/// The compiled privacy rules.
#[derive(Debug, Clone)]
pub struct Privacy {
    email: Regex,
    spaced_email: Regex,
    provider_email: Regex,
    spelled_email: Regex,
    number: Regex,
    announced_number: Regex,
    userinfo: Regex,
    secret: Regex,
    password: Regex,
    token: Regex,
    /// `dot`, `at` and ` at `: what [`Privacy::could_be_spelled_email`] looks for.
    spelled_words: [memchr::memmem::Finder<'static>; 3],
    /// Every combining mark, for the third form the rules see.
    marks: Regex,
    /// What stands for a digit (group 1: category No, ➊ ⓵ ❶ have no compatibility form), a
    /// dash (group 2: category Pd, 〜 ⸺ ֊, and ➖), a dot (group 3: [`DOTS`]) or a space
    /// (group 4: the blank braille pattern U+2800) without being one to the patterns, or is not
    /// seen at all (category Cf), for the fourth form (see [`Privacy::check`]).
    look_alikes: Regex,
    /// What [`decoded`] decodes: a percent escape or a character reference.
    escapes: Regex,
}

impl Default for Privacy {
    fn default() -> Self {
        Self::new()
    }
}

/// URL parameters that carry secrets.
const SECRET_PARAMETERS: &str = "access_token|refresh_token|id_token|auth_token|oauth_token|\
    api_token|session_token|private_token|access-token|token|api_key|api-key|apikey|key|\
    password|passwd|pwd|secret|client_secret|session|session_id|sessionid|jsessionid|phpsessid|\
    sid|auth|code|otp|signature|sig|x-amz-signature|x-amz-credential|x-amz-security-token";

/// Names that only a credential has: secret even outside a URL (`access_token=ya29...`).
const CREDENTIAL_NAMES: &str = "access_token|refresh_token|id_token|auth_token|oauth_token|\
    api_token|session_token|private_token|access-token|api_key|api-key|apikey|client_secret|\
    secret_key|x-amz-security-token";

/// An address; its last dot may be the ideographic full stop (a domain dot under IDNA), a
/// middle dot or a comma, as addresses are mistyped or disguised.
const EMAIL: &str = r"[^\s@]+@[^\s@]+[.\x{3002}\x{b7}\x{30fb}\x{2022},][^\s@]+";

/// Symbols that stand for a dot in an address (`john@example∙org`): the ideographic full stop,
/// the middle dots, bullets and dot operators, the hyphenation point, the Arabic decimal
/// separator and the word-separator middle dot. The fourth form reads each as `.`.
const DOTS: &str = r"\x{3002}\x{b7}\x{30fb}\x{2022}\x{2219}\x{22c5}\x{2027}\x{066b}\x{2e31}";

/// Top-level domains in other scripts a spaced address may end with (`иван @ почта.рф`): a list,
/// not any two letters, since look-alike dots read as dots (`・`, `·`) would otherwise make
/// "ライブ @ ジョン・レノン" an address.
const IDN_TLDS: &str =
    "рф|срб|укр|бел|қаз|мон|мкд|中国|中國|香港|台灣|台湾|한국|ไทย|مصر|السعودية|امارات|ایران|भारत";

/// Mailbox providers: a name after an `@` is an address whatever follows it (`john@gmail com`).
const PROVIDERS: &str = "gmail|googlemail|yahoo|ymail|hotmail|outlook|aol|icloud|gmx|\
    protonmail|proton|yandex|comcast|verizon|sbcglobal|bellsouth|earthlink|msn|qq|naver|\
    rediffmail";

/// What separates the digits of one number: any character but a letter, a digit, a colon, a
/// currency sign or `×` `÷`, and the letters that stand for a dash, a bar or a tick, up to
/// four of them (`(555) - 123`). Not a list of separators: every list the attacker's passes
/// tried had a look-alike missing (`∙`, `°`, `‧`, a private-use character).
///
/// Those letters: every modifier letter (category Lm: the katakana prolonged sound mark `ー`
/// an input method gives for a dash, `ˈ` `ʼ` `ˉ`; no modifier letter stands between the
/// digits of a real search), the sinological dot `ꞏ`, the clicks that look like bars (`ǀ` `ǁ` `ǂ` `ǃ`), the Hangul
/// `ㅡ` and `ㅣ` (a dash and a bar; NFKC makes them U+1173 and U+1175), and the CJK `一` and
/// `丨` (one, a stroke) that Chinese input gives for a dash and a bar. Other letters stay
/// out: `2008年8月8日` is a date, and would otherwise read as one number.
///
/// What it leaves out is what ordinary searches put between numbers: a time of day
/// (`12:00 - 13:00 - 14:00`), prices (`$19.99 $24.99 $29.99`), sizes (`2560×1440 165hz`).
const SEPARATOR: &str = r"(?:[^\p{L}\p{N}\p{Sc}:\x{d7}\x{f7}]|[\p{Lm}\x{a78f}\x{1c0}-\x{1c3}\x{3161}\x{1173}\x{3163}\x{1175}\x{4e00}\x{4e28}]){0,4}";

/// Words that announce a number: seven digits after one are a phone number or a date of birth.
const NUMBER_WORDS: &str = "call|tel|phone|ph|mobile|mob|cell|fax|whatsapp|ssn|dob";

/// A password or PIN given as `name: value`; `password` and its kin also at the end of a
/// longer name (`db_password=`, `mypassword:`), the short names only as a word or after `_`.
const PASSWORD: &str = r"(?:password|passwd|passwort|passcode|wachtwoord|mot de passe|contrase[ñn]a|senha|(?:\b|_)(?:pwd|pin|pw|pass))\s*[:=]\s*\S";

/// Credentials by their published prefixes (lowercase, as the rules see text): GitHub, GitLab,
/// Slack, Stripe, OpenAI, AWS access key ids, Google API keys and OAuth tokens, and JSON Web
/// Tokens.
const KNOWN_TOKENS: &str = r"\b(?:gh[pousr]_[a-z0-9]{30,}|github_pat_[a-z0-9_]{30,}|glpat-[a-z0-9_-]{20,}|xox[abprs]-[a-z0-9-]{15,}|[sr]k_(?:live|test)_[a-z0-9]{16,}|sk-[a-z0-9_-]{20,}|(?:akia|asia)[0-9a-z]{16}|aiza[0-9a-z_-]{35}|ya29\.[0-9a-z_-]{20,}|eyj[a-z0-9_-]{8,}\.eyj[a-z0-9_-]{8,}\.[a-z0-9_-]+)";

/// Top-level domains an address spelled out in words must end in.
const SPELLED_TLDS: &str = "com|net|org|edu|gov|mil|info|biz|io|co|us|uk|ca|de|fr|au|jp|ru|cn|\
    in|me|tv|nl|be|ch|at|se|no|dk|fi|es|it|pt|pl|cz|nz|br|mx|ar|za|ie|il|kr|tw|hk|sg|eu";

/// Addresses written with `at` for the `@`:
/// - "NAME at DOMAIN dot TLD": `at` and `dot` as words, or bracketed (`(at)`, `[dot]`, `{at}`,
///   `<dot>`) with or without spaces; an `@` counts as an `at` here too ("john@gmail dot com");
/// - a bracketed `at` (never ordinary prose) before a domain with a dot of any kind;
/// - `at` as a word before a mailbox provider's domain ("john.doe at gmail.com").
fn spelled_email() -> String {
    let bracketed = |word: &str| format!(r" ?[(\[{{<] ?{word} ?[)\]}}>] ?");
    let at_bracket = bracketed("at");
    let at = format!(r"(?: at | ?@ ?|{at_bracket})");
    let dot = format!(r"(?: dot |{})", bracketed("dot"));
    let any_dot = format!(r"(?: ?[.\x{{b7}}] ?| dot |{})", bracketed("dot"));
    let spelled = format!(r"\w+{at}[\w-]+(?:{dot}[\w-]+)*{dot}(?:{SPELLED_TLDS})\b");
    let bracketed_at = format!(r"\w{at_bracket}[\w-]+(?:{any_dot}[\w-]+)+");
    let provider = format!(r"\w at (?:{PROVIDERS}){any_dot}[a-z]{{2,}}\b");
    format!("{spelled}|{bracketed_at}|{provider}")
}

impl Privacy {
    /// Compiles the contract's patterns.
    pub fn new() -> Self {
        let re = |p: &str| Regex::new(p).expect("the privacy patterns are valid");
        let at_bracket = r"[(\[{<] ?at ?[)\]}>]";
        Privacy {
            email: re(EMAIL),
            spaced_email: re(&format!(
                r"\w\s*@\s*\w[\w-]*(?:\s?\.\s?[\w-]+)*\s?\.\s?(?:[a-z]{{2}}|{IDN_TLDS})"
            )),
            provider_email: re(&format!(r"\w(?: ?@ ?| ?{at_bracket} ?)(?:{PROVIDERS})\b")),
            spelled_email: re(&spelled_email()),
            number: re(&format!(r"\d(?:{SEPARATOR}\d){{8,}}")),
            announced_number: re(&format!(
                r"(?:\b|_)(?:{NUMBER_WORDS})\W{{0,4}}\d(?:{SEPARATOR}\d){{6,}}"
            )),
            userinfo: re(r"://[^\s/]*@"),
            secret: re(&format!(
                r"[?&#;](?:{SECRET_PARAMETERS})=|(?:^|\s)(?:{CREDENTIAL_NAMES})\s*[=:]\s*\S"
            )),
            password: re(PASSWORD),
            token: re(KNOWN_TOKENS),
            spelled_words: [b"dot".as_slice(), b"at", b" at "]
                .map(|word| memchr::memmem::Finder::new(word).into_owned()),
            marks: re(r"\p{M}+"),
            look_alikes: re(&format!(
                r"(\p{{No}})|([\p{{Pd}}\x{{2796}}])|([{DOTS}])|(\x{{2800}})|\p{{Cf}}"
            )),
            escapes: re(r"%[0-9a-fA-F]{2}|&(?:#[0-9]|#x[0-9a-f]|[a-z]+;)"),
        }
    }

    /// The first rule the surface form, the key, the key without any combining mark, or that
    /// with its look-alikes made plain breaks, if any; then the same for the key decoded
    /// ([`decoded`]), when it holds a percent escape or a character reference.
    ///
    /// Folding removes only the common diacritics (U+0300..U+036F); a keycap or another mark
    /// between digit groups would otherwise hide a number in both forms. Without its marks,
    /// a text's whitespace runs become one space (a mark between spaces folds away and leaves
    /// two). Normalization keeps symbols that only look like digits, dashes, dots and spaces
    /// (`➍➊➊➊ ➊➊➊➊ ...`, `555〜123〜4567`, `gmail 。com`, U+2800) and a few invisible format
    /// characters (U+FFF9..U+FFFB): the fourth form reads them as the digit (any: only their
    /// count matters), `-`, `.` and space they stand for, and drops the invisible ones.
    pub fn check(&self, surface: &str, key: &str) -> Option<Reason> {
        let folded = key != surface;
        self.check_one(surface)
            .or_else(|| folded.then(|| self.check_one(key)).flatten())
            .or_else(|| self.check_unmarked(key, folded))
            .or_else(|| {
                let escaped = memchr::memchr2(b'%', b'&', key.as_bytes()).is_some()
                    && self.escapes.is_match(key);
                let decoded = escaped.then(|| decoded(key))?;
                let decoded = normalize::key(&decoded);
                (decoded != key)
                    .then(|| {
                        self.check_one(&decoded).or_else(|| self.check_unmarked(&decoded, true))
                    })
                    .flatten()
            })
    }

    /// The rule the key without its marks (whitespace runs made one space), or that with its
    /// look-alikes made plain, breaks, if any. An ASCII key has neither marks nor look-alikes;
    /// it has a run of spaces only where folding removed a mark, so only if `folded` (it is
    /// not the surface form, whose whitespace normalization collapsed).
    fn check_unmarked(&self, key: &str, folded: bool) -> Option<Reason> {
        if key.is_ascii() && !(folded && has_space_run(key)) {
            return None;
        }
        let bare = self.marks.replace_all(key, "");
        let bare = one_space(bare);
        let plain = one_space(self.plain(&bare));
        let forms = [(bare != key).then_some(&bare), (plain != bare).then_some(&plain)];
        forms.into_iter().flatten().find_map(|form| self.check_one(form))
    }

    /// `text` with its look-alike digits, dashes, dots and spaces made plain, its format
    /// characters gone.
    fn plain<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        self.look_alikes.replace_all(text, |found: &regex::Captures<'_>| {
            ["0", "-", ".", " "]
                .into_iter()
                .zip(1..)
                .find_map(|(plain, group)| found.get(group).map(|_| plain))
                .unwrap_or("")
        })
    }

    /// The first rule `text` breaks, if any. Each pattern runs only on texts that have what it
    /// needs, found by SIMD byte searches: ingestion checks every log line, and most have none
    /// of it.
    fn check_one(&self, text: &str) -> Option<Reason> {
        let b = text.as_bytes();
        let at_sign = memchr::memchr(b'@', b).is_some();
        // A bracketed `at` before a provider needs no `@`: what spelled addresses need.
        let spelled = self.could_be_spelled_email(b);
        if (at_sign && (self.email.is_match(text) || self.spaced_email.is_match(text)))
            || (at_sign || spelled) && self.provider_email.is_match(text)
            || spelled && self.spelled_email.is_match(text)
        {
            return Some(Reason::Email);
        }
        // Unicode's numeric characters (Nd, Nl, No) are more than the digits `\d` matches (Nd),
        // so their count bounds that of the digits.
        let digits = if b.is_ascii() {
            b.iter().filter(|c| c.is_ascii_digit()).count()
        } else {
            text.chars().filter(|c| c.is_numeric()).count()
        };
        if (digits >= 9 && self.number.is_match(text))
            || (digits >= 7 && self.announced_number.is_match(text))
        {
            return Some(Reason::LongNumber);
        }
        if at_sign && self.userinfo.is_match(text) {
            return Some(Reason::UrlUserInfo);
        }
        let value = memchr::memchr2(b'=', b':', b).is_some();
        if value && self.secret.is_match(text) {
            return Some(Reason::UrlSecret);
        }
        if value && self.password.is_match(text) {
            return Some(Reason::Password);
        }
        // Every token is one word of MIN_TOKEN bytes or more; four switches between letters and
        // digits need two digits.
        if has_long_word(b) && ((digits >= 2 && has_random_run(b)) || self.token.is_match(text)) {
            return Some(Reason::Token);
        }
        None
    }

    /// What each spelled-out address needs: a spelled `dot`, ` at ` before a provider, or an
    /// `at` and an opening bracket (`(at)`).
    fn could_be_spelled_email(&self, text: &[u8]) -> bool {
        let [dot, at, at_word] = &self.spelled_words;
        dot.find(text).is_some()
            || at.find(text).is_some()
                && (at_word.find(text).is_some()
                    || memchr::memchr3(b'(', b'[', b'{', text).is_some()
                    || memchr::memchr(b'<', text).is_some())
    }
}

/// `text` with each run of spaces made one: folding a mark away leaves the spaces on both sides
/// of it, and keys and surfaces hold no other whitespace (normalization made it spaces).
fn one_space(text: std::borrow::Cow<'_, str>) -> std::borrow::Cow<'_, str> {
    if !has_space_run(&text) {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c != ' ' || !out.ends_with(' ') {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether `text` holds two spaces in a row. A plain loop: keys are short, and a SIMD search
/// per space, or a substring searcher set up per key, cost more than the scan.
fn has_space_run(text: &str) -> bool {
    text.as_bytes().windows(2).any(|pair| pair == b"  ")
}

/// Whether `text` has a run of [`MIN_TOKEN`] bytes or more without a space.
fn has_long_word(text: &[u8]) -> bool {
    if text.len() < MIN_TOKEN {
        return false;
    }
    let mut start = 0;
    for space in memchr::memchr_iter(b' ', text).chain([text.len()]) {
        if space - start >= MIN_TOKEN {
            return true;
        }
        start = space + 1;
    }
    false
}

/// Shortest text a `token` rule can match (`akia` and 16 characters, `xoxb-` and 15).
const MIN_TOKEN: usize = 20;

/// Whether `text` holds a run of [`MIN_TOKEN`] or more ASCII letters and digits that switches
/// between the two at least four times: what hashes and random keys look like
/// (`d41d8cd98f00b204e980`), and words, numbers and model names
/// (`americanidolseason5votingresults2006`: three switches) do not.
///
/// Or a *joined* run: one that also holds the symbols of base64 and base64url (`+ / _ -`), at
/// most one in [`JOINED_EVERY`] characters of it (a random key has one in 32 on average; a
/// phrase written with dashes, `mp3-downloads-for-2pac-songs`, one in 7), is [`JOINED_MIN`]
/// characters or more (keys are; `rtx4090-vs-rtx3080ti` is not), with the switches counted
/// between its letters and digits alone: `xk3lm9qr2/tz8wv1ys5+nb7hd4jf6_pg0rc2-ue`.
///
/// One pass follows both runs: a joiner ends the plain run and extends the joined one.
fn has_random_run(text: &[u8]) -> bool {
    let (mut plain, mut joined) = (Run::default(), Run::default());
    for &c in text.iter().chain([&b' ']) {
        if c.is_ascii_alphanumeric() {
            plain.push(c);
            joined.push(c);
            continue;
        }
        if plain.is_random(MIN_TOKEN) {
            return true;
        }
        plain = Run::default();
        if matches!(c, b'+' | b'/' | b'_' | b'-') {
            (joined.len, joined.joiners) = (joined.len + 1, joined.joiners + 1);
        } else if joined.is_random(JOINED_MIN) {
            return true;
        } else {
            joined = Run::default();
        }
    }
    false
}

/// A run [`has_random_run`] follows: its length, joiners, and switches between letters and
/// digits.
#[derive(Default)]
struct Run {
    len: usize,
    joiners: usize,
    switches: usize,
    last_digit: Option<bool>,
}

impl Run {
    fn push(&mut self, c: u8) {
        let digit = c.is_ascii_digit();
        if self.last_digit.is_some_and(|last| last != digit) {
            self.switches += 1;
        }
        (self.len, self.last_digit) = (self.len + 1, Some(digit));
    }

    fn is_random(&self, min: usize) -> bool {
        self.len >= min && self.switches >= 4 && self.joiners * JOINED_EVERY <= self.len
    }
}

/// A joined run ([`has_random_run`]) holds at most one `+ / _ -` in this many characters.
const JOINED_EVERY: usize = 8;

/// Shortest joined run ([`has_random_run`]): base64 of 24 random bytes.
const JOINED_MIN: usize = 32;

/// `text` decoded: rounds of [`decoded_once`] until one changes nothing, at most
/// [`DECODE_ROUNDS`] (`%2540` and `&amp;#64;` are escapes of escapes).
fn decoded(text: &str) -> String {
    let mut text = text.to_owned();
    for _ in 0..DECODE_ROUNDS {
        let next = decoded_once(&text);
        if next == text {
            break;
        }
        text = next;
    }
    text
}

/// Rounds of decoding [`decoded`] does at most.
const DECODE_ROUNDS: usize = 3;

/// `text` with its percent escapes (`%40`: UTF-8 bytes, each run of them decoded as one,
/// invalid sequences as U+FFFD) and then its character references decoded: numeric ones
/// (`&#64;`, `&#x40;`, up to 7 decimal or 6 hex digits, the `;` optional; a number that is no
/// scalar value stays as written) and the named ones [`ENTITIES`] lists (`&commat;`, `&nbsp;`),
/// in either case. A query typed from a URL or a web page can hide an address or a number
/// this way, and nothing else in normalization undoes it.
fn decoded_once(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut unescaped = String::with_capacity(text.len());
    let mut run = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|&b| (b as char).to_digit(16));
        if let (b'%', Some(high), Some(low)) = (bytes[i], hex(i + 1), hex(i + 2)) {
            run.push((high * 16 + low) as u8);
            i += 3;
            continue;
        }
        unescaped.push_str(&String::from_utf8_lossy(&run));
        run.clear();
        let next = text[i..].chars().next().map_or(1, char::len_utf8);
        unescaped.push_str(&text[i..i + next]);
        i += next;
    }
    unescaped.push_str(&String::from_utf8_lossy(&run));
    references(&unescaped)
}

/// `text` with its character references decoded (see [`decoded_once`]).
fn references(text: &str) -> String {
    static REFERENCE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let reference = REFERENCE.get_or_init(|| {
        Regex::new(r"&(?:#([0-9]{1,7});?|#[xX]([0-9a-fA-F]{1,6});?|([a-zA-Z]+);)")
            .expect("the reference pattern is valid")
    });
    reference
        .replace_all(text, |found: &regex::Captures<'_>| {
            let number = match (found.get(1), found.get(2)) {
                (Some(decimal), _) => decimal.as_str().parse().ok(),
                (_, Some(hex)) => u32::from_str_radix(hex.as_str(), 16).ok(),
                _ => None,
            };
            let named = found.get(3).and_then(|name| {
                let name = name.as_str().to_ascii_lowercase();
                ENTITIES.iter().find(|(n, _)| *n == name).map(|&(_, c)| c)
            });
            number
                .and_then(char::from_u32)
                .or(named)
                .map_or_else(|| found[0].to_owned(), String::from)
        })
        .into_owned()
}

/// The named character references [`decoded`] reads: those of the characters the rules look for.
const ENTITIES: &[(&str, char)] = &[
    ("amp", '&'),
    ("apos", '\''),
    ("colon", ':'),
    ("comma", ','),
    ("commat", '@'),
    ("equals", '='),
    ("excl", '!'),
    ("gt", '>'),
    ("hyphen", '-'),
    ("lowbar", '_'),
    ("lpar", '('),
    ("lsqb", '['),
    ("lt", '<'),
    ("nbsp", ' '),
    ("num", '#'),
    ("percnt", '%'),
    ("period", '.'),
    ("plus", '+'),
    ("quest", '?'),
    ("quot", '"'),
    ("rpar", ')'),
    ("rsqb", ']'),
    ("semi", ';'),
    ("sol", '/'),
];

#[cfg(test)]
mod tests;
