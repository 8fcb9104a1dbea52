//! The `typeahead` binary: parse arguments, set up logging, call the library. The arguments
//! and what each command calls live in [`cli`]; the work lives in the library.

mod cli;

use std::io::{self, IsTerminal};
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .with_env_filter(
            // Info never carries query text (tests/it/hardening.rs checks); `audit` is the
            // target of admin changes and rejected admin requests.
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                "typeahead=info,typeahead_builder=info,typeahead_core=info,audit=info".into()
            }),
        )
        .init();
    match cli::commands::run(cli::args::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<cli::commands::StdoutClosed>() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            cli::commands::exit_code(&e)
        }
    }
}

/// Every request allocates a few dozen small buffers that often die on another thread (hyper's
/// connection tasks, tokio's workers), which glibc's per-thread arenas handle poorly: a profile
/// of the aggregator under load put 17% of its time in malloc and free. With mimalloc the
/// aggregator serves 24-27% more requests per second and a server 5-13% more (`cargo bench
/// --bench http_load -- --cluster 4x2 --match prefix`); the price is memory it keeps for reuse,
/// 30-40 MB per process (docs/performance.md, "Aggregator"). It is built without transparent huge pages
/// (`no_thp`), and processes that answer requests turn them off for everything but their
/// snapshots ([`typeahead::huge_pages`]).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
