//! The shared counters of one stage, and the gauges stages set on them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The shared counters of one stage.
#[derive(Debug)]
pub(crate) struct StageCounters {
    pub(super) name: &'static str,
    pub(super) nested: bool,
    /// The scope it sits in: 0 at the top level, else one more than the registry position
    /// of the stage that builds the datasets it belongs to (its *owner*).
    pub(super) scope: u64,
    /// Plumbing the user did not write (a file dataset's list of names and its interleave):
    /// the report merges it into the user's stage.
    pub(super) hidden: bool,
    pub(super) depth: u64,
    /// Position in the registry; `consumer` is the position of the stage that built it.
    pub(super) index: usize,
    pub(super) consumer: Option<usize>,
    pub(crate) elements: AtomicU64,
    pub(crate) errors: AtomicU64,
    /// Error elements it skipped within its error budget (`ignore_errors_within`).
    pub(crate) skipped: AtomicU64,
    pub(crate) busy_nanos: AtomicU64,
    pub(crate) wait_nanos: AtomicU64,
    pub(super) worker_nanos: AtomicU64,
    pub(super) parallelism: AtomicU64,
    /// Its nested datasets are polled in tasks of their own.
    pub(super) nested_detached: AtomicBool,
    /// How many of its nested datasets run at once (readers, counting those opened ahead):
    /// their busy and wait times add up over these copies.
    pub(super) copies: AtomicU64,
    /// Its inputs run in a task of its own as well as inside its poll (prefetch): their busy
    /// time is not bounded by its own.
    pub(super) inputs_shared: AtomicBool,
    /// Bytes of the elements it yielded, for stages that know them (file readers).
    pub(super) bytes: AtomicU64,
    /// Elements it holds now (shuffle buffer, prefetch channel, in-flight calls).
    pub(super) buffered: AtomicU64,
    /// Sum and count of `buffered` as sampled by the tuner's ticks: the average fill.
    pub(super) buffered_sum: AtomicU64,
    pub(super) buffered_samples: AtomicU64,
    /// How many elements its buffer may hold now (prefetch), 0 if not a buffer stage.
    pub(super) buffer_limit: AtomicU64,
    /// Times its producer found the buffer full and had to wait (prefetch), and for how long.
    pub(super) full_events: AtomicU64,
    pub(super) blocked_nanos: AtomicU64,
    /// Whether `parallelism` or `buffer_limit` is chosen by the autotuner.
    pub(super) autotuned: AtomicBool,
    /// Its counts are its input's (a synchronous map), less the errors it made itself
    /// (counted in `errors`).
    pub(super) by_input: AtomicBool,
    /// The name the user gave the stage ([`Dataset::named`](crate::Dataset::named)).
    pub(super) label: std::sync::OnceLock<String>,
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

    /// The stage polls its nested datasets in tasks of their own (parallel_interleave),
    /// `copies` of them at once.
    pub(crate) fn set_nested_detached(&self, copies: usize) {
        self.nested_detached.store(true, Ordering::Relaxed);
        self.copies.store(copies as u64, Ordering::Relaxed);
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

    /// An error element the stage skipped (`ignore_errors_within`).
    pub(crate) fn add_skipped(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    /// The name the user gave the stage, if any.
    pub(crate) fn label(&self) -> Option<String> {
        self.label.get().cloned()
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

    /// The scope of the datasets this stage builds inside itself (interleave's inner
    /// datasets): derived from its place in the registry, so every inner dataset it builds,
    /// for any element of any epoch, counts in the same rows.
    pub(crate) fn inner_scope(&self) -> u64 {
        self.index as u64 + 1
    }
}
