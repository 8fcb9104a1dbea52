//! `typeahead inspect`: what a snapshot holds and where its bytes go.

use std::fmt::Write;

use crate::builder::logline::format_hour;
use crate::snapshot::Snapshot;

/// A human-readable report of the snapshot's metadata and size by section.
pub fn report(snapshot: &Snapshot) -> String {
    let m = snapshot.meta();
    let total = snapshot.size_bytes();
    let per_key = |bytes: usize| {
        if m.keys == 0 { 0.0 } else { bytes as f64 / m.keys as f64 }
    };
    let mut s = String::new();
    let _ = writeln!(s, "snapshot {}", snapshot.id());
    let _ = writeln!(s, "  format version     {}", crate::snapshot::FORMAT_VERSION);
    let _ = writeln!(s, "  build time (unix)  {}", m.build_time_unix);
    let _ =
        writeln!(s, "  watermark hour     {}", m.watermark_hour.map_or("none".into(), format_hour));
    let rules = m.rules.map_or("unrecorded".into(), |r| r.to_string());
    let _ = writeln!(s, "  privacy rules      {rules}");
    let _ = writeln!(s, "  half-life hours    {}", m.half_life_hours);
    let _ = writeln!(s, "  min score          {}", m.min_score);
    let _ = writeln!(s, "  completions        {}", m.keys);
    let _ = writeln!(
        s,
        "  trie nodes         {} ({} with stored top-{} lists)",
        m.trie_nodes, m.list_nodes, m.top_k
    );
    let _ = writeln!(
        s,
        "  small subtree      <= {} completions enumerated at query time",
        m.small_subtree
    );
    let end = m.range_end.as_deref().map_or("(end)".to_owned(), |e| format!("{e:?}"));
    let _ = writeln!(s, "  key range          [{:?}, {end})", m.range_start);
    let _ = writeln!(s, "  total bytes        {total} ({:.2} per completion)", per_key(total));
    let memory = snapshot.memory_bytes();
    let _ = writeln!(
        s,
        "  memory when open   {memory} ({:.2} per completion: the file and what opening makes)",
        per_key(memory)
    );
    let _ = writeln!(s, "  sections:");
    for (name, bytes) in snapshot.section_sizes() {
        let share = if total == 0 { 0.0 } else { 100.0 * bytes as f64 / total as f64 };
        let _ = writeln!(
            s,
            "    {name:<18} {bytes:>12} B {share:>5.1}% {:>7.2} B/completion",
            per_key(bytes)
        );
    }
    s
}
