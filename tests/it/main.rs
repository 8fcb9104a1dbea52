//! One integration-test binary (one link step on a 2-core machine), one module per concern.

// Shared helpers: temp dirs, a tiny deterministic log generator, running the real binary.
mod support;

// `typeahead build/query/inspect` driven as a user drives them, through the real binary.
mod cli;
// Incremental hourly builds equal one-shot builds; late lines; half-life guard.
mod incremental;
// SIGKILL during builds never damages the published state or snapshot.
mod crash;
// A real HTTP client and `typeahead serve` processes.
mod http;
// The serving API, hot swap, corrupt snapshots, live blocklist, admin auth.
mod serve;
// Slow, idle, flooding and oversized clients; blocklist bypass attempts; what logs may say.
mod hardening;
// Files changed under a running server: in-place overwrites, FIFOs, repeated reloads,
// rebuilds that blocked a term, missing blocklists, readable token files.
mod tamper;
// Partitioned builds, the aggregator and `typeahead cluster`.
mod cluster;
// What each process's `/metrics` exports (its own metrics only).
mod metrics;
// `typeahead cluster` restarts what dies and gives up loudly on what cannot be kept up.
mod supervision;
// The hourly pipeline: catch-up, generations, rollback, the regression gate, a live cluster.
mod pipeline;
// Object storage for real (SeaweedFS): `serve --manifest s3://...`.
mod remote;
// Builds that publish to a bucket, rollback and pruning there, racing and killed builders.
mod bucket;
// `aggregate --backends dns:NAME:PORT`: replicas found by name, scaled up and down under load.
mod discovery;
// The fleet on a bucket with DNS discovery, under load, through builder kills, a frozen store,
// a corrupt part and scaling.
mod fleet;
// The search page in headless Chromium (needs `--features browser-tests` and the browser).
#[cfg(feature = "browser-tests")]
mod browser;
