//! One build: new log hours + the previous state -> the new state and a new generation.
//!
//! [`run`] reads as the crash-safety protocol, one function per phase:
//!
//! 1. [`open_state`]: take the state directory's lock (two builders never write one state),
//!    open the state, re-normalize it if older rules wrote it.
//! 2. [`ingest_logs`]: read the new logs in parallel ([`crate::ingest`]); lines at or before
//!    the watermark are late.
//! 3. [`stage`]: merge, in key order, the old state (streamed from disk) with the new counts,
//!    scoring every key at the new watermark and dropping keys below `--min-score`; the new
//!    state is written beside the old one, not yet visible.
//! 4. [`write`]: the snapshot(s) of the keys users may see (enough distinct users, not
//!    blocked), into a new directory of the history.
//! 5. [`gate`]: the regression gate may refuse the candidate; nothing is published then. A
//!    candidate that answers exactly as the live generation does (an hour with no new line)
//!    is not published either: it would only push an older generation out of the history and
//!    make every server reload what it holds.
//! 6. [`publish_generation`]: the generation goes live, the manifest last.
//! 7. [`commit`]: only now the staged state replaces the old one.
//!
//! Every file is replaced atomically, so a crash at any point leaves the previous state and
//! generation valid, and re-running the same input gives the same result.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use typeahead_core::atomic;
use typeahead_core::blocklist::Blocklist;
use typeahead_core::generation::{Generation, manifest_path};
use typeahead_core::manifest::{MANIFEST_FORMAT, Manifest, Partition as ManifestPartition};
use typeahead_core::normalize;
use typeahead_core::snapshot::{self, BuildInfo, Entry, WriteStats};

use crate::ema::{BadHalfLife, Decay};
use crate::gate::{self, GateOptions, Verdict};
use crate::ingest::{self, IngestOptions, LineStats};
use crate::input::{self, InputError};
use crate::logline::{Hour, format_hour};
use crate::migrate;
use crate::partition::{self, Partitioning};
use crate::privacy::Privacy;
use crate::publish;
use crate::record::KeyRecord;
use crate::state::{self, Header, Lock, StateError};

/// Everything a build needs to know.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Log files or directories.
    pub inputs: Vec<PathBuf>,
    /// Directory keeping the EMA state between builds; `None` for a one-shot build.
    pub state_dir: Option<PathBuf>,
    /// Where the snapshot goes: a file, or a directory when `partitioning` is set.
    pub out: PathBuf,
    /// Split the key space into prefix ranges, one snapshot each, plus `manifest.json`.
    pub partitioning: Option<Partitioning>,
    /// EMA half-life in hours.
    pub half_life_hours: f64,
    /// Keys scoring below this are dropped from state and snapshot.
    pub min_score: f64,
    /// Keys issued by fewer distinct users are kept in the state but not served.
    pub min_users: u64,
    /// Keys this list blocks are not served.
    pub blocklist: Blocklist,
    /// Suggestions per prefix the snapshot stores.
    pub top_k: usize,
    /// `Some(hour)`: inputs are pre-aggregated `query<TAB>count` lines for that hour.
    pub counts_hour: Option<Hour>,
    /// Worker threads for log parsing.
    pub threads: usize,
    /// Only hours before this one are processed (complete hours); later lines wait for the
    /// next build. `None` processes every hour.
    pub until: Option<Hour>,
    /// Generations kept for rollback (at least 1: the live one).
    pub keep_generations: usize,
    /// The regression gate; `None` publishes whatever was built.
    pub gate: Option<GateOptions>,
}

/// What a build did, for the summary.
#[derive(Debug, Clone)]
pub struct BuildSummary {
    /// Input files read.
    pub files: usize,
    /// Line counters of the new input.
    pub lines: LineStats,
    /// Watermark before the build.
    pub previous_watermark: Option<Hour>,
    /// Watermark after the build.
    pub watermark: Option<Hour>,
    /// Keys carried over from the previous state.
    pub keys_before: u64,
    /// Keys kept in the new state.
    pub keys_kept: u64,
    /// Keys dropped for scoring below `--min-score`.
    pub dropped_min_score: u64,
    /// Keys kept but not served for lack of distinct users.
    pub held_min_users: u64,
    /// Keys kept but not served because the blocklist blocks them.
    pub blocked: u64,
    /// The snapshot written (for a partitioned build: totals over the partitions).
    pub snapshot: WriteStats,
    /// The manifest of a partitioned build.
    pub manifest: Option<Manifest>,
    /// Id of the generation published, or of the live one when [`Self::unchanged`].
    pub generation: String,
    /// The candidate had the live generation's content (all but its build time): nothing was
    /// published, the live generation stays, and the state still moved on.
    pub unchanged: bool,
    /// What the regression gate measured (when a live generation existed).
    pub gate: Option<Verdict>,
    /// Wall time of reading and counting the new logs.
    pub ingest_elapsed: std::time::Duration,
    /// Wall time of the whole build.
    pub elapsed: std::time::Duration,
}

/// Why a build failed. Nothing was published when this is returned, except with
/// [`BuildError::StateNotSaved`].
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// An input could not be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The state could not be read, written or locked.
    #[error(transparent)]
    State(#[from] StateError),
    /// The snapshot could not be written.
    #[error(transparent)]
    Snapshot(#[from] snapshot::Error),
    /// The keys cannot be split as asked.
    #[error("cannot partition")]
    Partition(#[from] partition::PartitionError),
    /// The manifest does not validate (a bug: the builder made it).
    #[error("cannot write the manifest: {0}")]
    Manifest(String),
    /// Another build or a rollback is publishing to the same output.
    #[error(transparent)]
    OutLocked(#[from] publish::LockError),
    /// The regression gate refused to publish; nothing changed (the state did not advance).
    #[error("regression gate refused to publish: {0} (rerun with --force to publish anyway)")]
    GateRefused(String),
    /// The generation just written cannot be read back; nothing was published.
    #[error("the new generation cannot be read back; nothing was published")]
    Unreadable(#[source] typeahead_core::generation::Error),
    /// The state was written by a newer build under normalization rules this one does not
    /// know: reading it would split its keys the old way and relabel them as current.
    #[error(
        "the state in {dir} was written under normalization rules {state}, newer than this \
         build's {ours}; run a build at least as new (or start a new state directory)"
    )]
    NewerRules {
        /// The state directory.
        dir: PathBuf,
        /// Rules version recorded in the state.
        state: u32,
        /// This build's rules version.
        ours: u32,
    },
    /// The half-life is not a positive number.
    #[error(transparent)]
    HalfLife(#[from] BadHalfLife),
    /// The state was built with another half-life; its scores cannot be converted.
    #[error(
        "the state in {dir} was built with --half-life {state}, this build asks for {requested}; \
         use the same half-life or start a new state directory"
    )]
    HalfLifeMismatch {
        /// The state directory.
        dir: PathBuf,
        /// Half-life recorded in the state.
        state: f64,
        /// Half-life requested.
        requested: f64,
    },
    /// Staging the new state file failed (`atomic::stage` needs a `From<io::Error>`; the build
    /// reports it as [`BuildError::Write`] with the state's path).
    // The cause is the error's source: `{:#}` (the binary) prints "...: No space left on device".
    #[error("cannot write the new state")]
    StateWrite(#[from] std::io::Error),
    /// The generation is live, but the state describing it could not replace the old one:
    /// the next build counts this build's hours again from the old state (unless its inputs
    /// no longer hold them) and publishes the same answers.
    #[error(
        "generation {generation} is live, but the state {path} could not be saved; the next \
         build repeats this one's hours"
    )]
    StateNotSaved {
        /// The generation published.
        generation: String,
        /// The state file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A writing step failed.
    #[error("cannot write {path}")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Runs one build, in the phases of the crash-safety protocol. Each phase leaves everything
/// published untouched until [`publish_generation`]; the state moves only in [`commit`], after
/// the generation it describes is live. A crash anywhere leaves the last good state and
/// generation, and re-running the same input gives the same result.
pub fn run(opts: &BuildOptions) -> Result<BuildSummary, BuildError> {
    let started = Instant::now();
    let decay = Decay::new(opts.half_life_hours)?;
    let mut state = open_state(opts, decay)?;
    let ingested = ingest_logs(opts, decay, state.watermark)?;
    let watermark = state.watermark.max(ingested.lines.hours.last().copied());
    let (merge, staged) = stage(opts, decay, watermark, &mut state, ingested.keys)?;
    let mut written = write(opts, &merge.entries, watermark)?;
    let gated = gate(
        opts,
        &written,
        Continuity { state: state.watermark, counted: &ingested.lines.hours },
    )?;
    let unchanged = gated.unchanged.is_some();
    match gated.unchanged {
        // The live generation stays; its stable names were mended when the build took the lock.
        Some(live) => written.discard(live),
        None => publish_generation(opts, &mut written)?,
    }
    let committed = commit(staged, &state, &written.generation);
    prune_history(opts, &written);
    committed?;
    let c = merge.counts;
    Ok(BuildSummary {
        files: ingested.files,
        lines: ingested.lines,
        previous_watermark: state.watermark,
        watermark,
        keys_before: c.before,
        keys_kept: c.kept,
        dropped_min_score: c.dropped,
        held_min_users: c.held,
        blocked: c.blocked,
        snapshot: written.snapshot,
        manifest: written.manifest,
        generation: written.generation,
        unchanged,
        gate: gated.verdict,
        ingest_elapsed: ingested.elapsed,
        elapsed: started.elapsed(),
    })
}

/// The state a build starts from: locked for the whole build, so two builders never write it.
struct OpenState {
    _lock: Option<Lock>,
    /// `STATE_DIR/state.bin`, when the build keeps a state.
    path: Option<PathBuf>,
    reader: Option<state::Reader>,
    /// The last hour the state holds.
    watermark: Option<Hour>,
}

/// Phase 1: lock and open the state; check its half-life; re-normalize a state written under
/// older normalization rules (in memory: the state on disk changes only when this build
/// commits its new state, so a crash leaves the old one to be migrated again).
fn open_state(opts: &BuildOptions, decay: Decay) -> Result<OpenState, BuildError> {
    let lock = opts.state_dir.as_deref().map(Lock::acquire).transpose()?;
    let path = opts.state_dir.as_ref().map(|d| d.join(state::STATE_FILE));
    let mut reader = match &path {
        Some(p) if p.exists() => Some(state::Reader::open(p)?),
        _ => None,
    };
    if let Some(r) = &reader {
        let state = r.header().half_life_hours;
        if (state - opts.half_life_hours).abs() > 1e-9 * state {
            let dir = opts.state_dir.clone().unwrap_or_default();
            return Err(BuildError::HalfLifeMismatch {
                dir,
                state,
                requested: opts.half_life_hours,
            });
        }
    }
    let rules = reader.as_ref().map(|r| r.header().rules);
    if let Some(state) = rules.filter(|&rules| rules > normalize::RULES_VERSION) {
        let dir = opts.state_dir.clone().unwrap_or_default();
        return Err(BuildError::NewerRules { dir, state, ours: normalize::RULES_VERSION });
    }
    if let Some(r) = reader.as_mut().filter(|r| r.header().rules < normalize::RULES_VERSION) {
        let from = r.header().rules;
        let mut stats = None;
        r.rewrite(|records| {
            let (records, s) = migrate::renormalize(records, decay, &Privacy::new());
            stats = Some(s);
            records
        })?;
        tracing::info!(from, to = normalize::RULES_VERSION, stats = ?stats, "state re-normalized under today's rules");
    }
    let watermark = reader.as_ref().and_then(|r| r.header().watermark);
    Ok(OpenState { _lock: lock, path, reader, watermark })
}

/// What the logs added.
struct Ingested {
    files: usize,
    /// New counts per key, in key order.
    keys: Vec<(String, KeyRecord)>,
    lines: LineStats,
    elapsed: std::time::Duration,
}

/// Phase 2: read the log hours after the state's watermark (in parallel).
fn ingest_logs(
    opts: &BuildOptions,
    decay: Decay,
    watermark: Option<Hour>,
) -> Result<Ingested, BuildError> {
    let files = input::expand_inputs(&opts.inputs)?;
    let ingest_opts = IngestOptions {
        watermark,
        cutoff: opts.until,
        decay,
        counts_hour: opts.counts_hour,
        threads: opts.threads.max(1),
    };
    let started = Instant::now();
    let (keys, lines) = ingest::ingest(&files, &ingest_opts)?;
    Ok(Ingested { files: files.len(), keys, lines, elapsed: started.elapsed() })
}

/// Phase 3: merge the old state with the new counts at the new watermark, collecting the
/// entries users may see, and stage the next state beside the live one (written and synced,
/// not yet visible).
fn stage<'a>(
    opts: &'a BuildOptions,
    decay: Decay,
    watermark: Option<Hour>,
    state: &mut OpenState,
    new: Vec<(String, KeyRecord)>,
) -> Result<(Merge<'a>, Option<atomic::Staged>), BuildError> {
    let mut merge =
        Merge { opts, decay, watermark, entries: Vec::new(), counts: Counts::default() };
    let Some(path) = &state.path else {
        merge.run(None, new, |_, _| Ok(()))?;
        return Ok((merge, None));
    };
    let header = Header {
        half_life_hours: opts.half_life_hours,
        watermark,
        rules: normalize::RULES_VERSION,
    };
    let write_err = |source| BuildError::Write { path: path.clone(), source };
    let ((), staged) = atomic::stage(path, |out| -> Result<(), BuildError> {
        let mut writer = state::Writer::new(out, &header).map_err(write_err)?;
        merge.run(state.reader.as_mut(), new, |k, r| writer.push(k, r).map_err(write_err))?;
        writer.finish().map_err(write_err)?;
        Ok(())
    })
    .map_err(|e| match e {
        // Creating, flushing or syncing the temp file: name the state it was for.
        BuildError::StateWrite(source) => write_err(source),
        other => other,
    })?;
    Ok((merge, Some(staged)))
}

/// A generation written into the history, not yet live.
struct Written {
    /// Its directory in the history: the pending one until [`Written::seal`], which the next
    /// build deletes if this one stops before (so a generation the gate refused, or never saw
    /// to its end, is never a rollback's target nor one of the kept generations).
    dir: PathBuf,
    /// The snapshot's file name in `dir`, when not partitioned.
    file_name: std::ffi::OsString,
    partitioned: bool,
    snapshot: WriteStats,
    manifest: Option<Manifest>,
    generation: String,
    /// The output's lock ([`publish::lock`]).
    _lock: publish::OutLock,
}

impl Written {
    /// What [`Generation::open`] opens: the directory, or the snapshot file in it.
    fn candidate(&self) -> PathBuf {
        if self.partitioned { self.dir.clone() } else { self.dir.join(&self.file_name) }
    }

    /// Removes the pending directory of a candidate with the live generation's content, and
    /// describes the live generation instead.
    fn discard(&mut self, live: Live) {
        let _ = std::fs::remove_dir_all(&self.dir);
        self.generation = live.id;
        self.manifest = live.manifest;
    }

    /// Renames the pending directory to the generation's name, once it is live.
    fn seal(&mut self) -> Result<(), BuildError> {
        self.dir = publish::seal(&self.dir, &self.generation).map_err(write_err(&self.dir))?;
        Ok(())
    }
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> BuildError + use<> {
    let path = path.to_owned();
    move |source| BuildError::Write { path, source }
}

/// Phase 4: write the snapshot (or one per partition and the manifest) into the history's
/// pending directory; it is named by the generation once it passed the gate.
fn write(
    opts: &BuildOptions,
    entries: &[Entry],
    watermark: Option<Hour>,
) -> Result<Written, BuildError> {
    let info = BuildInfo {
        build_time_unix: typeahead_core::clock::now_unix(),
        watermark_hour: watermark,
        half_life_hours: opts.half_life_hours,
        min_score: opts.min_score,
        top_k: opts.top_k,
        range_start: String::new(),
        range_end: None,
        blocklist: opts.blocklist.entries().to_vec(),
        rules: Some(normalize::RULES_VERSION),
        small_subtree: typeahead_core::snapshot::SMALL_SUBTREE,
    };
    let partitioned = opts.partitioning.is_some();
    if let Some(parent) = opts.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(write_err(parent))?;
    }
    // Held until the build ends: through the gate, the publication and the pruning.
    let lock = publish::lock(&opts.out, partitioned)?;
    // First, so that a build the gate refuses (or that fails) mends them too.
    mend_live_names(opts, partitioned);
    let pending = publish::pending_dir(&opts.out, partitioned).map_err(write_err(&opts.out))?;
    let file_name =
        opts.out.file_name().map(std::ffi::OsStr::to_owned).unwrap_or_else(|| "snapshot".into());
    let (snapshot, manifest) = match opts.partitioning {
        None => (snapshot::write_file(&pending.join(&file_name), entries, &info)?, None),
        Some(how) => {
            let (stats, manifest) = write_partitions(&pending, entries, &info, how)?;
            (stats, Some(manifest))
        }
    };
    let generation =
        manifest.as_ref().map_or_else(|| snapshot.id.clone(), |m| m.generation.clone());
    Ok(Written {
        dir: pending,
        file_name,
        partitioned,
        snapshot,
        manifest,
        generation,
        _lock: lock,
    })
}

/// What a build continues from, for the gate's check that it loses nothing the live
/// generation counted ([`behind_live`]).
struct Continuity<'a> {
    /// The watermark of the state the build started from.
    state: Option<Hour>,
    /// The hours of the lines it counted.
    counted: &'a std::collections::BTreeSet<Hour>,
}

/// The live generation, as a build that leaves it live describes it.
struct Live {
    id: String,
    manifest: Option<Manifest>,
}

/// What the gate let through.
#[derive(Default)]
struct Gated {
    /// What the regression gate measured, when it ran.
    verdict: Option<Verdict>,
    /// The live generation, when the candidate has its content: then nothing is published.
    unchanged: Option<Live>,
}

/// Phase 5: the regression gate compares the candidate with the live generation, and checks
/// that a build with a state loses no hour the live generation counted; a refusal removes the
/// candidate and publishes nothing. A candidate with the live generation's content passes as
/// [`Gated::unchanged`]. (Without the gate, `--force`, the candidate is published whatever it
/// holds.)
fn gate(
    opts: &BuildOptions,
    written: &Written,
    continuity: Continuity<'_>,
) -> Result<Gated, BuildError> {
    let live_exists =
        if written.partitioned { manifest_path(&opts.out).exists() } else { opts.out.exists() };
    let Some(gate) = opts.gate.as_ref().filter(|_| live_exists) else {
        return Ok(Gated::default());
    };
    let live = match Generation::open(&opts.out) {
        Ok(live) => live,
        // An unreadable live generation is what a new build repairs: publish. Not one that
        // drops hours it counted, though: its manifest still says which (a damaged partition
        // file, one a format bump made unreadable, leaves it readable).
        Err(e) => {
            tracing::warn!(error = %typeahead_core::report::chain(&e), "the live generation cannot be read; the gate is skipped");
            let manifest = written.partitioned.then(|| Manifest::read(&manifest_path(&opts.out)));
            let hour = manifest.and_then(Result::ok).and_then(|m| m.watermark_hour);
            refuse_if_behind(opts, written, hour, &continuity)?;
            return Ok(Gated::default());
        }
    };
    // The candidate is not: what cannot be read back here (an I/O error, a writer and reader
    // that disagree) must not go live untested.
    let new = Generation::open(&written.candidate()).map_err(|e| {
        let _ = std::fs::remove_dir_all(&written.dir);
        BuildError::Unreadable(e)
    })?;
    refuse_if_behind(opts, written, live.watermark_hour(), &continuity)?;
    if new.same_content(&live) {
        let unchanged = Live { id: live.id().to_owned(), manifest: live.manifest };
        return Ok(Gated { verdict: None, unchanged: Some(unchanged) });
    }
    let v = gate::check(&live, &new, &gate.blocklist);
    if let Some(why) = v.refusal(gate.max_churn) {
        let _ = std::fs::remove_dir_all(&written.dir);
        return Err(BuildError::GateRefused(why));
    }
    Ok(Gated { verdict: Some(v), unchanged: None })
}

/// Refuses the candidate (and removes it) when a build with a state would drop hours the live
/// generation, counted up to `live_hour`, holds ([`behind_live`]).
fn refuse_if_behind(
    opts: &BuildOptions,
    written: &Written,
    live_hour: Option<Hour>,
    continuity: &Continuity<'_>,
) -> Result<(), BuildError> {
    let behind = opts.state_dir.as_ref().and_then(|_| behind_live(live_hour?, continuity));
    if let Some(why) = behind {
        let _ = std::fs::remove_dir_all(&written.dir);
        return Err(BuildError::GateRefused(why));
    }
    Ok(())
}

/// Why publishing would drop hours the live generation counts, if it would. That takes a
/// state behind the live generation (a builder killed between publishing and saving its state,
/// a second builder overlapping the first, a state restored from a backup) and a build that
/// does not re-run the hours between them: every hour after the state's watermark, up to the
/// live generation's or this build's last hour, whichever is first, must have lines in this
/// build's input. (An hourly job that took only the next hour's logs published a generation
/// without the hour the state missed, and nothing said so; a build of a later hour alone
/// would also make the hours between late for good. A re-run one `--hour` at a time passes.)
/// The live generation does not record which hours it counted, so an hour without a single
/// line counts as missing: such a re-run needs `--force`.
fn behind_live(live_hour: Hour, continuity: &Continuity<'_>) -> Option<String> {
    if continuity.state >= Some(live_hour) {
        return None;
    }
    let counted = continuity.counted;
    let missing = match continuity.state {
        // An empty state over a live generation: a rebuild, which must reach its last hour.
        None => (!counted.contains(&live_hour)).then_some(live_hour),
        Some(state) => {
            let through = counted.last().map_or(state, |&h| h.min(live_hour));
            let first = state.saturating_add(1);
            let gap = (first..=through).find(|h| !counted.contains(h));
            // Nothing counted would publish the state's older data over the live generation.
            gap.or(counted.is_empty().then_some(first))
        }
    }?;
    let state =
        continuity.state.map_or("empty".to_owned(), |h| format!("up to {}", format_hour(h)));
    let hour = format_hour(missing);
    Some(format!(
        "the state ({state}) is behind the live generation (up to {}), and this build's input \
         has no line of {hour}: publishing would drop what the live generation counted; re-run \
         the hours after the state's, in order",
        format_hour(live_hour)
    ))
}

/// Phase 6: make the generation live ([`publish::publish`]), then give its directory the
/// generation's name (a rename), which makes it a kept generation and a `rollback` target. The
/// history is pruned only after the state is committed ([`prune_history`]): a build killed
/// between the publication and the commit leaves the state behind the live generation, so
/// nothing slow (pruning may delete gigabytes) lies between the two.
///
/// Named only once live: a generation that fails to publish, or whose build is killed first,
/// stays pending, which the next build deletes. Kept, it would sort after the live one and
/// become the next build's `rollback` default, a near copy of that build's data. (The live
/// files are links of their own: a live generation whose directory is lost, by a crash
/// between the two steps, keeps serving; it just cannot be rolled back to later.) So naming it
/// may fail without failing the build: the generation is live, and the state that describes it
/// must still be committed, or the next build would find its state behind the live generation.
fn publish_generation(opts: &BuildOptions, written: &mut Written) -> Result<(), BuildError> {
    publish::publish(&opts.out, written.partitioned, &written.dir).map_err(write_err(&opts.out))?;
    if let Err(e) = written.seal() {
        tracing::warn!(
            generation = %written.generation,
            error = %e,
            "the live generation could not be named (or its name made durable) in the history: \
             it serves, but may not be a rollback target"
        );
    }
    Ok(())
}

/// Points a partitioned output's stable names at its live manifest's files
/// ([`publish::relink_live`]): a publication or rollback killed between the links and the
/// manifest leaves some at another generation, with other key ranges. Best effort: the next
/// publication relinks them anyway.
fn mend_live_names(opts: &BuildOptions, partitioned: bool) {
    if partitioned
        && manifest_path(&opts.out).exists()
        && let Err(e) = publish::relink_live(&opts.out)
    {
        tracing::warn!(error = %e, "cannot mend the live partitions' stable names");
    }
}

/// Phase 8, after the commit: the history is pruned to `--keep-generations` (and to one copy of
/// the live generation, [`publish::prune`]).
fn prune_history(opts: &BuildOptions, written: &Written) {
    let history = publish::history_dir(&opts.out, written.partitioned);
    publish::prune(&history, opts.keep_generations, &written.generation);
}

/// Phase 7: the staged state replaces the old one, now that the generation it describes is
/// live. (Killed before this, the next run repeats the same hours from the old state.)
fn commit(
    staged: Option<atomic::Staged>,
    state: &OpenState,
    generation: &str,
) -> Result<(), BuildError> {
    if let (Some(staged), Some(path)) = (staged, &state.path) {
        staged.commit().map_err(|source| BuildError::StateNotSaved {
            generation: generation.to_owned(),
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    before: u64,
    kept: u64,
    dropped: u64,
    held: u64,
    blocked: u64,
}

/// The streaming merge of the old state with the new counts.
struct Merge<'a> {
    opts: &'a BuildOptions,
    decay: Decay,
    watermark: Option<Hour>,
    entries: Vec<Entry>,
    counts: Counts,
}

impl Merge<'_> {
    fn run(
        &mut self,
        mut old: Option<&mut state::Reader>,
        new: Vec<(String, KeyRecord)>,
        mut keep: impl FnMut(&str, &KeyRecord) -> Result<(), BuildError>,
    ) -> Result<(), BuildError> {
        let mut next_old = || -> Result<Option<(String, KeyRecord)>, BuildError> {
            match old.as_mut() {
                Some(r) => Ok(r.next_record()?),
                None => Ok(None),
            }
        };
        let mut a = next_old()?;
        let mut b_iter = new.into_iter();
        let mut b = b_iter.next();
        loop {
            let (key, record) = match (a.take(), b.take()) {
                (None, None) => break,
                (Some(x), None) => {
                    self.counts.before += 1;
                    a = next_old()?;
                    x
                }
                (None, Some(y)) => {
                    b = b_iter.next();
                    y
                }
                (Some(x), Some(y)) => match x.0.cmp(&y.0) {
                    std::cmp::Ordering::Less => {
                        self.counts.before += 1;
                        b = Some(y);
                        a = next_old()?;
                        x
                    }
                    std::cmp::Ordering::Greater => {
                        a = Some(x);
                        b = b_iter.next();
                        y
                    }
                    std::cmp::Ordering::Equal => {
                        self.counts.before += 1;
                        let (key, mut record) = x;
                        record.merge(&key, &y.1, self.decay);
                        a = next_old()?;
                        b = b_iter.next();
                        (key, record)
                    }
                },
            };
            self.one(key, record, &mut keep)?;
        }
        Ok(())
    }

    /// Scores one merged record at the watermark and routes it to the state and the snapshot.
    fn one(
        &mut self,
        key: String,
        record: KeyRecord,
        keep: &mut impl FnMut(&str, &KeyRecord) -> Result<(), BuildError>,
    ) -> Result<(), BuildError> {
        let Some(hour) = self.watermark else {
            return Ok(());
        };
        // The forms stay as of the hour each was last searched in, in the state too: moving
        // them to the watermark would round each one apart from the sum `score_at` takes, and
        // a later build with nothing new would score the key an ulp away from this one (and
        // publish a generation that differs from the live one by rounding alone).
        let score = record.score_at(hour, self.decay);
        // `--min-score 0` keeps everything (issue 2's contract), a key whose score underflowed
        // to 0 (about 1,075 half-lives after its last search) too. A record with no form has
        // no search at all (and its empty sum is -0, which no snapshot takes).
        if score < self.opts.min_score || record.surfaces.is_empty() {
            self.counts.dropped += 1;
            return Ok(());
        }
        keep(&key, &record)?;
        self.counts.kept += 1;
        if record.users.count() < self.opts.min_users {
            self.counts.held += 1;
        } else if self.opts.blocklist.blocks(&key) {
            self.counts.blocked += 1;
        } else {
            let display = record.display(&key, hour, self.decay);
            let display = (display != key).then(|| display.to_owned());
            self.entries.push(Entry { key, display, score });
        }
        Ok(())
    }
}

/// One partition's snapshot, made and not yet written ([`write_partitions`]).
struct Made {
    index: usize,
    start: String,
    end: Option<String>,
    bytes: Vec<u8>,
    stats: WriteStats,
}

/// Writes one snapshot per range and then the manifest (each atomically), so that a reader of
/// the manifest always finds the files it names.
fn write_partitions(
    dir: &Path,
    entries: &[Entry],
    info: &BuildInfo,
    how: Partitioning,
) -> Result<(WriteStats, Manifest), BuildError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| BuildError::Write { path: dir.to_owned(), source })?;
    let boundary = |at: usize| partition::separator(&entries[at - 1].key, &entries[at].key);
    // One partition's snapshot, in memory: `fill` may find it over the cap and make it again.
    let make = |index: usize, range: Range<usize>| {
        let start = if index == 0 { String::new() } else { boundary(range.start) };
        let end = (range.end < entries.len()).then(|| boundary(range.end));
        let part_info =
            BuildInfo { range_start: start.clone(), range_end: end.clone(), ..info.clone() };
        let (bytes, stats) = snapshot::write(&entries[range], &part_info)?;
        Ok::<_, BuildError>((stats.bytes, Made { index, start, end, bytes, stats }))
    };
    let mut partitions = Vec::new();
    let mut total: Option<WriteStats> = None;
    let keep = |made: Made| {
        let Made { index, start, end, bytes, stats } = made;
        let file = ManifestPartition::file_name(index, &stats.id);
        let path = dir.join(&file);
        atomic::write(&path, &bytes).map_err(|source| BuildError::Write { path, source })?;
        partitions.push(ManifestPartition {
            index,
            start,
            end,
            file,
            bytes: stats.bytes,
            checksum: stats.id.clone(),
            keys: stats.meta.keys,
        });
        total = Some(match total.take() {
            None => stats,
            Some(mut t) => {
                t.bytes += stats.bytes;
                t.meta.keys += stats.meta.keys;
                t.meta.trie_nodes += stats.meta.trie_nodes;
                t.meta.list_nodes += stats.meta.list_nodes;
                for (sum, (_, b)) in t.sections.iter_mut().zip(&stats.sections) {
                    sum.1 += b;
                }
                t
            }
        });
        Ok(())
    };
    match how {
        Partitioning::Count(n) => {
            let mut keep = keep;
            for (index, range) in partition::split(entries, n)?.into_iter().enumerate() {
                keep(make(index, range)?.1)?;
            }
        }
        Partitioning::MaxBytes(max) => partition::fill(entries, max, make, keep)?,
    }
    let mut hasher = crc32fast::Hasher::new();
    for p in &partitions {
        hasher.update(p.checksum.as_bytes());
        hasher.update(p.start.as_bytes());
    }
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        generation: format!("{:08x}", hasher.finalize()),
        created_unix: info.build_time_unix,
        watermark_hour: info.watermark_hour,
        partitions,
        rules: info.rules,
    };
    let json = manifest.to_json().map_err(BuildError::Manifest)?;
    let path = manifest_path(dir);
    atomic::write(&path, &json).map_err(|source| BuildError::Write { path, source })?;
    let mut total = total.expect("`split` and `fill` make at least one partition");
    total.meta.range_end = None;
    Ok((total, manifest))
}
