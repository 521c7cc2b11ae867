use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::stream::{Fuse, Stream, StreamExt};
use futures::stream::{FusedStream, FuturesOrdered, FuturesUnordered};

use crate::dataset::{BoxStream, Ctx};
use crate::options::Parallelism;
use crate::runtime::{self, CancelOnDrop, CancelToken, Knob, KnobKind, Task, catch_panic};
use crate::stats::StageCounters;

const STAGE: &str = "map_parallel";
/// A group of elements should take about this long, so handing it over costs little.
const TARGET_GROUP_TIME: Duration = Duration::from_millis(1);
/// The most elements in one group.
pub(crate) const MAX_GROUP: usize = 256;
/// Groups handed over but not yet yielded, per worker: one running, and one done (or about to
/// start) while an earlier one finishes, so workers rarely wait for each other's order.
pub(crate) const GROUPS_PER_WORKER: usize = 2;

type UserFn<T, U> = Arc<dyn Fn(T) -> anyhow::Result<U> + Send + Sync>;

/// A finished group: its outputs and how long the calls took.
struct Done<U> {
    out: Vec<anyhow::Result<U>>,
    took: Duration,
    calls: usize,
}

/// The spawned call of `f` on one group.
type GroupTask<U> = Task<Done<U>>;

/// The groups in flight, yielded in input order (`buffered`) or as they finish
/// (`buffer_unordered`).
enum InFlight<U> {
    Ordered(FuturesOrdered<GroupTask<U>>),
    Unordered(FuturesUnordered<GroupTask<U>>),
}

impl<U> InFlight<U> {
    fn len(&self) -> usize {
        match self {
            InFlight::Ordered(f) => f.len(),
            InFlight::Unordered(f) => f.len(),
        }
    }

    fn push(&mut self, task: GroupTask<U>) {
        match self {
            InFlight::Ordered(f) => f.push_back(task),
            InFlight::Unordered(f) => f.push(task),
        }
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Done<U>, tokio::task::JoinError>>> {
        match self {
            InFlight::Ordered(f) => f.poll_next_unpin(cx),
            InFlight::Unordered(f) => f.poll_next_unpin(cx),
        }
    }
}

/// Counts a group as running until its call ends, however it ends.
struct Running(Arc<AtomicUsize>);

impl Running {
    fn start(counter: &Arc<AtomicUsize>) -> Running {
        counter.fetch_add(1, Ordering::AcqRel);
        Running(Arc::clone(counter))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Calls `f` on every element of `items` on this (blocking) thread; stops early when the
/// stream is dropped.
fn run_group<T, U>(
    f: &UserFn<T, U>,
    items: Vec<anyhow::Result<T>>,
    cancel: &CancelToken,
    stats: Option<&StageCounters>,
) -> Done<U> {
    let start = Instant::now();
    let mut out = Vec::with_capacity(items.len());
    let mut calls = 0;
    for item in items {
        if cancel.is_cancelled() {
            break;
        }
        out.push(item.and_then(|x| {
            calls += 1;
            catch_panic(STAGE, || f(x))
        }));
    }
    let took = start.elapsed();
    // Reported as the work ends (not when the consumer collects it), so the tuner sees the
    // workers' load as it is.
    if let Some(stats) = stats {
        stats.add_worker_time(took);
    }
    Done { out, took, calls }
}

/// The workers to use for `parallelism`, and the tuner's knob for `AUTOTUNE`: up to the CPU
/// budget's worth, of which the tuner may use fewer.
pub(crate) fn workers(parallelism: Parallelism, ctx: &Ctx) -> (usize, Option<Arc<Knob>>) {
    match parallelism {
        Parallelism::Fixed(n) => (n, None),
        Parallelism::Autotune => {
            let cpu = ctx.budget().cpu;
            (cpu, ctx.knob(KnobKind::Parallelism, cpu, cpu))
        }
    }
}

/// Stream for the [`map_parallel`](crate::Dataset::map_parallel) method: `buffered` (or
/// `buffer_unordered` when the options allow any order) over spawned blocking tasks, each
/// calling `f` on a group of consecutive elements.
///
/// A group holds the elements the input has ready, up to a size chosen from the measured cost
/// of `f` (one element for slow functions, up to [`MAX_GROUP`] for cheap ones), so spawning
/// and handing over cost little whatever `f` costs. At most `parallelism` groups run at once
/// (the knob's value under `AUTOTUNE`), on tokio's blocking threads, never on the async
/// workers; at most [`GROUPS_PER_WORKER`] × `parallelism` are in flight (running, or done
/// and waiting for their turn), so a group that finishes before an earlier one does not
/// leave its worker idle.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ParallelMap<T, U> {
    input: Fuse<BoxStream<T>>,
    f: UserFn<T, U>,
    in_flight: InFlight<U>,
    /// Groups whose call has not ended.
    running: Arc<AtomicUsize>,
    /// The most groups running at once; with a knob, the most the tuner may use.
    parallelism: usize,
    /// The autotuned number of workers in use (`map_parallel(AUTOTUNE, ...)`).
    knob: Option<Arc<Knob>>,
    /// Elements handed over and not yet yielded (the buffer-fill gauge).
    held: usize,
    ready: VecDeque<anyhow::Result<U>>,
    group_size: usize,
    /// Smoothed cost of one call of `f`, in nanoseconds (0 until measured).
    nanos_per_call: f64,
    cancel: CancelToken,
    _cancel_on_drop: CancelOnDrop,
    failed: bool,
    /// This stage's statistics: the workers' busy time is added here.
    stats: Option<Arc<StageCounters>>,
}

// Elements are never pinned in place: they sit in queues and are moved out.
impl<T, U> Unpin for ParallelMap<T, U> {}

impl<T: Send + 'static, U: Send + 'static> ParallelMap<T, U> {
    pub(crate) fn new(
        input: BoxStream<T>,
        f: UserFn<T, U>,
        parallelism: usize,
        knob: Option<Arc<Knob>>,
        deterministic: bool,
        ctx: &Ctx,
    ) -> Self {
        let cancel = CancelToken::default();
        let stats = ctx.stats_handle();
        if let (Some(stats), None) = (&stats, &knob) {
            stats.set_parallelism(parallelism.max(1));
        }
        ctx.gauge();
        ParallelMap {
            input: input.fuse(),
            f,
            in_flight: if deterministic {
                InFlight::Ordered(FuturesOrdered::new())
            } else {
                InFlight::Unordered(FuturesUnordered::new())
            },
            running: Arc::default(),
            parallelism: parallelism.max(1),
            knob,
            held: 0,
            ready: VecDeque::new(),
            group_size: 1,
            nanos_per_call: 0.0,
            _cancel_on_drop: cancel.drop_guard(),
            cancel,
            failed: false,
            stats,
        }
    }

    fn learn(&mut self, calls: usize, took: Duration) {
        if calls == 0 {
            return;
        }
        let per_call = took.as_nanos() as f64 / calls as f64;
        self.nanos_per_call = if self.nanos_per_call == 0.0 {
            per_call
        } else {
            0.8 * self.nanos_per_call + 0.2 * per_call
        };
        let ideal = TARGET_GROUP_TIME.as_nanos() as f64 / self.nanos_per_call.max(1.0);
        self.group_size = (ideal as usize).clamp(1, MAX_GROUP);
    }

    /// Spawns groups while fewer than the workers run, there is room in flight, and the
    /// input has elements ready.
    fn fill(&mut self, cx: &mut Context<'_>) -> anyhow::Result<()> {
        let workers = self
            .knob
            .as_ref()
            .map_or(self.parallelism, |k| k.get())
            .max(1);
        while self.running.load(Ordering::Acquire) < workers
            && self.in_flight.len() < GROUPS_PER_WORKER * workers
            && !self.input.is_terminated()
        {
            let mut items = Vec::new();
            while items.len() < self.group_size {
                match self.input.poll_next_unpin(cx) {
                    Poll::Ready(Some(item)) => items.push(item),
                    Poll::Ready(None) | Poll::Pending => break,
                }
            }
            if items.is_empty() {
                return Ok(());
            }
            self.held += items.len();
            let running = Running::start(&self.running);
            let (f, cancel, stats) = (Arc::clone(&self.f), self.cancel.clone(), self.stats.clone());
            let task = runtime::spawn_blocking(STAGE, move || {
                let _running = running;
                run_group(&f, items, &cancel, stats.as_deref())
            })?;
            self.in_flight.push(task);
        }
        Ok(())
    }
}

impl<T: Send + 'static, U: Send + 'static> Stream for ParallelMap<T, U> {
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(stats) = &this.stats {
            stats.set_buffered(this.held);
        }
        loop {
            // Topped up before yielding what is ready, so workers go on while the consumer
            // takes a finished group's elements.
            if !this.failed
                && let Err(e) = this.fill(cx)
            {
                // After what is ready, then the end.
                this.failed = true;
                this.held += 1;
                this.ready.push_back(Err(e));
            }
            if let Some(item) = this.ready.pop_front() {
                this.held -= 1;
                return Poll::Ready(Some(item));
            }
            if this.failed {
                return Poll::Ready(None);
            }
            match this.in_flight.poll_next(cx) {
                Poll::Ready(Some(Ok(done))) => {
                    this.learn(done.calls, done.took);
                    this.ready.extend(done.out);
                }
                Poll::Ready(Some(Err(e))) => {
                    // A group's task failed outside `f` (its panics are caught per call):
                    // never end quietly with elements owed.
                    this.failed = true;
                    return Poll::Ready(Some(Err(runtime::join_error(STAGE, e))));
                }
                // Nothing in flight: the input has ended, or is pending with its waker set.
                Poll::Ready(None) if this.input.is_terminated() => return Poll::Ready(None),
                Poll::Ready(None) => return Poll::Pending,
                // A group finishing (or the input) wakes us; one that finishes out of turn
                // frees its worker, so look for more input first.
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
