//! Raw query logs (`timestamp<TAB>query<TAB>user` lines), hour by hour.

use std::io::Write;

use rand::RngExt;
use rand::distr::Bernoulli;
use rand::distr::weighted::WeightedIndex;
use typeahead_builder::logline::push_timestamp;

use crate::Error;
use crate::dirty::{surface_variant, write_malformed};
use crate::queries::{SynthConfig, distinct_queries};
use crate::rng::{Rng, Stream, stream};
use crate::vocab::{coprime_multiplier, push_u64};
use crate::zipf::ZipfRank;

/// Configuration of [`write_log`].
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Seed: the same config always yields the same log.
    pub seed: u64,
    /// Number of distinct queries events are drawn from (at least 1 is used).
    pub distinct_queries: usize,
    /// Start of hour 0 (Unix seconds, UTC).
    pub start_unix: i64,
    /// Length of the log in hours.
    pub hours: u32,
    /// Mean number of lines per hour (the diurnal curve varies it).
    pub events_per_hour: u64,
    /// Number of distinct users (at least 1 is used).
    pub users: u64,
    /// Share of malformed lines, within `[0, 1]`.
    pub malformed_share: f64,
    /// What the queries are made of.
    pub text: QueryText,
}

/// The words of the generated queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueryText {
    /// Pseudo-word n-grams with AOL's lengths and word statistics ([`crate::distinct_queries`]):
    /// the shape benchmarks and tests need, at any size.
    #[default]
    PseudoWords,
    /// Real English words in common query shapes ([`crate::english`]): what the demo and
    /// `build --synthetic` show people; at most [`crate::english::capacity`] distinct queries.
    English,
}

impl LogConfig {
    /// Defaults: 50 000 distinct queries, starting 2026-01-05 00:00 UTC,
    /// 72 hours, 2 000 events/hour, 5 000 users, 0.5 % malformed lines.
    pub fn new(seed: u64) -> Self {
        LogConfig {
            seed,
            distinct_queries: 50_000,
            start_unix: 1_767_571_200, // 2026-01-05 00:00:00 UTC
            hours: 72,
            events_per_hour: 2_000,
            users: 5_000,
            malformed_share: 0.005,
            text: QueryText::PseudoWords,
        }
    }
}

/// Relative traffic by hour of day (UTC), evening peak, night trough.
const DIURNAL: [f64; 24] = [
    0.75, 0.55, 0.40, 0.30, 0.25, 0.25, 0.30, 0.45, 0.65, 0.85, 1.00, 1.10, 1.15, 1.20, 1.20, 1.20,
    1.20, 1.25, 1.30, 1.40, 1.45, 1.45, 1.30, 1.00,
];
/// Popularity exponent of queries in the log.
const LOG_QUERY_EXPONENT: f64 = 1.0;
/// Popularity exponent of users (some users are much more active).
const LOG_USER_EXPONENT: f64 = 0.8;
/// Share of events in which a user repeats one of their favourite queries.
const REPEAT_SHARE: f64 = 0.12;
/// Favourite queries per user.
const FAVORITES: u64 = 3;
/// Share of events that are written as a surface variant of the query.
const VARIANT_SHARE: f64 = 0.08;

#[derive(Debug, Clone)]
pub(crate) struct Trend {
    pub(crate) rank: usize,
    pub(crate) peak_hour: f64,
    rise: f64,
    fall: f64,
    pub(crate) peak_share: f64,
}

impl Trend {
    /// Share of the events of `hour` that search for the trending query.
    pub(crate) fn share_at(&self, hour: u64) -> f64 {
        let t = hour as f64 + 0.5 - self.peak_hour;
        let sigma = if t < 0.0 { self.rise } else { self.fall };
        self.peak_share * (-0.5 * (t / sigma) * (t / sigma)).exp()
    }
}

#[derive(Debug)]
pub(crate) struct LogModel<'a> {
    cfg: &'a LogConfig,
    pub(crate) queries: Vec<String>,
    query_zipf: ZipfRank,
    user_zipf: ZipfRank,
    malformed: Bernoulli,
    users: u64,
    user_mul: u64,
    user_add: u64,
    pub(crate) trends: Vec<Trend>,
}

impl<'a> LogModel<'a> {
    pub(crate) fn new(cfg: &'a LogConfig) -> Result<Self, Error> {
        let malformed =
            Bernoulli::new(cfg.malformed_share).map_err(|_| Error::Share(cfg.malformed_share))?;
        let wanted = cfg.distinct_queries.max(1);
        let queries = match cfg.text {
            QueryText::PseudoWords => distinct_queries(&SynthConfig::new(cfg.seed, wanted)),
            QueryText::English => crate::english::queries(cfg.seed, wanted),
        };
        let n = queries.len();
        let users = cfg.users.max(1);
        // Users are drawn by activity rank, then scattered over the ids by a permutation.
        let mut rng = stream(cfg.seed, Stream::Users, 0, 0);
        let user_mul = coprime_multiplier(&mut rng, users);
        let user_add = rng.random_range(0..users);
        let trend_count = 1 + u64::from(cfg.hours) / 24;
        let trends = (0..trend_count)
            .map(|i| {
                let mut r = stream(cfg.seed, Stream::Trend, i, 0);
                // Trending queries come from outside the head, as news does.
                let tail = n / 20;
                Trend {
                    rank: r.random_range(tail..n),
                    peak_hour: r.random_range(0.0..f64::from(cfg.hours.max(1))),
                    rise: r.random_range(6.0..14.0),
                    fall: r.random_range(18.0..36.0),
                    peak_share: r.random_range(0.01..0.03),
                }
            })
            .collect();
        let user_count = usize::try_from(users).unwrap_or(usize::MAX);
        Ok(LogModel {
            cfg,
            query_zipf: ZipfRank::new(n, LOG_QUERY_EXPONENT)?,
            user_zipf: ZipfRank::new(user_count, LOG_USER_EXPONENT)?,
            malformed,
            queries,
            users,
            user_mul,
            user_add,
            trends,
        })
    }

    fn sample_user(&self, rng: &mut Rng) -> u64 {
        let r = rng.sample(self.user_zipf) as u64;
        ((u128::from(r) * u128::from(self.user_mul) + u128::from(self.user_add))
            % u128::from(self.users)) as u64
    }

    /// Favourite `j` of `user`: fixed for the whole log, whichever hour asks.
    fn favorite(&self, user: u64, j: u64) -> usize {
        stream(self.cfg.seed, Stream::Favorite, user, j).sample(self.query_zipf)
    }

    /// Appends the lines of hour `hour`; returns (lines, malformed lines).
    fn write_hour(&self, hour: u64, buf: &mut Vec<u8>) -> Result<(u64, u64), Error> {
        let cfg = self.cfg;
        let mut rng = stream(cfg.seed, Stream::Hour, hour, 0);
        let hour_start = cfg.start_unix + 3600 * hour as i64;
        let hour_of_day = (hour_start.rem_euclid(86_400) / 3600) as usize;
        let mean = DIURNAL.iter().sum::<f64>() / DIURNAL.len() as f64;
        let jitter = rng.random_range(0.94..1.06);
        let events =
            (cfg.events_per_hour as f64 * DIURNAL[hour_of_day] / mean * jitter).round() as u64;
        // Where an event comes from: one of the trends, a user's favourite, or the Zipf law.
        let trend_shares: Vec<f64> = self.trends.iter().map(|t| t.share_at(hour)).collect();
        let rest = (1.0 - trend_shares.iter().sum::<f64>() - REPEAT_SHARE).max(0.0);
        let repeat = self.trends.len();
        let source = WeightedIndex::new(trend_shares.iter().copied().chain([REPEAT_SHARE, rest]))
            .map_err(|source| Error::EventSources { hour, source })?;

        let mut query = String::with_capacity(128);
        let mut malformed = 0u64;
        for _ in 0..events {
            let ts = hour_start + rng.random_range(0..3600);
            if rng.sample(self.malformed) {
                let query = &self.queries[rng.sample(self.query_zipf)];
                let user = self.sample_user(&mut rng);
                write_malformed(&mut rng, query, user, ts, buf);
                malformed += 1;
                continue;
            }
            let (user, rank) = match rng.sample(&source) {
                i if i < repeat => (self.sample_user(&mut rng), self.trends[i].rank),
                i if i == repeat => {
                    let user = self.sample_user(&mut rng);
                    (user, self.favorite(user, rng.random_range(0..FAVORITES)))
                }
                _ => {
                    let rank = rng.sample(self.query_zipf);
                    (self.sample_user(&mut rng), rank)
                }
            };
            query.clear();
            query.push_str(&self.queries[rank]);
            if rng.random_bool(VARIANT_SHARE) {
                surface_variant(&mut query, &mut rng);
            }
            push_timestamp(buf, ts);
            buf.push(b'\t');
            buf.extend_from_slice(query.as_bytes());
            buf.push(b'\t');
            push_user(buf, user);
            buf.push(b'\n');
        }
        Ok((events, malformed))
    }
}

pub(crate) fn push_user(buf: &mut Vec<u8>, user: u64) {
    let mut s = String::with_capacity(12);
    s.push('u');
    push_u64(&mut s, user);
    buf.extend_from_slice(s.as_bytes());
}

/// [`write_log`], also counting the malformed lines.
pub(crate) fn write_log_counted<W: Write>(
    cfg: &LogConfig,
    first_hour_offset: u32,
    count: u32,
    out: &mut W,
) -> Result<(u64, u64), Error> {
    let first = u64::from(first_hour_offset);
    let end = (first + u64::from(count)).min(u64::from(cfg.hours));
    if first >= end {
        return Ok((0, 0));
    }
    let model = LogModel::new(cfg)?;
    let mut buf = Vec::with_capacity(64 * cfg.events_per_hour.min(1 << 20) as usize);
    let mut lines = 0;
    let mut malformed = 0;
    for hour in first..end {
        buf.clear();
        let (l, m) = model.write_hour(hour, &mut buf)?;
        lines += l;
        malformed += m;
        out.write_all(&buf)?;
    }
    Ok((lines, malformed))
}

/// Writes the raw log lines (`timestamp<TAB>query<TAB>user\n`) for hours
/// `[first_hour_offset, first_hour_offset + count)` of the config, clipped to
/// `cfg.hours`. Each hour has its own random stream keyed by `(seed, hour)`,
/// so generating hour by hour gives byte-identical output to one big call.
/// Events within an hour are not sorted by time. Returns the number of lines
/// written (including malformed ones); an error for a malformed share outside
/// `[0, 1]` or a failed write.
///
/// Every call regenerates the distinct queries (`cfg.distinct_queries`), so
/// calls cost at least [`distinct_queries`] for that size.
pub fn write_log<W: Write>(
    cfg: &LogConfig,
    first_hour_offset: u32,
    count: u32,
    out: &mut W,
) -> Result<u64, Error> {
    write_log_counted(cfg, first_hour_offset, count, out).map(|(lines, _)| lines)
}

/// The built-in synthetic log of `typeahead build --synthetic` ([`LogConfig::new`] with `seed`
/// and English queries, all its hours), written to a temporary file that is deleted when the handle drops.
pub fn write_temp_log(seed: u64) -> Result<(tempfile::NamedTempFile, u64), Error> {
    let cfg = LogConfig { text: QueryText::English, ..LogConfig::new(seed) };
    let mut file =
        tempfile::Builder::new().prefix("typeahead-synthetic-").suffix(".tsv").tempfile()?;
    let mut out = std::io::BufWriter::new(file.as_file_mut());
    let lines = write_log(&cfg, 0, cfg.hours, &mut out)?;
    out.flush()?;
    drop(out);
    Ok((file, lines))
}

#[cfg(test)]
mod tests;
