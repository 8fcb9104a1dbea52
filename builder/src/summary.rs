//! The report printed at the end of a build: what was read, what was skipped and why, and what
//! was written.

use std::fmt;

use crate::build::BuildSummary;
use crate::logline::format_hour;

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn hour(h: Option<u32>) -> String {
    h.map_or_else(|| "none".to_owned(), format_hour)
}

fn by_reason(counts: &std::collections::BTreeMap<&'static str, u64>) -> String {
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {}", thousands(*v))).collect();
    if parts.is_empty() { String::new() } else { format!(" ({})", parts.join(", ")) }
}

impl fmt::Display for BuildSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.lines;
        let secs = self.elapsed.as_secs_f64();
        let meta = &self.snapshot.meta;
        writeln!(f, "build summary")?;
        writeln!(
            f,
            "  input files        {} ({:.1} MB decompressed)",
            self.files,
            l.bytes as f64 / 1e6
        )?;
        writeln!(f, "  lines read         {}", thousands(l.lines))?;
        writeln!(f, "  lines counted      {}", thousands(l.counted))?;
        writeln!(f, "  bad lines          {}{}", thousands(l.bad_total()), by_reason(&l.bad))?;
        writeln!(
            f,
            "  privacy withheld   {}{}",
            thousands(l.privacy_total()),
            by_reason(&l.privacy)
        )?;
        for (reason, examples) in &l.examples {
            for e in examples {
                let excerpt = e.excerpt.as_deref().map(|x| format!(": {x:?}")).unwrap_or_default();
                writeln!(f, "    {reason}: {}:{}{excerpt}", e.file.display(), e.line)?;
            }
        }
        writeln!(
            f,
            "  late lines         {} (at or before watermark {})",
            thousands(l.late),
            hour(self.previous_watermark)
        )?;
        let span = match (l.hours.first(), l.hours.last()) {
            (Some(&a), Some(&b)) => format!(" ({} .. {})", format_hour(a), format_hour(b)),
            _ => String::new(),
        };
        writeln!(f, "  hours processed    {}{span}", l.hours.len())?;
        if l.incomplete > 0 {
            writeln!(
                f,
                "  incomplete hours   {} lines left for a later build",
                thousands(l.incomplete)
            )?;
        }
        writeln!(
            f,
            "  watermark          {} -> {}",
            hour(self.previous_watermark),
            hour(self.watermark)
        )?;
        writeln!(
            f,
            "  keys in state      {} (carried over {}, dropped below min-score {})",
            thousands(self.keys_kept),
            thousands(self.keys_before),
            thousands(self.dropped_min_score)
        )?;
        writeln!(
            f,
            "  keys served        {} (held back by min-users {}, blocked {})",
            thousands(meta.keys),
            thousands(self.held_min_users),
            thousands(self.blocked)
        )?;
        writeln!(
            f,
            "  trie nodes         {} (with stored top-{} lists: {})",
            thousands(meta.trie_nodes),
            meta.top_k,
            thousands(meta.list_nodes)
        )?;
        let per = if meta.keys == 0 { 0.0 } else { self.snapshot.bytes as f64 / meta.keys as f64 };
        writeln!(
            f,
            "  snapshot bytes     {} ({per:.1} bytes per completion)",
            thousands(self.snapshot.bytes)
        )?;
        if self.unchanged {
            writeln!(
                f,
                "  generation         {} (unchanged: the live generation has this content; \
                 nothing published)",
                self.generation
            )?;
        } else {
            writeln!(f, "  generation         {}", self.generation)?;
        }
        if let Some(v) = &self.gate {
            writeln!(
                f,
                "  regression gate    passed: top-10 churn {:.1}% over {} hot prefixes",
                v.churn * 100.0,
                v.prefixes
            )?;
        }
        if let Some(m) = &self.manifest {
            writeln!(
                f,
                "  partitions         {} (generation {})",
                m.partitions.len(),
                m.generation
            )?;
            for p in &m.partitions {
                let end = p.end.as_deref().map_or_else(|| "end".to_owned(), |e| format!("{e:?}"));
                writeln!(
                    f,
                    "    {}  [{:?}, {end})  {} keys  {} bytes",
                    p.file,
                    p.start,
                    thousands(p.keys),
                    thousands(p.bytes)
                )?;
            }
        }
        let ingest = self.ingest_elapsed.as_secs_f64();
        let rate = if ingest > 0.0 { l.lines as f64 / ingest } else { 0.0 };
        write!(
            f,
            "  elapsed            {secs:.2} s (reading and counting {ingest:.2} s, {} lines/s)",
            thousands(rate as u64)
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_separators() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1000), "1,000");
        assert_eq!(super::thousands(1234567), "1,234,567");
    }
}
