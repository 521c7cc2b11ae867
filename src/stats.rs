//! Per-stage statistics and the report.
//!
//! Every stage of an epoch is wrapped, at the one place stages are built
//! (`Dataset::stage`), in [`Counted`], which records:
//! - elements and errors yielded (local counters flushed to shared atomics every
//!   [`FLUSH_EVERY`] elements and at the end: an increment and a branch per element);
//! - *wait*: how long the stage's consumer waited on it (the clock is read only when the
//!   stage turns from pending to ready, never per element);
//! - *busy*: time spent in its `poll_next`, measured on every one of its first
//!   [`TIME_ALL_FIRST`] polls and then on one in [`SAMPLE_EVERY`], scaled, including the
//!   stages it polls inline (the report subtracts those).
//!
//! Stages add their own gauges through [`Ctx`](crate::dataset): `map_parallel` reports its
//! workers and their busy time, `prefetch` and `parallel_interleave` say which inputs run in
//! tasks of their own. [`Epoch::stats`](crate::Epoch::stats) hands out a [`Stats`] handle that
//! can be read while the epoch runs and after it ends; its `Display` is the report, ending with
//! the bottleneck and why.

use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::stream::Stream;

use crate::checkpoint::{Prov, Resumable, State};

const FLUSH_EVERY: u64 = 64;
/// A stage's first polls are all timed (so slow stages with few polls are measured well);
/// after that, one poll in [`SAMPLE_EVERY`].
const TIME_ALL_FIRST: u32 = 1024;
/// One poll in this many, on average, is timed once a stage has been polled
/// [`TIME_ALL_FIRST`] times.
const SAMPLE_EVERY: u32 = 256;

/// Where a stage sits: `(scope, key)`. Top-level stages are keyed by their unique stage id;
/// stages of datasets built inside another stage (interleave's inner datasets, made afresh for
/// every input element) by their name and depth within that stage, so their counts add up
/// instead of growing the registry.
pub(crate) type StageKey = (u64, u64, &'static str);

/// The shared counters of one stage.
#[derive(Debug)]
pub(crate) struct StageCounters {
    name: &'static str,
    nested: bool,
    depth: u64,
    /// Position in the registry; `consumer` is the position of the stage that built it.
    index: usize,
    consumer: Option<usize>,
    elements: AtomicU64,
    errors: AtomicU64,
    busy_nanos: AtomicU64,
    wait_nanos: AtomicU64,
    worker_nanos: AtomicU64,
    parallelism: AtomicU64,
    /// Its nested datasets are polled in tasks of their own.
    nested_detached: AtomicBool,
    /// Its inputs run in a task of its own as well as inside its poll (prefetch): their busy
    /// time is not bounded by its own.
    inputs_shared: AtomicBool,
    /// Bytes of the elements it yielded, for stages that know them (file readers).
    bytes: AtomicU64,
    /// Elements it holds now (shuffle buffer, prefetch channel, in-flight calls).
    buffered: AtomicU64,
    /// Sum and count of `buffered` as sampled by the tuner's ticks: the average fill.
    buffered_sum: AtomicU64,
    buffered_samples: AtomicU64,
    /// How many elements its buffer may hold now (prefetch), 0 if not a buffer stage.
    buffer_limit: AtomicU64,
    /// Times its producer found the buffer full and had to wait (prefetch), and for how long.
    full_events: AtomicU64,
    blocked_nanos: AtomicU64,
    /// Whether `parallelism` or `buffer_limit` is chosen by the autotuner.
    autotuned: AtomicBool,
    /// Its counts are its input's (a synchronous map), less the errors it made itself
    /// (counted in `errors`).
    by_input: AtomicBool,
    /// The name the user gave the stage ([`Dataset::named`](crate::Dataset::named)).
    label: std::sync::OnceLock<String>,
}

impl StageCounters {
    /// Records work done by this stage's workers (e.g. `map_parallel`'s calls).
    pub(crate) fn add_worker_time(&self, took: Duration) {
        self.worker_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// How many workers or readers the stage runs.
    pub(crate) fn set_parallelism(&self, n: usize) {
        self.parallelism.store(n as u64, Ordering::Relaxed);
    }

    /// The stage polls its nested datasets in tasks of their own (parallel_interleave).
    pub(crate) fn set_nested_detached(&self) {
        self.nested_detached.store(true, Ordering::Relaxed);
    }

    /// The stage's inputs run in a task of its own as well as inside its poll (prefetch).
    pub(crate) fn set_inputs_shared(&self) {
        self.inputs_shared.store(true, Ordering::Relaxed);
    }

    /// Adds the bytes of elements the stage yielded (readers flush this in batches).
    pub(crate) fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// How many elements the stage holds now.
    pub(crate) fn set_buffered(&self, n: usize) {
        self.buffered.store(n as u64, Ordering::Relaxed);
    }

    /// The stage now holds `n` more elements.
    pub(crate) fn add_buffered(&self, n: usize) {
        self.buffered.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Its consumer waited `d` more for an element (prefetch, while the consumer runs the
    /// upstream itself inside the stage's poll).
    pub(crate) fn add_wait(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.wait_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The stage now holds `n` fewer elements.
    pub(crate) fn sub_buffered(&self, n: usize) {
        self.buffered.fetch_sub(n as u64, Ordering::Relaxed);
    }

    /// How many elements the stage's buffer may hold now.
    pub(crate) fn set_buffer_limit(&self, n: usize) {
        self.buffer_limit.store(n as u64, Ordering::Relaxed);
    }

    /// The stage's producer found its buffer full, and waited `took` for room.
    pub(crate) fn add_full_wait(&self, took: Duration) {
        self.full_events.fetch_add(1, Ordering::Relaxed);
        self.blocked_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The stage's parallelism or buffer size is chosen by the autotuner.
    pub(crate) fn set_autotuned(&self) {
        self.autotuned.store(true, Ordering::Relaxed);
    }

    /// The stage's counts are its input's, less the errors it makes (see [`add_own_error`]).
    ///
    /// [`add_own_error`]: StageCounters::add_own_error
    pub(crate) fn set_counted_by_input(&self) {
        self.by_input.store(true, Ordering::Relaxed);
    }

    /// An error the stage made itself (for stages counted by input).
    pub(crate) fn add_own_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Elements the stage yielded, counted by the stage itself (flushed in batches).
    pub(crate) fn add_elements(&self, n: u64) {
        self.elements.fetch_add(n, Ordering::Relaxed);
    }

    /// Records one sample of the buffer fill, for its average.
    pub(crate) fn sample_buffered(&self) {
        let now = self.buffered.load(Ordering::Relaxed);
        self.buffered_sum.fetch_add(now, Ordering::Relaxed);
        self.buffered_samples.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }
}

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
    /// Time spent in the stage's own work on the task that polls it (its inline inputs'
    /// time subtracted; estimated from sampled polls).
    pub busy: Duration,
    /// How long the stage's consumer waited on it.
    pub wait: Duration,
    /// Time the stage's workers spent in user code (`map_parallel`).
    pub worker_busy: Duration,
    /// Workers or readers the stage runs (0: it runs on its consumer's task); for an
    /// autotuned stage, the value the tuner chose last.
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

impl Stats {
    pub(crate) fn counters(
        &self,
        key: StageKey,
        name: &'static str,
        depth: u64,
        consumer: Option<&StageCounters>,
    ) -> Arc<StageCounters> {
        let mut guard = self
            .registry
            .stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Stages { list, index } = &mut *guard;
        if let Some(&i) = index.get(&key) {
            return Arc::clone(&list[i]);
        }
        let counters = Arc::new(StageCounters {
            name,
            nested: key.0 != 0,
            depth,
            index: list.len(),
            consumer: consumer.map(|c| c.index),
            elements: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            busy_nanos: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
            worker_nanos: AtomicU64::new(0),
            parallelism: AtomicU64::new(0),
            nested_detached: AtomicBool::new(false),
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
            label: std::sync::OnceLock::new(),
        });
        index.insert(key, list.len());
        list.push(Arc::clone(&counters));
        counters
    }

    /// How many stages are registered so far.
    pub(crate) fn registered(&self) -> usize {
        self.registry
            .stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .list
            .len()
    }

    /// Names the stage registered `index`-th (the first time only).
    pub(crate) fn label(&self, index: usize, label: &str) {
        let guard = self
            .registry
            .stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(stage) = guard.list.get(index) {
            let _ = stage.label.set(label.to_string());
        }
    }

    /// Every stage's statistics now, in the order the stages were built (consumers before
    /// their inputs).
    pub fn snapshot(&self) -> Vec<StageSnapshot> {
        let list: Vec<Arc<StageCounters>> = self
            .registry
            .stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .list
            .clone();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // Inclusive busy time, minus that of the inputs polled inside the stage's poll.
        // Sampled polls of nanosecond stages come out slow (the sampled poll is the cold one),
        // so an estimate may exceed what holds by construction: a stage polled inside its
        // consumer's poll was busy no longer than its consumer, and a stage at the top of a
        // task (or of the epoch) no longer than the epoch has run. Consumers are registered
        // before their inputs, so one pass in order applies both bounds.
        let wall = self.registry.started.elapsed().as_nanos() as u64;
        let mut inclusive: Vec<u64> = list.iter().map(|c| load(&c.busy_nanos)).collect();
        // An input is polled inside its consumer's poll unless it belongs to the datasets a
        // parallel interleave drives in tasks of their own (prefetch's inputs count as inline:
        // its consumer polls them itself when overlap does not pay).
        let inline: Vec<bool> = list
            .iter()
            .map(|c| {
                c.consumer
                    .and_then(|i| list.get(i))
                    .is_some_and(|consumer| {
                        !(c.nested
                            && !consumer.nested
                            && consumer.nested_detached.load(Ordering::Relaxed))
                    })
            })
            .collect();
        for (i, c) in list.iter().enumerate() {
            let shared = c
                .consumer
                .and_then(|k| list.get(k))
                .is_some_and(|consumer| consumer.inputs_shared.load(Ordering::Relaxed));
            let bound = match c.consumer {
                Some(consumer) if inline[i] && !shared => inclusive[consumer],
                // Nested copies run side by side: their sum is not bounded by one wall.
                _ if c.nested => u64::MAX,
                _ => wall,
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
                .filter(|(input, _)| input.consumer == Some(i) && input.nested == c.nested)
                .fold((0, 0), |(e, r), (_, &(ie, ir))| (e + ie, r + ir));
            counts[i] = (elements.saturating_sub(own_errors), errors + own_errors);
        }
        list.iter()
            .zip(own)
            .zip(counts)
            .map(|((c, own), (elements, errors))| StageSnapshot {
                name: c.name,
                label: c.label.get().cloned(),
                depth: c.depth,
                nested: c.nested,
                consumer: c.consumer,
                elements,
                errors,
                busy: Duration::from_nanos(own),
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
            })
            .collect()
    }

    /// Time since the epoch was built.
    pub fn elapsed(&self) -> Duration {
        self.registry.started.elapsed()
    }

    /// The stage that limits throughput, and why, judged from a snapshot (needs
    /// [`Options::stats_timing`](crate::Options)).
    pub fn bottleneck(&self) -> String {
        if !self.registry.timing {
            return "unknown: set Options::stats_timing(true) to time the stages".into();
        }
        bottleneck(&self.snapshot(), self.elapsed())
    }
}

/// How many copies of `s` run at once: for the stages of datasets made inside another stage
/// (interleave's per-file readers), the readers that stage runs; else 1. Their waits add up
/// over the copies, so the report divides by this.
fn instances(s: &StageSnapshot, stages: &[StageSnapshot]) -> f64 {
    let mut at = s;
    while at.nested {
        match at.consumer.and_then(|i| stages.get(i)) {
            Some(consumer) => at = consumer,
            None => return 1.0,
        }
    }
    if std::ptr::eq(at, s) {
        1.0
    } else {
        at.parallelism.max(1) as f64
    }
}

fn percent(part: Duration, whole: Duration) -> f64 {
    if whole.is_zero() {
        0.0
    } else {
        100.0 * part.as_secs_f64() / whole.as_secs_f64()
    }
}

fn bottleneck(stages: &[StageSnapshot], wall: Duration) -> String {
    // The last stage: the one nothing consumes (the first built at the top level).
    let Some(last) = stages.iter().find(|s| s.consumer.is_none() && !s.nested) else {
        return "no stages yet".into();
    };
    let waited = percent(last.wait, wall);
    if waited < 10.0 {
        return format!(
            "the consumer: it waited on the pipeline only {waited:.0}% of the time, so the input pipeline keeps up"
        );
    }
    // All cores busy: the pipeline as a whole is CPU-bound, whatever stage is heaviest.
    let cores = crate::available_cores() as f64;
    let cpu: Duration = stages.iter().map(|s| s.busy + s.worker_busy).sum();
    let used = cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9);
    if used >= 0.85 * cores {
        let heaviest = stages
            .iter()
            .max_by_key(|s| s.busy + s.worker_busy)
            .map_or_else(|| "?".to_string(), StageSnapshot::display_name);
        return format!(
            "CPU: the stages keep {used:.1} of {cores:.0} cores busy (heaviest: {heaviest}); the consumer waited {waited:.0}% of the time. Add cores, or make the heaviest stage cheaper"
        );
    }
    let mut worst: Option<(f64, String)> = None;
    let mut consider = |score: f64, why: String| {
        if worst.as_ref().is_none_or(|(s, _)| score > *s) {
            worst = Some((score, why));
        }
    };
    for s in stages {
        let name = if s.nested {
            format!("{} (inside interleave)", s.display_name())
        } else {
            s.display_name()
        };
        if s.parallelism > 0 && !s.worker_busy.is_zero() {
            let busy = percent(s.worker_busy, wall) / s.parallelism as f64;
            if busy >= 80.0 {
                consider(
                    busy,
                    format!(
                        "{name} is busy {busy:.0}% with {p}/{p} workers: CPU-bound; add cores or simplify the function",
                        p = s.parallelism
                    ),
                );
            }
        }
        let busy = percent(s.busy, wall);
        if busy >= 50.0 && s.nested {
            let copies = instances(s, stages);
            consider(
                busy / copies,
                format!(
                    "{name} is busy {busy:.0}% of a core across its {copies:.0} readers: reading and decoding are CPU-bound; more parallel reads help only while cores are idle"
                ),
            );
        } else if busy >= 50.0 {
            consider(
                busy,
                format!(
                    "{name} is busy {busy:.0}% on the task that polls it: move its work into map_parallel"
                ),
            );
        }
        if s.nested && s.depth == 0 {
            let wait = percent(s.wait, wall) / instances(s, stages);
            if wait >= 50.0 {
                consider(
                    wait,
                    format!("{name} waits {wait:.0}% on its source (storage): raise cycle_length"),
                );
            }
        }
    }
    if let Some((_, why)) = worst {
        return why;
    }
    // Nothing saturated: name the busiest stage (its own time, or its workers' average).
    let share = |s: &StageSnapshot| {
        let own = percent(s.busy, wall);
        let workers = percent(s.worker_busy, wall) / s.parallelism.max(1) as f64;
        own.max(workers)
    };
    match stages.iter().max_by(|a, b| share(a).total_cmp(&share(b))) {
        Some(s) => format!(
            "no stage is saturated (the consumer waited {waited:.0}% of the time); the busiest is {} at {:.0}%: \
             stages wait on each other or on CPU taken by other work; try prefetch or more parallelism",
            s.display_name(),
            share(s)
        ),
        None => "no stages yet".into(),
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wall = self.elapsed();
        let stages = self.snapshot();
        writeln!(
            f,
            "{:<32} {:>12} {:>12} {:>9} {:>7} {:>7} {:>8} {:>14} {:>15} {:>6}",
            "stage (upstream first)",
            "elements",
            "per second",
            "MB/s",
            "busy%",
            "wait%",
            "blocked%",
            "workers",
            "buffer now/avg",
            "errors"
        )?;
        let secs = wall.as_secs_f64().max(1e-9);
        for s in stages.iter().rev() {
            let name = s.display_name();
            let name = if s.nested {
                format!("  inner {name}")
            } else {
                name
            };
            let auto = if s.autotuned { " auto" } else { "" };
            let workers = if s.parallelism == 0 {
                "-".to_string()
            } else if s.worker_busy.is_zero() {
                format!("{}{auto}", s.parallelism)
            } else {
                format!(
                    "{}@{:.0}%{auto}",
                    s.parallelism,
                    percent(s.worker_busy, wall) / s.parallelism as f64
                )
            };
            let buffer = match (s.buffer_limit, s.buffered, s.buffered_avg) {
                (0, 0, 0.0) => "-".to_string(),
                (0, now, avg) => format!("{now}/{avg:.0}"),
                (limit, now, avg) => format!("{now}/{avg:.0} of {limit}{auto}"),
            };
            let mb = if s.bytes == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", s.bytes as f64 / 1e6 / secs)
            };
            writeln!(
                f,
                "{:<32} {:>12} {:>12.0} {:>9} {:>7.1} {:>7.1} {:>8.1} {:>14} {:>15} {:>6}",
                name,
                s.elements,
                s.elements as f64 / secs,
                mb,
                percent(s.busy, wall),
                percent(s.wait, wall) / instances(s, &stages),
                percent(s.blocked, wall) / s.parallelism.max(1) as f64,
                workers,
                buffer,
                s.errors
            )?;
        }
        let budget = self.registry.budget;
        let over = if self.peak_buffered_bytes() > budget.ram {
            " (over it: buffers of a fixed size are kept as given; make them smaller)"
        } else {
            ""
        };
        writeln!(
            f,
            "buffers: ~{:.1} MB held now, {:.1} MB at most, of a {:.0} MB budget{over}; autotuned stages may use {} cores",
            self.buffered_bytes() as f64 / 1e6,
            self.peak_buffered_bytes() as f64 / 1e6,
            budget.ram as f64 / 1e6,
            budget.cpu
        )?;
        writeln!(f, "bottleneck: {}", self.bottleneck())
    }
}

/// Counts what a stage's stream yields (an increment and a branch per element) and, with
/// `WAIT` (the stages the autotuner watches: buffers and autotuned stages), how long its
/// consumer waited on it (the clock is read when a wait starts and when it ends, never on a
/// poll that finds an element ready). Without stage timing, other stages count only: on
/// pipelines of nanosecond elements every instruction per element shows.
#[pin_project::pin_project(PinnedDrop)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Counted<S, const WAIT: bool> {
    #[pin]
    inner: S,
    counters: Arc<StageCounters>,
    unflushed: u64,
    /// Whether the consumer is waiting (the stream answered `Pending`), since when: the clock
    /// is read only when a wait starts and ends.
    waiting: bool,
    pending_since: Instant,
}

impl<S, const WAIT: bool> Counted<S, WAIT> {
    pub(crate) fn new(inner: S, counters: Arc<StageCounters>) -> Self {
        Counted {
            inner,
            counters,
            unflushed: 0,
            waiting: false,
            pending_since: Instant::now(),
        }
    }
}

fn flush(counters: &StageCounters, unflushed: &mut u64) {
    if *unflushed > 0 {
        counters.elements.fetch_add(*unflushed, Ordering::Relaxed);
        *unflushed = 0;
    }
}

#[pin_project::pinned_drop]
impl<S, const WAIT: bool> PinnedDrop for Counted<S, WAIT> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        flush(this.counters, this.unflushed);
    }
}

impl<S, T, const WAIT: bool> Stream for Counted<S, WAIT>
where
    S: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let poll = this.inner.poll_next(cx);
        if WAIT {
            match (&poll, *this.waiting) {
                (Poll::Pending, false) => start_wait(this.waiting, this.pending_since),
                (Poll::Ready(_), true) => end_wait(this.counters, this.waiting, this.pending_since),
                _ => {}
            }
        }
        let item = std::task::ready!(poll);
        match &item {
            Some(Ok(_)) => {
                *this.unflushed += 1;
                if *this.unflushed == FLUSH_EVERY {
                    flush(this.counters, this.unflushed);
                }
            }
            Some(Err(_)) => {
                this.counters.errors.fetch_add(1, Ordering::Relaxed);
            }
            None => flush(this.counters, this.unflushed),
        }
        Poll::Ready(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

#[cold]
#[inline(never)]
fn start_wait(waiting: &mut bool, since: &mut Instant) {
    *waiting = true;
    *since = Instant::now();
}

#[cold]
#[inline(never)]
fn end_wait(counters: &StageCounters, waiting: &mut bool, since: &Instant) {
    *waiting = false;
    counters
        .wait_nanos
        .fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// What timing an empty span costs (two clock reads), in nanoseconds: the least of a few
/// tries, measured once per process.
fn clock_cost() -> u64 {
    static COST: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *COST.get_or_init(|| {
        (0..64)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(start.elapsed().as_nanos() as u64)
            })
            .min()
            .unwrap_or(0)
    })
}

/// Counts and times what a stage's stream yields (with [`Options::stats_timing`](crate::Options)).
///
/// One countdown drives everything, so the hot path is a decrement, a compare and the inner
/// poll: when it runs out, the poll is timed (weighted by the polls it stands for) and the
/// elements yielded since the last such poll are added up (the polls of the window, less those
/// that returned something other than an element, which all take the slow path).
#[pin_project::pin_project(PinnedDrop, project = TimedProj)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Timed<S> {
    #[pin]
    inner: S,
    counters: Arc<StageCounters>,
    /// Polls until the next timed one.
    left: u32,
    /// The value `left` started from: the polls the next timed one stands for.
    window: u32,
    /// Polls of this window that returned something other than an element.
    others: u32,
    /// Timed polls so far.
    timed: u32,
    /// State of the sampling intervals' generator (never 0).
    rng: u32,
    /// Elements counted but not yet added to the shared counter.
    unflushed: u64,
    pending_since: Option<Instant>,
}

impl<S> Timed<S> {
    pub(crate) fn new(inner: S, counters: Arc<StageCounters>) -> Self {
        Timed {
            inner,
            counters,
            left: 1,
            window: 1,
            others: 0,
            timed: 0,
            rng: 0x9E37_79B9,
            unflushed: 0,
            pending_since: None,
        }
    }
}

impl<S> TimedProj<'_, S> {
    /// Adds up the elements the fast path yielded in this window so far, and starts a new
    /// window of `next` polls.
    fn settle(&mut self, next: u32) {
        let polls = *self.window - *self.left;
        *self.unflushed += u64::from(polls.saturating_sub(*self.others));
        *self.others = 0;
        *self.window = next;
        *self.left = next;
        if *self.unflushed >= FLUSH_EVERY {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if *self.unflushed > 0 {
            self.counters
                .elements
                .fetch_add(*self.unflushed, Ordering::Relaxed);
            *self.unflushed = 0;
        }
    }

    /// The next window: every poll is timed at first, then one in [`SAMPLE_EVERY`] on
    /// average, at random intervals (a fixed interval would line up with periodic costs,
    /// such as refilling a chunk every 128 polls, and time only those).
    fn next_window(&mut self) -> u32 {
        *self.timed = self.timed.saturating_add(1);
        if *self.timed < TIME_ALL_FIRST {
            return 1;
        }
        // xorshift32: cheap, and good enough to break up periodicity.
        let mut x = *self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *self.rng = x;
        1 + x % (2 * SAMPLE_EVERY - 1)
    }
}

#[pin_project::pinned_drop]
impl<S> PinnedDrop for Timed<S> {
    fn drop(self: Pin<&mut Self>) {
        let mut this = self.project();
        let window = *this.window;
        this.settle(window);
        this.flush();
    }
}

impl<S, T> Stream for Timed<S>
where
    S: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        *this.left -= 1;
        if *this.left == 0 {
            return Self::poll_timed(this, cx);
        }
        let item = this.inner.as_mut().poll_next(cx);
        if let Poll::Ready(Some(Ok(_))) = &item {
            return item;
        }
        Self::poll_other(this, item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<S, T> Timed<S>
where
    S: Stream<Item = anyhow::Result<T>>,
{
    /// The poll that ends a window: timed, weighted by the window's polls.
    #[cold]
    #[inline(never)]
    fn poll_timed(
        mut this: TimedProj<'_, S>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<anyhow::Result<T>>> {
        let weight = u64::from(*this.window);
        let next = this.next_window();
        // This poll is counted below, not with the window's fast polls.
        *this.left = 1;
        this.settle(next);
        let start = Instant::now();
        let item = this.inner.as_mut().poll_next(cx);
        // Less what reading the clock itself costs, which would otherwise dominate the
        // sample of a poll that takes a few nanoseconds (and be multiplied by its weight).
        let took = (start.elapsed().as_nanos() as u64).saturating_sub(clock_cost()) * weight;
        this.counters.busy_nanos.fetch_add(took, Ordering::Relaxed);
        if let Poll::Ready(Some(Ok(_))) = &item {
            *this.unflushed += 1;
        }
        Self::observe(this, item)
    }

    /// A fast-path poll that gave something other than an element.
    #[cold]
    #[inline(never)]
    fn poll_other(
        this: TimedProj<'_, S>,
        item: Poll<Option<anyhow::Result<T>>>,
    ) -> Poll<Option<anyhow::Result<T>>> {
        *this.others += 1;
        Self::observe(this, item)
    }

    /// Waits, errors and the end, for any poll.
    fn observe(
        mut this: TimedProj<'_, S>,
        item: Poll<Option<anyhow::Result<T>>>,
    ) -> Poll<Option<anyhow::Result<T>>> {
        let Poll::Ready(item) = item else {
            if this.pending_since.is_none() {
                *this.pending_since = Some(Instant::now());
            }
            // Take the next poll out of the fast path, to see when the wait ends.
            this.settle(1);
            return Poll::Pending;
        };
        if let Some(since) = this.pending_since.take() {
            this.counters
                .wait_nanos
                .fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        match &item {
            Some(Ok(_)) => {}
            Some(Err(_)) => {
                this.counters.errors.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                let window = *this.window;
                this.settle(window);
                this.flush();
            }
        }
        Poll::Ready(item)
    }
}

impl<S: Resumable, const WAIT: bool> Resumable for Counted<S, WAIT> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        self.project().inner.save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.inner.last_prov()
    }

    fn is_small(&self) -> bool {
        self.inner.is_small()
    }

    fn resumable(&self) -> bool {
        self.inner.resumable()
    }
}

impl<S: Resumable> Resumable for Timed<S> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        self.project().inner.save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.inner.last_prov()
    }

    fn is_small(&self) -> bool {
        self.inner.is_small()
    }

    fn resumable(&self) -> bool {
        self.inner.resumable()
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
