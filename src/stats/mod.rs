//! Per-stage statistics and the report.
//!
//! Every stage of an epoch is wrapped, at the one place stages are built
//! (`Dataset::stage_counted`), in a counter ([`wrap`]: `Counted`, or `Timed` with stage
//! timing), which records:
//! - elements and errors yielded (local counters flushed to shared atomics every
//!   `FLUSH_EVERY` elements and at the end: an increment and a branch per element);
//! - *wait*: how long the stage's consumer waited on it (the clock is read only when the
//!   stage turns from pending to ready, never per element);
//! - *busy*: time spent in its `poll_next`, measured on every one of its first
//!   `TIME_ALL_FIRST` polls and then on one in `SAMPLE_EVERY`, scaled, including the
//!   stages it polls inline (the snapshot subtracts those).
//!
//! Stages add their own gauges through [`Ctx`](crate::dataset) on their
//! [`StageCounters`] ([`counters`]): `map_parallel` reports its workers and their busy time,
//! `from_generator` its thread's, `prefetch` and `parallel_interleave` say which inputs run
//! in tasks of their own. The registry here keeps one entry per stage: stages of the datasets
//! an interleave builds, one per input element, are keyed by their owner's place in the
//! registry, their depth and their name, so they add up in one row per inner stage however
//! many files and epochs run. [`Epoch::stats`](crate::Epoch::stats) hands out a [`Stats`]
//! handle that can be read while the epoch runs and after it ends; its snapshot shows the
//! stages as the user wrote them (a file dataset's plumbing merged into its reader), its
//! `Display` is the report ([`report`]), ending with the bottleneck ([`diagnosis`]: a table
//! of rules).

mod counters;
mod diagnosis;
mod report;
mod view;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub(crate) use counters::StageCounters;
use view::{Row, View};

/// Where a stage sits: `(scope, id or depth, name)`. Top-level stages (scope 0) are keyed by
/// their unique stage id; stages of datasets built inside another stage (interleave's inner
/// datasets, made afresh for every input element, each with stage ids of its own) by the
/// scope of that stage (one more than its registry position, see
/// [`StageCounters::inner_scope`]) and their depth and name within it, so their counts add
/// up instead of growing the registry.
pub(crate) type StageKey = (u64, u64, &'static str);

#[derive(Debug)]
struct Registry {
    started: Instant,
    /// Whether stages are timed ([`Options::stats_timing`](crate::Options)).
    timing: bool,
    stages: Mutex<Stages>,
    /// The autotuner's budgets, and its estimates of the bytes the buffers hold.
    budget: crate::runtime::Budget,
    memory: AtomicU64,
    peak_memory: AtomicU64,
}

/// The stages in the order they were built, and where each key sits in that list.
#[derive(Debug, Default)]
struct Stages {
    list: Vec<Arc<StageCounters>>,
    index: HashMap<StageKey, usize>,
}

/// A live view of an epoch's per-stage statistics; cheap to clone.
///
/// `Display` prints the report: one row per stage, upstream first, then the bottleneck.
#[derive(Debug, Clone)]
pub struct Stats {
    registry: Arc<Registry>,
    /// What the report advises to time the stages, when they were not.
    timing_advice: Option<Arc<str>>,
}

impl Stats {
    pub(crate) fn new(timing: bool, budget: crate::runtime::Budget) -> Self {
        Stats {
            registry: Arc::new(Registry {
                started: Instant::now(),
                timing,
                stages: Mutex::default(),
                budget,
                memory: AtomicU64::new(0),
                peak_memory: AtomicU64::new(0),
            }),
            timing_advice: None,
        }
    }

    /// The autotuner's latest estimate of the bytes the epoch's buffers hold.
    pub(crate) fn set_memory(&self, bytes: u64) {
        self.registry.memory.store(bytes, Ordering::Relaxed);
        self.registry
            .peak_memory
            .fetch_max(bytes, Ordering::Relaxed);
    }

    /// Bytes the epoch's buffers (shuffle, prefetch, in-flight calls) hold, as last
    /// estimated by the autotuner (every 50 ms while a pipeline with buffers runs): each
    /// buffered element costed at its stage's bytes per element, counted by the file readers
    /// and carried down the pipeline. 0 when nothing could be estimated.
    pub fn buffered_bytes(&self) -> u64 {
        self.registry.memory.load(Ordering::Relaxed)
    }

    /// The largest [`buffered_bytes`](Stats::buffered_bytes) estimate so far.
    pub fn peak_buffered_bytes(&self) -> u64 {
        self.registry.peak_memory.load(Ordering::Relaxed)
    }

    /// The memory budget the pipeline's buffers work within
    /// ([`Options::ram_budget`](crate::Options)), in bytes.
    pub fn ram_budget(&self) -> u64 {
        self.registry.budget.ram
    }

    /// The workers the autotuned stages may use together
    /// ([`Options::cpu_budget`](crate::Options)).
    pub fn cpu_budget(&self) -> usize {
        self.registry.budget.cpu
    }
}

/// One stage's statistics at the time of a [`Stats::snapshot`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StageSnapshot {
    /// tf.data's name of the operation.
    pub name: &'static str,
    /// The name the user gave the stage with [`Dataset::named`](crate::Dataset::named).
    pub label: Option<String>,
    /// Stages upstream of this one in its (sub-)pipeline.
    pub depth: u64,
    /// Whether the stage belongs to the datasets made inside another stage (interleave,
    /// flat_map, group_by_window), summed over all of them.
    pub nested: bool,
    /// Position (in the snapshot) of the stage that consumes this one, if any.
    pub consumer: Option<usize>,
    /// Elements the stage has yielded.
    pub elements: u64,
    /// Error elements the stage has yielded.
    pub errors: u64,
    /// Error elements the stage skipped within its error budget
    /// ([`ignore_errors_within`](crate::Dataset::ignore_errors_within)), each reported to its
    /// quarantine.
    pub skipped: u64,
    /// Time spent in the stage's own work on the task that polls it (its inline inputs'
    /// time subtracted; estimated from sampled polls). For an inner stage, summed over the
    /// copies that run at once (a parallel interleave's readers).
    pub busy: Duration,
    /// How long the stage's consumer waited on it (for a file reader, how long its readers
    /// waited on storage); for an inner stage, summed over its copies.
    pub wait: Duration,
    /// Time the stage's workers spent in user code (`map_parallel`; `from_generator`'s
    /// thread, less its waits for room in its channel).
    pub worker_busy: Duration,
    /// Workers or readers the stage runs as configured (0: it runs on its consumer's task);
    /// for an autotuned stage, the value the tuner chose last.
    pub parallelism: u64,
    /// Bytes of the elements yielded, where the stage knows them (file readers); 0 otherwise.
    pub bytes: u64,
    /// Elements the stage holds now (shuffle buffer, prefetch channel, in-flight calls).
    pub buffered: u64,
    /// Average of `buffered` over the tuner's samples (every 50 ms while the epoch runs).
    pub buffered_avg: f64,
    /// The most elements the stage's buffer may hold now (prefetch; 0 if not a buffer).
    pub buffer_limit: u64,
    /// Times the stage's producer found its buffer full.
    pub full_events: u64,
    /// How long the stage's output waited on its consumer: its producer, with the buffer
    /// full, waiting for room (prefetch).
    pub blocked: Duration,
    /// Whether `parallelism` or `buffer_limit` is chosen by the autotuner.
    pub autotuned: bool,
}

impl StageSnapshot {
    /// The operation's name, with the user's name for the stage after it:
    /// `map_parallel (decode)`.
    pub fn display_name(&self) -> String {
        match &self.label {
            Some(label) => format!("{} ({label})", self.name),
            None => self.name.to_string(),
        }
    }
}

/// Where a stage is registered, and how it is shown.
pub(crate) struct Registration<'a> {
    pub(crate) key: StageKey,
    pub(crate) name: &'static str,
    pub(crate) depth: u64,
    /// The stage that builds it (its consumer, or the owner of its scope).
    pub(crate) consumer: Option<&'a StageCounters>,
    /// Plumbing the user did not write, merged into the user's stage in the report.
    pub(crate) hidden: bool,
    /// The user's name for it ([`Dataset::named`](crate::Dataset::named)).
    pub(crate) label: Option<&'a str>,
}

impl Stats {
    /// The counters of the stage `at` names, registered on first use: stages of datasets
    /// built inside another stage (interleave's inner datasets) share one entry per
    /// (scope, depth, name) however many of them are built.
    pub(crate) fn counters(&self, at: Registration<'_>) -> Arc<StageCounters> {
        let mut guard = self
            .registry
            .stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Stages { list, index } = &mut *guard;
        if let Some(&i) = index.get(&at.key) {
            return Arc::clone(&list[i]);
        }
        let label = std::sync::OnceLock::new();
        if let Some(name) = at.label {
            let _ = label.set(name.to_string());
        }
        let counters = Arc::new(StageCounters {
            name: at.name,
            nested: at.key.0 != 0,
            scope: at.key.0,
            hidden: at.hidden,
            depth: at.depth,
            index: list.len(),
            consumer: at.consumer.map(|c| c.index),
            elements: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            busy_nanos: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
            worker_nanos: AtomicU64::new(0),
            parallelism: AtomicU64::new(0),
            nested_detached: AtomicBool::new(false),
            copies: AtomicU64::new(1),
            inputs_shared: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            buffered: AtomicU64::new(0),
            buffered_sum: AtomicU64::new(0),
            buffered_samples: AtomicU64::new(0),
            buffer_limit: AtomicU64::new(0),
            full_events: AtomicU64::new(0),
            blocked_nanos: AtomicU64::new(0),
            autotuned: AtomicBool::new(false),
            by_input: AtomicBool::new(false),
            label,
        });
        index.insert(at.key, list.len());
        list.push(Arc::clone(&counters));
        counters
    }

    /// Every stage's statistics now, one per stage of the pipeline as the user wrote it, in
    /// the order the stages were built (consumers before their inputs). The plumbing of file
    /// datasets (the list of file names, the interleave over them) is merged into their
    /// reader's stage, which takes the interleave's parallelism; the inner datasets an
    /// interleave builds, one per input element, add up in one row per inner stage.
    pub fn snapshot(&self) -> Vec<StageSnapshot> {
        self.view().rows.into_iter().map(|r| r.snap).collect()
    }

    /// Every registered stage's statistics, in registry order (positions are
    /// [`StageCounters::index`]): what the autotuner reads.
    pub(crate) fn raw_snapshot(&self) -> Vec<StageSnapshot> {
        self.measure().0.into_iter().map(|r| r.snap).collect()
    }

    /// Every registered stage's figures, in registry order, the share of the time the
    /// consumer spent inside the pipeline, and each stage's (hidden, scope).
    fn measure(&self) -> (Vec<Row>, f64, Vec<(bool, u64)>) {
        let list: Vec<Arc<StageCounters>> = self
            .registry
            .stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .list
            .clone();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let wall = self.registry.started.elapsed().as_nanos() as u64;
        // The stage whose scope a nested stage sits in (its owner), and whether it is the
        // top of its inner dataset (polled by the owner itself).
        let owner = |c: &StageCounters| (c.scope > 0).then(|| c.scope as usize - 1);
        let is_top_of_scope = |c: &StageCounters| owner(c).is_some() && c.consumer == owner(c);
        // An input is polled inside its consumer's poll unless it is the top of an inner
        // dataset that a parallel interleave drives in a task of its own (prefetch's inputs
        // count as inline: its consumer polls them itself when overlap does not pay).
        let inline: Vec<bool> = list
            .iter()
            .map(|c| {
                c.consumer
                    .and_then(|i| list.get(i))
                    .is_some_and(|consumer| {
                        !(is_top_of_scope(c) && consumer.nested_detached.load(Ordering::Relaxed))
                    })
            })
            .collect();
        // Copies at once: those of its owner, times the owner's readers when they run in
        // tasks of their own. Owners are registered before what they build.
        let mut copies = vec![1u64; list.len()];
        for (i, c) in list.iter().enumerate() {
            if let Some(o) = owner(c).filter(|&o| o < i) {
                let readers = if list[o].nested_detached.load(Ordering::Relaxed) {
                    load(&list[o].copies).max(1)
                } else {
                    1
                };
                copies[i] = copies[o].saturating_mul(readers);
            }
        }
        // Inclusive busy time, minus that of the inputs polled inside the stage's poll.
        // Sampled polls of nanosecond stages come out slow (the sampled poll is the cold one),
        // so an estimate may exceed what holds by construction: a stage polled inside its
        // consumer's poll was busy no longer than its consumer, and a stage at the top of a
        // task (or of the epoch) no longer than the epoch has run, times its copies. Consumers
        // are registered before their inputs, so one pass in order applies both bounds.
        let mut inclusive: Vec<u64> = list.iter().map(|c| load(&c.busy_nanos)).collect();
        for (i, c) in list.iter().enumerate() {
            let shared = c
                .consumer
                .and_then(|k| list.get(k))
                .is_some_and(|consumer| consumer.inputs_shared.load(Ordering::Relaxed));
            let bound = match c.consumer {
                Some(consumer) if inline[i] && !shared && consumer < i => inclusive[consumer],
                _ => wall.saturating_mul(copies[i]),
            };
            inclusive[i] = inclusive[i].min(bound);
        }
        let mut own = inclusive.clone();
        for (i, c) in list.iter().enumerate() {
            if let (Some(consumer), true) = (c.consumer, inline[i]) {
                own[consumer] = own[consumer].saturating_sub(inclusive[i]);
            }
        }
        // Stages counted by their input: the input's counts, adjusted by their own errors.
        // Inputs are registered after their consumers, so walking backwards meets them first.
        let mut counts: Vec<(u64, u64)> = list
            .iter()
            .map(|c| (load(&c.elements), load(&c.errors)))
            .collect();
        for (i, c) in list.iter().enumerate().rev() {
            if !c.by_input.load(Ordering::Relaxed) {
                continue;
            }
            let own_errors = counts[i].1;
            let (elements, errors) = list
                .iter()
                .zip(&counts)
                .filter(|(input, _)| input.consumer == Some(i) && input.scope == c.scope)
                .fold((0, 0), |(e, r), (_, &(ie, ir))| (e + ie, r + ir));
            counts[i] = (elements.saturating_sub(own_errors), errors + own_errors);
        }
        // The consumer's time in the pipeline: the last stage's poll, inline work included,
        // and its waits on it.
        let in_pipeline = list
            .iter()
            .position(|c| c.consumer.is_none() && c.scope == 0)
            .map_or(0.0, |last| {
                let inside = inclusive[last].saturating_add(load(&list[last].wait_nanos));
                (inside as f64 / wall.max(1) as f64).min(1.0)
            });
        let rows = list
            .iter()
            .enumerate()
            .map(|(i, c)| Row {
                snap: StageSnapshot {
                    name: c.name,
                    label: c.label.get().cloned(),
                    depth: c.depth,
                    nested: c.nested,
                    consumer: c.consumer,
                    elements: counts[i].0,
                    errors: counts[i].1,
                    skipped: load(&c.skipped),
                    busy: Duration::from_nanos(own[i]),
                    wait: Duration::from_nanos(load(&c.wait_nanos)),
                    worker_busy: Duration::from_nanos(load(&c.worker_nanos)),
                    parallelism: load(&c.parallelism),
                    bytes: load(&c.bytes),
                    buffered: load(&c.buffered),
                    buffered_avg: match load(&c.buffered_samples) {
                        0 => load(&c.buffered) as f64,
                        n => load(&c.buffered_sum) as f64 / n as f64,
                    },
                    buffer_limit: load(&c.buffer_limit),
                    full_events: load(&c.full_events),
                    blocked: Duration::from_nanos(load(&c.blocked_nanos)),
                    autotuned: c.autotuned.load(Ordering::Relaxed),
                },
                copies: copies[i],
            })
            .collect();
        let flags = list.iter().map(|c| (c.hidden, c.scope)).collect();
        (rows, in_pipeline, flags)
    }

    /// Time since the epoch was built.
    pub fn elapsed(&self) -> Duration {
        self.registry.started.elapsed()
    }

    /// The stage that limits throughput, and why, judged from a snapshot (needs
    /// [`Options::stats_timing`](crate::Options)).
    pub fn bottleneck(&self) -> String {
        if !self.registry.timing {
            return format!("unknown: {} to time the stages", self.timing_advice());
        }
        diagnosis::diagnose(&self.view()).to_string()
    }

    /// What the report tells the user to do to time the stages.
    fn timing_advice(&self) -> &str {
        self.timing_advice
            .as_deref()
            .unwrap_or("set Options::stats_timing(true)")
    }

    /// This handle with another piece of advice for turning stage timing on, in the report
    /// of an epoch that was not timed (by default "set Options::stats_timing(true)"): for a
    /// program that sets the option from its own flags, name the flag.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let mut epoch = Dataset::range(0, 3).iter();
    /// while let Some(x) = epoch.next().await { x?; }
    /// let report = epoch.stats().with_timing_advice("run with --timing").to_string();
    /// assert!(report.contains("bottleneck: unknown: run with --timing to time the stages"));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn with_timing_advice(mut self, advice: &str) -> Stats {
        self.timing_advice = Some(advice.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use crate::Dataset;

    /// Counts stay exact through timed polls, pending polls and errors, for any length.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_are_exact() {
        let lengths = [
            0i64, 1, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 5000, 100_000,
        ];
        for (n, timing) in lengths.into_iter().flat_map(|n| [(n, false), (n, true)]) {
            let ds = Dataset::range(0, n)
                .try_map(|x| {
                    if x % 97 == 5 {
                        anyhow::bail!("bad {x}")
                    } else {
                        Ok(x)
                    }
                })
                .prefetch(3)
                .filter(|x| x % 2 == 0)
                .with_options(crate::Options::new().stats_timing(timing));
            let mut epoch = ds.iter();
            let (mut ok, mut errors) = (0u64, 0u64);
            while let Some(item) = epoch.next().await {
                if item.is_ok() { ok += 1 } else { errors += 1 }
            }
            let stages = epoch.stats().snapshot();
            let get = |name| {
                stages
                    .iter()
                    .find(|s| s.name == name)
                    .map(|s| (s.elements, s.errors))
            };
            let bad = (0..n).filter(|x| x % 97 == 5).count() as u64;
            assert_eq!(get("range"), Some((n as u64, 0)), "n = {n}");
            assert_eq!(get("map"), Some((n as u64 - bad, bad)), "n = {n}");
            assert_eq!(get("prefetch"), Some((n as u64 - bad, bad)), "n = {n}");
            assert_eq!(get("filter"), Some((ok, errors)), "n = {n}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn report_names_a_cpu_bound_map_parallel() {
        let spin = |x: i64| {
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_micros(300) {}
            Ok(x)
        };
        let mut epoch = Dataset::range(0, 2_000)
            .try_map_parallel(crate::available_cores(), spin)
            .with_options(crate::Options::new().stats_timing(true))
            .iter();
        while let Some(item) = epoch.next().await {
            item.ok();
        }
        let report = epoch.stats().to_string();
        let bottleneck = report
            .lines()
            .find(|l| l.starts_with("bottleneck: "))
            .unwrap_or_default();
        assert!(bottleneck.contains("map_parallel"), "{report}");
    }
}
