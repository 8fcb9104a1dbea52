//! Criterion benchmarks of the request-path lookup: top-10 for prefixes of 1, 2, 4 and 8
//! characters and for whole queries, on a synthetic snapshot (1M completions by default;
//! `TYPEAHEAD_BENCH_KEYS=10000000` for the 10M figures).
//!
//! Run: `cargo bench --bench lookup`. Per-query percentiles (p99) come from
//! `cargo bench --bench scale`, which times every lookup individually.

mod common;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn keys() -> usize {
    std::env::var("TYPEAHEAD_BENCH_KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000)
}

fn lookup(c: &mut Criterion) {
    let entries = common::synthetic_entries(keys(), 42);
    let (snapshot, bytes) = common::snapshot_of(&entries);
    eprintln!(
        "synthetic snapshot: {} completions, {:.2} bytes per completion",
        snapshot.len(),
        bytes as f64 / snapshot.len() as f64
    );
    let mut group = c.benchmark_group("lookup");
    for (name, chars) in
        [("1", Some(1)), ("2", Some(2)), ("4", Some(4)), ("8", Some(8)), ("whole", None)]
    {
        let prefixes = common::prefixes(&entries, chars, 4096, 7);
        group.throughput(Throughput::Elements(1));
        group.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % prefixes.len();
                black_box(snapshot.suggest(&prefixes[i], 10))
            })
        });
    }
    group.finish();
}

fn build(c: &mut Criterion) {
    let entries = common::synthetic_entries(100_000, 43);
    let mut group = c.benchmark_group("build");
    group.sample_size(10);
    group.throughput(Throughput::Elements(entries.len() as u64));
    group.bench_function("snapshot_100k", |b| b.iter(|| black_box(common::snapshot_of(&entries))));
    group.finish();
}

criterion_group!(benches, lookup, build);
criterion_main!(benches);
