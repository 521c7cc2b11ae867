//! The stream wrappers that count (and, with timing, time) what each stage yields.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;

use crate::stats::StageCounters;

const FLUSH_EVERY: u64 = 64;
/// A stage's first polls are all timed (so slow stages with few polls are measured well);
/// after that, one poll in [`SAMPLE_EVERY`].
const TIME_ALL_FIRST: u32 = 1024;
/// One poll in this many, on average, is timed once a stage has been polled
/// [`TIME_ALL_FIRST`] times.
const SAMPLE_EVERY: u32 = 256;

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
    refusal: super::ctx::Refusal,
}

impl<S, const WAIT: bool> Counted<S, WAIT> {
    pub(crate) fn new(
        inner: S,
        counters: Arc<StageCounters>,
        refusal: super::ctx::Refusal,
    ) -> Self {
        Counted {
            inner,
            counters,
            unflushed: 0,
            waiting: false,
            pending_since: Instant::now(),
            refusal,
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
                super::ctx::note_refusal(this.refusal, &item);
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
    refusal: super::ctx::Refusal,
}

impl<S> Timed<S> {
    pub(crate) fn new(
        inner: S,
        counters: Arc<StageCounters>,
        refusal: super::ctx::Refusal,
    ) -> Self {
        Timed {
            refusal,
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
                super::ctx::note_refusal(this.refusal, &item);
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
}

impl<S: Resumable> Resumable for Timed<S> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        self.project().inner.save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.inner.last_prov()
    }
}
