//! Per-stage counters and the report.
//!
//! Every stage of an epoch is wrapped, at the one place stages are built
//! (`Dataset::stage`), in a counter of the elements and errors it yields. Counters are local
//! to the stream and flushed to shared atomics every [`FLUSH_EVERY`] elements and at the end,
//! so the hot path costs an increment and a branch. [`Epoch::stats`](crate::Epoch::stats)
//! hands out a [`Stats`] handle that can be read while the epoch runs and after it ends.

use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use futures::stream::Stream;

const FLUSH_EVERY: u64 = 64;

/// Where a stage sits: `(scope, key)`. Top-level stages are keyed by their unique stage id;
/// stages of datasets built inside another stage (interleave's inner datasets, made afresh for
/// every input element) by their name and depth within that stage, so their counts add up
/// instead of growing the registry.
pub(crate) type StageKey = (u64, u64, &'static str);

/// The shared counters of one stage.
#[derive(Debug)]
pub(crate) struct StageCounters {
    name: &'static str,
    scope: u64,
    depth: u64,
    elements: AtomicU64,
    errors: AtomicU64,
}

/// The stages in the order they were built, and where each key sits in that list.
#[derive(Debug, Default)]
struct Stages {
    list: Vec<Arc<StageCounters>>,
    index: HashMap<StageKey, usize>,
}

#[derive(Debug)]
struct Registry {
    started: Instant,
    stages: Mutex<Stages>,
}

/// A live view of an epoch's per-stage counters; cheap to clone.
///
/// `Display` prints the report: one row per stage, upstream first.
#[derive(Debug, Clone)]
pub struct Stats {
    registry: Arc<Registry>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            registry: Arc::new(Registry {
                started: Instant::now(),
                stages: Mutex::default(),
            }),
        }
    }
}

/// One stage's counters at the time of a [`Stats::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StageSnapshot {
    /// tf.data's name of the operation.
    pub name: &'static str,
    /// Stages upstream of this one in its (sub-)pipeline.
    pub depth: u64,
    /// Whether the stage belongs to the datasets made inside another stage (interleave, flat_map,
    /// group_by_window), summed over all of them.
    pub nested: bool,
    /// Elements the stage has yielded.
    pub elements: u64,
    /// Error elements the stage has yielded.
    pub errors: u64,
}

impl Stats {
    pub(crate) fn counters(
        &self,
        key: StageKey,
        name: &'static str,
        depth: u64,
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
            scope: key.0,
            depth,
            elements: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        });
        index.insert(key, list.len());
        list.push(Arc::clone(&counters));
        counters
    }

    /// Every stage's counters now, upstream first (the order stages were built in).
    pub fn snapshot(&self) -> Vec<StageSnapshot> {
        let guard = self
            .registry
            .stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        guard
            .list
            .iter()
            .map(|c| StageSnapshot {
                name: c.name,
                depth: c.depth,
                nested: c.scope != 0,
                elements: c.elements.load(Ordering::Relaxed),
                errors: c.errors.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Seconds since the epoch was built.
    pub fn elapsed_secs(&self) -> f64 {
        self.registry.started.elapsed().as_secs_f64()
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed_secs().max(1e-9);
        writeln!(
            f,
            "{:<28} {:>14} {:>14} {:>8}",
            "stage", "elements", "elements/s", "errors"
        )?;
        for s in self.snapshot() {
            let name = if s.nested {
                format!("  (inner) {}", s.name)
            } else {
                s.name.to_string()
            };
            writeln!(
                f,
                "{:<28} {:>14} {:>14.0} {:>8}",
                name,
                s.elements,
                s.elements as f64 / secs,
                s.errors
            )?;
        }
        Ok(())
    }
}

/// Counts what a stage's stream yields.
#[must_use = "streams do nothing unless polled"]
#[pin_project::pin_project(PinnedDrop)]
pub(crate) struct Counted<S> {
    #[pin]
    inner: S,
    counters: Arc<StageCounters>,
    unflushed: u64,
}

impl<S> Counted<S> {
    pub(crate) fn new(inner: S, counters: Arc<StageCounters>) -> Self {
        Counted {
            inner,
            counters,
            unflushed: 0,
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
impl<S> PinnedDrop for Counted<S> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        flush(this.counters, this.unflushed);
    }
}

impl<S, T> Stream for Counted<S>
where
    S: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<T>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = ready!(this.inner.poll_next(cx));
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
