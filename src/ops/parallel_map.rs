//! Stream for the [`map_parallel`](crate::Dataset::map_parallel) method (and the machinery
//! `random_map` and `map_async` share: calls in flight in input order, their checkpoints).
//!
//! # Design
//!
//! The stream takes groups of consecutive elements from its input (sized from the measured
//! cost of the function to take about 1 ms, 1 to 256 elements) and hands them to
//! `parallelism` workers through one queue; finished groups come back through a channel and
//! are put back in input order. At most 2 groups per worker are in flight.
//!
//! The workers are threads of streamload's own (`runtime::spawn_thread`): a pool with no
//! limit of its own, whose idle threads are reused by the next epoch and exit after a second.
//! They used to be tokio blocking tasks, which a worker held for the whole epoch while it
//! waited on the queue: 8 pipelines of `map_parallel(64)` took every thread of a runtime
//! with `max_blocking_threads(512)`, and the readers' short blocking jobs (local reads) waited
//! forever. Now tokio's blocking pool serves only jobs that end, so a reader always finds a
//! thread. A job is handed to the pool once per worker per epoch, so per element nothing is
//! added: the same queue, the same channel.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::stream::Stream;
use tokio::sync::mpsc;

use crate::checkpoint::{Prov, State};
use crate::engine::{
    Answers, BoxStream, Cardinality, Ctx, Hold, Operation, Start, Unkeyed, error_stream,
};
use crate::engine::{Resumable, unsupported};
use crate::options::Parallelism;
use crate::runtime::{self, CancelOnDrop, CancelToken, Knob, KnobKind, catch_panic};
use crate::stats::StageCounters;

const STAGE: &str = "map_parallel";
/// A group of elements should take about this long, so handing it over costs little.
const TARGET_GROUP_TIME: Duration = Duration::from_millis(1);
/// The most elements in one group.
pub(crate) const MAX_GROUP: usize = 256;
/// Groups handed over but not yet yielded, per worker: one running, one queued behind it, so a
/// worker never waits for the consumer to hand it the next group.
pub(crate) const GROUPS_PER_WORKER: usize = 2;
/// A worker hints the cache to fetch the element this many calls ahead of the one it runs
/// (see [`runtime::prefetch_element`]).
const PREFETCH_AHEAD: usize = 2;
/// How often a worker set aside by the autotuner looks whether it is wanted again.
const SET_ASIDE_POLL: Duration = Duration::from_millis(5);

type UserFn<T, U> = Arc<dyn Fn(T) -> anyhow::Result<U> + Send + Sync>;

/// A group of consecutive input elements, numbered in input order.
struct Group<T> {
    seq: u64,
    items: Vec<anyhow::Result<T>>,
}

/// A finished group: its outputs and how long the calls took.
struct Done<U> {
    seq: u64,
    out: Vec<anyhow::Result<U>>,
    took: Duration,
    calls: usize,
}

/// The workers of one epoch: `parallelism` threads of streamload's own (see
/// `runtime::spawn_thread`, never tokio's blocking pool, which they would hold for the whole
/// epoch) pulling groups from one queue. They end when this is dropped: the queue disconnects.
struct Pool<T, U> {
    work: crossbeam_channel::Sender<Group<T>>,
    results: mpsc::UnboundedReceiver<Done<U>>,
}

impl<T: Send + 'static, U: Send + 'static> Pool<T, U> {
    /// Starts `parallelism` workers; with a knob, worker `i` runs only while `i` is below its
    /// value, so the tuner can set workers aside and bring them back without new threads.
    fn start(
        f: &UserFn<T, U>,
        parallelism: usize,
        knob: Option<&Arc<Knob>>,
        stats: Option<&Arc<StageCounters>>,
        cancel: &CancelToken,
    ) -> anyhow::Result<Self> {
        // The submitter bounds what is in flight, so neither channel grows past it.
        let (work, queue) = crossbeam_channel::unbounded::<Group<T>>();
        let (done_tx, results) = mpsc::unbounded_channel();
        for i in 0..parallelism {
            let (queue, done_tx, f, cancel, knob, stats) = (
                queue.clone(),
                done_tx.clone(),
                Arc::clone(f),
                cancel.clone(),
                knob.cloned(),
                stats.cloned(),
            );
            runtime::spawn_thread(STAGE, move || {
                // Ends when the stream is dropped: the queue disconnects or the token is set.
                while let Some(group) = next_group(&queue, i, knob.as_deref(), &cancel) {
                    let start = Instant::now();
                    let mut out = Vec::with_capacity(group.items.len());
                    let mut calls = 0;
                    let mut items = group.items.into_iter();
                    // The first elements the loop below does not ask for ahead.
                    let first = items.as_slice().iter().skip(1).take(PREFETCH_AHEAD - 1);
                    for next in first.flatten() {
                        runtime::prefetch_element(next);
                    }
                    while let Some(item) = items.next() {
                        if cancel.is_cancelled() {
                            return;
                        }
                        // The element after the next is cold in memory while `f` runs.
                        if let Some(Ok(next)) = items.as_slice().get(PREFETCH_AHEAD - 1) {
                            runtime::prefetch_element(next);
                        }
                        out.push(item.and_then(|x| {
                            calls += 1;
                            catch_panic(STAGE, || f(x))
                        }));
                    }
                    let took = start.elapsed();
                    // Reported as the work ends (not when the consumer collects it), so the
                    // tuner sees the workers' load as it is.
                    if let Some(stats) = &stats {
                        stats.add_worker_time(took);
                    }
                    let done = Done {
                        seq: group.seq,
                        out,
                        took,
                        calls,
                    };
                    if done_tx.send(done).is_err() {
                        return;
                    }
                }
            })?;
        }
        Ok(Pool { work, results })
    }
}

/// The next group for worker `i`, or `None` once the stream is gone. A worker the tuner has
/// set aside (`i` at or above the knob's value) waits until it is wanted again.
fn next_group<T>(
    queue: &crossbeam_channel::Receiver<Group<T>>,
    i: usize,
    knob: Option<&Knob>,
    cancel: &CancelToken,
) -> Option<Group<T>> {
    let Some(knob) = knob else {
        return queue.recv().ok();
    };
    loop {
        if cancel.is_cancelled() {
            return None;
        }
        if i >= knob.get() {
            std::thread::sleep(SET_ASIDE_POLL);
            continue;
        }
        match queue.recv_timeout(SET_ASIDE_POLL * 4) {
            Ok(group) => return Some(group),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return None,
        }
    }
}

/// The workers to start for `parallelism`, and the tuner's knob for `AUTOTUNE`: the CPU
/// budget's worth of threads, of which the tuner sets some aside.
/// The [`map_parallel`](crate::Dataset::map_parallel) operation: `f` on blocking threads,
/// `parallelism` calls at once. The parallelism changes the speed only, not the elements
/// nor (deterministic) their order: it is not keyed.
pub(crate) struct MapParallel<T, U> {
    pub(crate) f: Unkeyed<UserFn<T, U>>,
    pub(crate) parallelism: Unkeyed<Parallelism>,
}

crate::engine::keyed_fields!(impl[T, U] MapParallel<T, U> { keyed: [], unkeyed: [f, parallelism] });

impl<T: Send + 'static, U: Send + 'static> Operation<T> for MapParallel<T, U> {
    type Out = U;
    type Stream = ParallelMap<T, U>;
    const NAME: &'static str = "map_parallel";
    const ORDERED: bool = true;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    /// See [`build`]: the start is the context's.
    fn open(
        &self,
        ctx: &Ctx,
        input: crate::engine::Input<'_, T>,
        _: Start<'_>,
    ) -> anyhow::Result<Self::Stream> {
        let dataset = input.dataset();
        let f = Arc::clone(&self.f);
        Ok(build(
            ctx,
            &|ctx: &Ctx| dataset.build(ctx),
            dataset.answers(ctx),
            f,
            *self.parallelism,
            Self::NAME,
            Vec::new(),
        ))
    }
}

pub(crate) fn workers(parallelism: Parallelism, ctx: &Ctx) -> (usize, Option<Arc<Knob>>) {
    match parallelism {
        Parallelism::Fixed(n) => (n, None),
        Parallelism::Autotune => {
            let cpu = ctx.budget().cpu;
            (cpu, ctx.knob(KnobKind::Parallelism, cpu, cpu))
        }
    }
}

/// The parallel map of one epoch over `input`: fresh, restored (the elements in flight at
/// the checkpoint handed back by its [`Hold`], then the input), or in replay. `words` are the
/// stage's own saved words (a random map's seed and epoch), kept first in its state.
pub(crate) fn build<T: Send + 'static, U: Send + 'static>(
    ctx: &Ctx,
    input: &dyn Fn(&Ctx) -> BoxStream<T>,
    answers: Answers,
    f: UserFn<T, U>,
    parallelism: Parallelism,
    stage: &'static str,
    words: Vec<u64>,
) -> ParallelMap<T, U> {
    let (workers, knob) = workers(parallelism, ctx);
    let in_flight = InFlight::open(ctx, input, answers, stage, words);
    ParallelMap::new(in_flight, f, workers, knob, ctx)
}

/// What a checkpoint needs to know of a group handed over (deterministic order only).
struct GroupInfo {
    /// The index of its first element (see [`Hold::index`]).
    first: u64,
    /// Its elements' positions (when the hold keeps them).
    provs: Vec<Prov>,
    len: usize,
}

/// The input and checkpoint bookkeeping of a stage that hands consecutive elements to calls
/// in flight and passes the results on in input order (`map_parallel`, `random_map`,
/// `map_async`): the groups of elements handed over and not yet wholly passed on, oldest
/// first, and how many of the oldest's were passed on. The elements not passed on are held
/// across a checkpoint by the input's [`Hold`] (a mark is taken before each group): a restore
/// hands them back first, and their calls are made again.
///
/// Saved state: the stage's own words (a random map's seed and epoch), then the hold's.
pub(crate) struct InFlight<T> {
    hold: Hold<T>,
    groups: VecDeque<GroupInfo>,
    yielded: usize,
    /// Whether the newest group in `groups` is still taking elements.
    open: bool,
    /// Whether every element's position was recorded (when the hold keeps them).
    placed: bool,
    /// Where the last element passed on came from (when recorded).
    last: Option<Prov>,
    deterministic: bool,
    /// The stage name and own words in its saved state.
    stage: &'static str,
    words: Vec<u64>,
}

impl<T: Send + 'static> InFlight<T> {
    /// The input of one epoch, fresh, restored or in replay as `ctx` says.
    pub(crate) fn open(
        ctx: &Ctx,
        input: &dyn Fn(&Ctx) -> BoxStream<T>,
        answers: Answers,
        stage: &'static str,
        words: Vec<u64>,
    ) -> Self {
        let hold = Hold::open(ctx, input, answers, false, stage, words.len());
        let hold = hold.unwrap_or_else(|e| Hold::plain(error_stream(e), stage));
        InFlight {
            hold,
            groups: VecDeque::new(),
            yielded: 0,
            open: false,
            placed: true,
            last: None,
            deterministic: ctx.options().is_deterministic() || ctx.replaying().is_some(),
            stage,
            words,
        }
    }
}

impl<T> InFlight<T> {
    /// The input's next element.
    pub(crate) fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<T>>> {
        self.hold.poll_next(cx)
    }

    pub(crate) fn is_terminated(&self) -> bool {
        self.hold.is_terminated()
    }

    /// Whether its order is the input's (only then does it keep track of the groups).
    pub(crate) fn deterministic(&self) -> bool {
        self.deterministic
    }

    /// Starts a group before taking its first element: a mark.
    pub(crate) fn open_group(&mut self) {
        self.open = self.deterministic;
        if !self.open {
            return;
        }
        self.hold.mark();
        self.groups.push_back(GroupInfo {
            first: self.hold.count(),
            provs: Vec::new(),
            len: 0,
        });
    }

    /// The size of the group being filled, if one is open.
    pub(crate) fn open_len(&self) -> Option<usize> {
        self.groups.back().filter(|_| self.open).map(|g| g.len)
    }

    /// The open group took the element just read.
    pub(crate) fn took(&mut self) {
        if !self.open {
            return;
        }
        let Some(group) = self.groups.back_mut() else {
            return;
        };
        if group.len == 0 {
            // Not the count at the group's start: after a restore, the hold may have read
            // and dropped elements passed on before (they have indices too).
            group.first = self.hold.index();
        }
        group.len += 1;
        if self.hold.recording() {
            match self.hold.prov() {
                Some(p) => group.provs.push(p),
                None => self.placed = false,
            }
        }
    }

    /// Closes the open group; one that took nothing is forgotten.
    pub(crate) fn close_group(&mut self) {
        if std::mem::take(&mut self.open) && self.groups.back().is_some_and(|g| g.len == 0) {
            self.groups.pop_back();
        }
    }

    /// One more element passed on.
    pub(crate) fn passed_on(&mut self) {
        let Some(front) = self.groups.front() else {
            return;
        };
        if self.hold.recording() {
            self.last = front.provs.get(self.yielded).cloned();
        }
        self.yielded += 1;
        if self.yielded >= front.len {
            if self.open && self.groups.len() == 1 {
                // The open group's elements were all passed on: it starts again, after them.
                self.open = false;
            }
            self.groups.pop_front();
            self.yielded = 0;
            let oldest = self.groups.front().map_or(self.hold.count(), |g| g.first);
            self.hold.release(oldest);
        }
    }

    pub(crate) fn save(&mut self) -> anyhow::Result<State> {
        if !self.deterministic {
            return Err(unsupported(
                self.stage,
                "its order is not deterministic (Options::deterministic(false)): the elements \
                 in flight cannot be placed",
            ));
        }
        let state = State::new(self.stage).words(self.words.iter().copied());
        let count = self.hold.count();
        let first = self
            .groups
            .front()
            .map_or(count, |g| g.first + self.yielded as u64);
        let (groups, yielded, placed) = (&self.groups, self.yielded, self.placed);
        self.hold.save(state, first..count, || {
            let mut held = Vec::new();
            for (i, group) in groups.iter().enumerate() {
                let from = if i == 0 { yielded } else { 0 };
                held.extend(group.provs.iter().skip(from).cloned());
            }
            placed.then_some(held)
        })
    }

    pub(crate) fn last_prov(&self) -> anyhow::Result<Prov> {
        self.last.clone().ok_or_else(|| {
            unsupported(
                self.stage,
                "the position of its last element was not recorded",
            )
        })
    }
}

/// Stream for the [`map_parallel`](crate::Dataset::map_parallel) method.
///
/// `parallelism` blocking threads (started at the first poll) take groups of consecutive
/// elements from a queue the stream keeps topped up. A group holds the elements the input has
/// ready, up to a size chosen from the measured cost of `f` (one element for slow functions,
/// up to [`MAX_GROUP`] for cheap ones), so the hand-over costs little whatever `f` costs. At
/// most [`GROUPS_PER_WORKER`] × `parallelism` groups are in flight (queued, running, or done
/// and waiting for their turn).
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ParallelMap<T, U> {
    f: UserFn<T, U>,
    pool: Option<Pool<T, U>>,
    /// Workers started; with a knob, the most the tuner may use.
    parallelism: usize,
    /// The autotuned number of workers in use (`map_parallel(AUTOTUNE, ...)`).
    knob: Option<Arc<Knob>>,
    /// Elements handed over and not yet yielded (the buffer-fill gauge).
    held: usize,
    deterministic: bool,
    /// Sequence number of the next group to hand over.
    next_seq: u64,
    /// Sequence number of the next group to yield (deterministic order).
    next_out: u64,
    /// Finished groups waiting for an earlier one (deterministic order).
    reorder: BTreeMap<u64, Vec<anyhow::Result<U>>>,
    ready: VecDeque<anyhow::Result<U>>,
    /// Groups handed over whose outputs have not been moved to `ready`.
    calls: usize,
    group_size: usize,
    /// Smoothed cost of one call of `f`, in nanoseconds (0 until measured).
    nanos_per_call: f64,
    cancel: CancelToken,
    _cancel_on_drop: CancelOnDrop,
    failed: bool,
    /// This stage's statistics: the workers' busy time is added here.
    stats: Option<Arc<StageCounters>>,
    /// The input, and for checkpoints (deterministic order) the groups not yet wholly
    /// passed on.
    in_flight: InFlight<T>,
}

// Elements are never pinned in place: they sit in queues and are moved out.
impl<T, U> Unpin for ParallelMap<T, U> {}

impl<T: Send + 'static, U: Send + 'static> ParallelMap<T, U> {
    pub(crate) fn new(
        in_flight: InFlight<T>,
        f: UserFn<T, U>,
        parallelism: usize,
        knob: Option<Arc<Knob>>,
        ctx: &Ctx,
    ) -> Self {
        let cancel = CancelToken::default();
        let stats = ctx.stats_handle();
        if let (Some(stats), None) = (&stats, &knob) {
            stats.set_parallelism(parallelism.max(1));
        }
        ctx.gauge();
        ParallelMap {
            deterministic: in_flight.deterministic(),
            in_flight,
            f,
            pool: None,
            parallelism: parallelism.max(1),
            knob,
            held: 0,
            next_seq: 0,
            next_out: 0,
            reorder: BTreeMap::new(),
            ready: VecDeque::new(),
            calls: 0,
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

    fn accept(&mut self, done: Done<U>) {
        self.learn(done.calls, done.took);
        if !self.deterministic {
            self.calls -= 1;
            self.ready.extend(done.out);
            return;
        }
        self.reorder.insert(done.seq, done.out);
        while let Some(out) = self.reorder.remove(&self.next_out) {
            self.next_out += 1;
            self.calls -= 1;
            self.ready.extend(out);
        }
    }

    /// Hands over groups while there is room and the input has elements ready.
    fn fill(&mut self, cx: &mut Context<'_>) -> anyhow::Result<()> {
        let workers = self.knob.as_ref().map_or(self.parallelism, |k| k.get());
        while self.calls < GROUPS_PER_WORKER * workers && !self.in_flight.is_terminated() {
            self.in_flight.open_group();
            let mut items = Vec::new();
            while items.len() < self.group_size {
                match self.in_flight.poll_input(cx) {
                    Poll::Ready(Some(item)) => {
                        self.in_flight.took();
                        items.push(item);
                    }
                    Poll::Ready(None) | Poll::Pending => break,
                }
            }
            self.in_flight.close_group();
            if items.is_empty() {
                return Ok(());
            }
            let pool = match &mut self.pool {
                Some(pool) => pool,
                None => self.pool.insert(Pool::start(
                    &self.f,
                    self.parallelism,
                    self.knob.as_ref(),
                    self.stats.as_ref(),
                    &self.cancel,
                )?),
            };
            self.held += items.len();
            let group = Group {
                seq: self.next_seq,
                items,
            };
            pool.work
                .send(group)
                .map_err(|_| anyhow::anyhow!("{STAGE}: the workers stopped"))?;
            self.next_seq += 1;
            self.calls += 1;
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
            if let Some(item) = this.ready.pop_front() {
                this.held -= 1;
                this.in_flight.passed_on();
                return Poll::Ready(Some(item));
            }
            if this.failed {
                return Poll::Ready(None);
            }
            if let Err(e) = this.fill(cx) {
                this.failed = true;
                return Poll::Ready(Some(Err(e)));
            }
            if this.calls == 0 {
                // Nothing in flight: the input has ended, or is pending with its waker set.
                return if this.in_flight.is_terminated() {
                    Poll::Ready(None)
                } else {
                    Poll::Pending
                };
            }
            let Some(pool) = this.pool.as_mut() else {
                return Poll::Pending;
            };
            match pool.results.poll_recv(cx) {
                Poll::Ready(Some(done)) => this.accept(done),
                Poll::Ready(None) => {
                    // Every worker is gone with groups still owed: never end quietly.
                    this.failed = true;
                    let e = crate::Error::WorkerPanicked {
                        stage: STAGE,
                        message: "the worker threads stopped".into(),
                    };
                    return Poll::Ready(Some(Err(e.into())));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Saved state: see [`InFlight`].
impl<T: Send + 'static, U: Send + 'static> Resumable for ParallelMap<T, U> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        this.in_flight.save()
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.in_flight.last_prov()
    }
}
