use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use futures::stream::Stream;
use futures::task::AtomicWaker;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};

use crate::checkpoint::{Prov, State};
use crate::engine::hold::MARK_EVERY;
use crate::engine::{Hold, Resumable, unsupported};
use crate::error::{Error, panic_message};
use crate::runtime::{self, Knob, Task};
use crate::stats::StageCounters;

const STAGE: &str = "prefetch";

/// The [`prefetch`](crate::Dataset::prefetch) operation: a producer task `buffer_size`
/// elements ahead. The buffer size changes the speed only: it is not keyed.
#[derive(Hash)]
pub(crate) struct Prefetch {
    pub(crate) buffer_size: crate::engine::Unkeyed<crate::options::Parallelism>,
}

impl<T: Send + 'static> crate::engine::Operation<T> for Prefetch {
    type Out = T;
    type Stream = PrefetchStream<T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, input: crate::engine::Cardinality) -> crate::engine::Cardinality {
        input
    }

    /// See [`build`]: the start is the context's.
    fn open(
        &self,
        ctx: &crate::engine::Ctx,
        input: crate::engine::Input<'_, T>,
        _: crate::engine::Start<'_>,
    ) -> anyhow::Result<PrefetchStream<T>> {
        use crate::options::Parallelism;
        // Not detached: the consumer polls the upstream itself when overlap does not pay, so
        // the upstream's busy time is taken out of prefetch's own; but it also runs in the
        // producer task, so prefetch's own time does not bound it.
        if let Some(stats) = ctx.stage_counters() {
            stats.set_inputs_shared();
        }
        ctx.gauge();
        let knob = match *self.buffer_size {
            Parallelism::Autotune => ctx.knob(
                runtime::KnobKind::Buffer,
                runtime::INITIAL_BUFFER,
                runtime::MAX_BUFFER,
            ),
            Parallelism::Fixed(_) => None,
        };
        let fixed = self.buffer_size.resolve().max(1);
        Ok(build(ctx, input.dataset(), fixed, knob))
    }
}

/// The prefetch of one epoch: fresh, restored (the elements it had taken from its input and
/// not passed on are handed back first by the input's [`Hold`]), or in replay.
pub(crate) fn build<T: Send + 'static>(
    ctx: &crate::engine::Ctx,
    input: &crate::engine::Dataset<T>,
    buffer: usize,
    knob: Option<Arc<Knob>>,
) -> PrefetchStream<T> {
    let gauge = ctx.stats_handle();
    let hold = Hold::of(ctx, input, false, STAGE, 0);
    let mut hold = hold.unwrap_or_else(|e| Hold::plain(crate::engine::error_stream(e), STAGE));
    hold.marking_every(MARK_EVERY);
    PrefetchStream::new(hold, buffer, knob, gauge)
}

/// Below this gain per element (the shorter of the time the consumer spends away between
/// elements and the time the upstream takes to produce one), running the upstream in the
/// background costs more than it saves: handing an element to another thread and waking it
/// takes tens of microseconds on a loaded machine. See [`Prefetch`].
const MIN_OVERLAP: Duration = Duration::from_micros(50);

/// The largest channel a prefetch makes (its elements are only allocated as they come).
const MAX_CHANNEL: usize = 1 << 24;

/// Stream for the [`prefetch`](crate::Dataset::prefetch) method: a spawned producer runs the
/// upstream and sends its elements into a bounded `tokio::sync::mpsc` channel while the
/// consumer is away.
///
/// The consumer takes the oldest element from the channel. When the channel is empty and the
/// producer is not polling the upstream at that moment, the consumer polls the upstream
/// itself: the right to poll it is a baton (see [`Shared::take_baton`]) that the producer
/// holds from before it polls until after it has sent what it got, so once the consumer holds
/// the baton and finds the channel still empty, the upstream's next element is the next in
/// order. The producer runs ahead only while overlapping pays: while both the consumer's time
/// away between elements and the time to produce an element exceed [`MIN_OVERLAP`] (moving
/// averages). Otherwise it stands down, and a consumer that only waits for elements gets them
/// without any thread hand-over.
///
/// Wake-ups: whoever finds the baton taken records it in the baton's state (one atomic word,
/// so the holder's release cannot miss it) after registering its waker, and is woken when
/// the baton comes back; the producer wakes the consumer when it sends (the channel does) and
/// whenever it gives up an upstream wake-up it will not act on. No side ever waits for the
/// other except through these, and the consumer never needs the producer to make progress.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct PrefetchStream<T> {
    shared: Arc<Shared<T>>,
    rx: mpsc::Receiver<Tagged<T>>,
    /// The sender, until the producer takes it at the first poll.
    tx: Option<mpsc::Sender<Tagged<T>>>,
    /// How many elements it passed on (the hold numbers them the same way).
    passed: u64,
    /// Where the last element passed on came from (when positions are recorded).
    last: Option<Prov>,
    /// After a checkpoint over an input that is not small: the elements taken out of the
    /// channel to save their positions, passed on before the channel's.
    held: std::collections::VecDeque<Tagged<T>>,
    /// The producer task; aborted when the stream is dropped or ends.
    task: Option<Task<()>>,
    done: bool,
    /// When the consumer last left with an element.
    left_at: Option<Instant>,
    /// Moving average of the consumer's time away, in nanoseconds.
    away_ns: u64,
    /// The last poll answered `Pending`: the stage's wrapper (`Counted`, `Timed`) is timing
    /// the consumer's wait until the poll that answers, that poll included.
    waiting: bool,
}

/// The baton is held (someone polls the upstream).
const HELD: u8 = 1;
/// The consumer waits for the baton.
const CONSUMER_WAITS: u8 = 2;
/// The producer waits for the baton.
const PRODUCER_WAITS: u8 = 4;

/// An element with what a checkpoint needs to know of it.
type Tagged<T> = (anyhow::Result<T>, Tag);

/// What the poller of the upstream records with each element for checkpoints.
#[derive(Debug, Default)]
struct Tag {
    /// Where it came from (when the hold keeps positions).
    prov: Option<Prov>,
}

/// The upstream: the input held across a checkpoint (a mark is taken before one element in
/// [`MARK_EVERY`]); `None` once it panicked.
struct Upstream<T> {
    stream: Option<Hold<T>>,
}

impl<T> Upstream<T> {
    /// After the upstream yielded an element, with `queued` elements in the channel: its
    /// tag. The marks only elements already passed on need are dropped.
    fn after(&mut self, queued: usize) -> Tag {
        let Some(hold) = self.stream.as_mut() else {
            return Tag::default();
        };
        hold.release(hold.count().saturating_sub(1 + queued as u64));
        Tag { prov: hold.prov() }
    }
}

struct Shared<T> {
    /// Only touched by the holder of the baton (the lock is never contended).
    upstream: Mutex<Upstream<T>>,
    /// [`HELD`], [`CONSUMER_WAITS`], [`PRODUCER_WAITS`].
    baton: AtomicU8,
    ended: AtomicBool,
    /// Whether the producer should run ahead (see [`MIN_OVERLAP`]).
    overlap: AtomicBool,
    /// Moving average of the time the upstream takes to produce an element, in nanoseconds.
    produce_ns: AtomicU64,
    /// Elements sent and not yet received (the bound applies to these).
    queued: AtomicUsize,
    consumer: AtomicWaker,
    producer: AtomicWaker,
    buffer: usize,
    /// The autotuned buffer size (`prefetch(AUTOTUNE)`), read for every element.
    knob: Option<Arc<Knob>>,
    gauge: Option<Arc<StageCounters>>,
}

impl<T> Shared<T> {
    fn upstream(&self) -> MutexGuard<'_, Upstream<T>> {
        // Nothing panics while holding the lock (polls are caught); a poisoned lock's state is
        // still consistent.
        self.upstream.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bound(&self) -> usize {
        self.knob.as_ref().map_or(self.buffer, |k| k.get().max(1))
    }

    /// Takes the baton (the right to poll the upstream), or records that `waiter` waits for
    /// it, in the same atomic step: the holder's [`give_baton`](Shared::give_baton) then
    /// wakes it. The waiter registers its waker before calling this.
    fn take_baton(&self, waiter: u8) -> bool {
        let mut state = self.baton.load(Ordering::Acquire);
        loop {
            let (next, took) = if state & HELD == 0 {
                ((state | HELD) & !waiter, true)
            } else {
                (state | waiter, false)
            };
            match self
                .baton
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return took,
                Err(now) => state = now,
            }
        }
    }

    /// Gives the baton back, waking whoever waited for it.
    fn give_baton(&self) {
        let state = self.baton.swap(0, Ordering::AcqRel);
        if state & CONSUMER_WAITS != 0 {
            self.consumer.wake();
        }
        if state & PRODUCER_WAITS != 0 {
            self.producer.wake();
        }
    }

    /// After a poll of the upstream by the baton's holder: the moving average of the time
    /// to produce, and the end of the upstream when it ended or panicked.
    fn polled(
        &self,
        upstream: &mut Option<Hold<T>>,
        poll: &Poll<Option<anyhow::Result<T>>>,
        panicked: bool,
        took: Duration,
    ) {
        if poll.is_ready() {
            let old = self.produce_ns.load(Ordering::Relaxed);
            self.produce_ns.store(average(old, took), Ordering::Relaxed);
        }
        if panicked {
            *upstream = None;
        }
        if panicked || matches!(poll, Poll::Ready(None)) {
            self.ended.store(true, Ordering::Release);
        }
    }
}

/// Polls `upstream` once, timing it and turning a panic into the end of the stream with an
/// error element. Returns the poll, whether it panicked, and how long it took.
fn poll_upstream<T>(
    upstream: &mut Hold<T>,
    cx: &mut Context<'_>,
) -> (Poll<Option<anyhow::Result<T>>>, bool, Duration) {
    let start = Instant::now();
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| upstream.poll_next(cx)));
    let took = start.elapsed();
    match polled {
        Ok(poll) => (poll, false, took),
        Err(payload) => {
            let err = Error::WorkerPanicked {
                stage: STAGE,
                message: panic_message(payload.as_ref()),
            };
            (Poll::Ready(Some(Err(err.into()))), true, took)
        }
    }
}

/// An exponential moving average (weight 1/8 for the new sample).
fn average(old: u64, sample: Duration) -> u64 {
    let sample = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX);
    old - old / 8 + sample / 8
}

impl<T> PrefetchStream<T> {
    pub(crate) fn new(
        input: Hold<T>,
        buffer: usize,
        knob: Option<Arc<Knob>>,
        gauge: Option<Arc<StageCounters>>,
    ) -> Self {
        // After a restore, the hold numbers the elements it reads again and drops too.
        let input_at = input.resumes_at();
        let buffer = buffer.max(1);
        if let Some(gauge) = &gauge {
            gauge.set_buffer_limit(knob.as_ref().map_or(buffer, |k| k.get()));
        }
        // The channel holds what the largest bound allows; `queued` enforces the bound now.
        let capacity = knob
            .as_ref()
            .map_or(buffer, |k| k.max())
            .clamp(1, MAX_CHANNEL);
        let (tx, rx) = mpsc::channel(capacity);
        PrefetchStream {
            shared: Arc::new(Shared {
                upstream: Mutex::new(Upstream {
                    stream: Some(input),
                }),
                baton: AtomicU8::new(0),
                ended: AtomicBool::new(false),
                overlap: AtomicBool::new(false),
                produce_ns: AtomicU64::new(0),
                queued: AtomicUsize::new(0),
                consumer: AtomicWaker::new(),
                producer: AtomicWaker::new(),
                buffer,
                knob,
                gauge,
            }),
            rx,
            tx: Some(tx),
            passed: input_at,
            last: None,
            held: std::collections::VecDeque::new(),
            task: None,
            done: false,
            left_at: None,
            away_ns: 0,
            waiting: false,
        }
    }

    /// The consumer leaves with `item` (from the channel when `queued`): remembers when, and
    /// lets the producer run ahead (or into the room just made) if it should.
    fn leave(&mut self, (item, tag): Tagged<T>, queued: bool) -> Poll<Option<anyhow::Result<T>>> {
        self.passed += 1;
        self.last = tag.prov;
        if queued {
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            if let Some(gauge) = &self.shared.gauge {
                gauge.sub_buffered(1);
            }
        }
        if self.shared.overlap.load(Ordering::Relaxed) {
            self.shared.producer.wake();
        }
        self.left_at = Some(Instant::now());
        Poll::Ready(Some(item))
    }

    /// The stream ends: after the upstream's end, or with the producer's failure if it
    /// stopped without one.
    fn finish(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<T>>> {
        if !self.shared.ended.load(Ordering::Acquire)
            && let Some(task) = &mut self.task
        {
            if let Some(err) = ready!(poll_task_end(task, STAGE, cx)) {
                self.end();
                return Poll::Ready(Some(Err(err)));
            }
        }
        self.end();
        Poll::Ready(None)
    }

    fn end(&mut self) {
        self.done = true;
        self.task = None;
    }
}

// Elements are never pinned in place.
impl<T> Unpin for PrefetchStream<T> {}

impl<T: Send + 'static> Stream for PrefetchStream<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let poll = this.poll_element(cx);
        this.waiting = poll.is_pending();
        poll
    }
}

impl<T: Send + 'static> PrefetchStream<T> {
    fn poll_element(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<T>>> {
        let this = self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(tagged) = this.held.pop_front() {
            return this.leave(tagged, true);
        }
        if let Some(tx) = this.tx.take() {
            let producer = Producer {
                shared: Arc::clone(&this.shared),
                tx,
                in_upstream: false,
                full_since: None,
            };
            match runtime::spawn(STAGE, producer) {
                Ok(task) => this.task = Some(task),
                Err(e) => {
                    this.end();
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
        if let Some(left_at) = this.left_at.take() {
            this.away_ns = average(this.away_ns, left_at.elapsed());
        }
        let shared = Arc::clone(&this.shared);
        let min = u64::try_from(MIN_OVERLAP.as_nanos()).unwrap_or(u64::MAX);
        // Whether to run ahead is decided here whatever the buffer; an autotuned buffer's size
        // is the tuner's, from the waits and full buffers it sees while running ahead.
        let produce_ns = shared.produce_ns.load(Ordering::Relaxed);
        shared
            .overlap
            .store(this.away_ns.min(produce_ns) >= min, Ordering::Relaxed);
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => return this.leave(item, true),
            Poll::Ready(None) => return this.finish(cx),
            Poll::Pending => {}
        }
        // Nothing queued: poll the upstream here, unless the producer is polling it (it then
        // sends what it gets, which wakes us, or wakes us when it gives the baton back).
        shared.consumer.register(cx.waker());
        if !shared.take_baton(CONSUMER_WAITS) {
            return Poll::Pending;
        }
        // The producer sends before it gives the baton back: what it got is in the channel.
        match this.rx.try_recv() {
            Ok(item) => {
                shared.give_baton();
                return this.leave(item, true);
            }
            Err(TryRecvError::Disconnected) => {
                shared.give_baton();
                return this.finish(cx);
            }
            Err(TryRecvError::Empty) => {}
        }
        let mut upstream = shared.upstream();
        let Some(stream) = upstream.stream.as_mut() else {
            drop(upstream);
            shared.give_baton();
            return this.finish(cx);
        };
        // Nothing is queued and nobody else holds the upstream: its next element is ours.
        let (polled, panicked, took) = poll_upstream(stream, cx);
        if let Some(gauge) = &shared.gauge
            && !this.waiting
        {
            // The consumer waited for the upstream as surely as it would for the producer
            // (after a `Pending`, the wrapper's timing of the wait already holds this poll).
            gauge.add_wait(took);
        }
        let tag = match &polled {
            Poll::Ready(Some(_)) => upstream.after(shared.queued.load(Ordering::Acquire)),
            _ => Tag::default(),
        };
        shared.polled(&mut upstream.stream, &polled, panicked, took);
        drop(upstream);
        shared.give_baton();
        match polled {
            Poll::Ready(Some(item)) => this.leave((item, tag), false),
            Poll::Ready(None) => {
                this.end();
                Poll::Ready(None)
            }
            // The upstream wakes us (or the producer, if it polls the upstream meanwhile; it
            // passes that wake-up on if it does not act on it).
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The spawned half of [`Prefetch`]: fills the channel while the consumer is away.
struct Producer<T> {
    shared: Arc<Shared<T>>,
    tx: mpsc::Sender<Tagged<T>>,
    /// Whether the upstream's last `Pending` was ours (it then wakes us, not the consumer).
    in_upstream: bool,
    /// Since when the producer has found the buffer full (its output waiting on the consumer).
    full_since: Option<Instant>,
}

/// The producer parks without polling the upstream: an upstream wake-up meant for it
/// (`in_upstream`) goes to the consumer, which polls the upstream itself when it finds nothing
/// queued.
fn stand_by<T>(in_upstream: &mut bool, shared: &Shared<T>) -> Poll<()> {
    if std::mem::take(in_upstream) {
        shared.consumer.wake();
    }
    Poll::Pending
}

impl<T> Producer<T> {
    /// Times the waits for room (counted as they start, timed as they end).
    fn time_full(&mut self, full: bool) {
        let Some(gauge) = &self.shared.gauge else {
            return;
        };
        match (full, self.full_since) {
            (true, None) => self.full_since = Some(Instant::now()),
            (false, Some(since)) => {
                self.full_since = None;
                gauge.add_full_wait(since.elapsed());
            }
            _ => {}
        }
    }
}

impl<T: Send + 'static> Future for Producer<T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = Arc::clone(&this.shared);
        loop {
            if shared.ended.load(Ordering::Acquire) {
                return Poll::Ready(());
            }
            // Registered before the checks, so a change after them wakes us.
            shared.producer.register(cx.waker());
            let overlap = shared.overlap.load(Ordering::Relaxed);
            let full = shared.queued.load(Ordering::Acquire) >= shared.bound();
            this.time_full(full && overlap);
            if !overlap || full {
                // Standing down, or no room: the consumer wakes us when it leaves with an
                // element while running ahead pays.
                return stand_by(&mut this.in_upstream, &shared);
            }
            let permit = match this.tx.try_reserve() {
                Ok(permit) => permit,
                Err(TrySendError::Full(())) => return stand_by(&mut this.in_upstream, &shared),
                Err(TrySendError::Closed(())) => return Poll::Ready(()),
            };
            if !shared.take_baton(PRODUCER_WAITS) {
                // The consumer polls the upstream and wakes us when it gives the baton back.
                return Poll::Pending;
            }
            let mut upstream = shared.upstream();
            let Some(stream) = upstream.stream.as_mut() else {
                drop(upstream);
                shared.give_baton();
                return Poll::Ready(());
            };
            let (polled, panicked, took) = poll_upstream(stream, cx);
            let tag = match &polled {
                Poll::Ready(Some(_)) => upstream.after(shared.queued.load(Ordering::Acquire)),
                _ => Tag::default(),
            };
            shared.polled(&mut upstream.stream, &polled, panicked, took);
            this.in_upstream = polled.is_pending();
            match polled {
                Poll::Ready(Some(item)) => {
                    shared.queued.fetch_add(1, Ordering::AcqRel);
                    if let Some(gauge) = &shared.gauge {
                        gauge.add_buffered(1);
                    }
                    // Sent before the baton goes back (see `Prefetch`).
                    permit.send((item, tag));
                    drop(upstream);
                    shared.give_baton();
                }
                Poll::Ready(None) => {
                    drop(upstream);
                    shared.give_baton();
                    // Dropping the sender (as the task ends) wakes a waiting consumer.
                    return Poll::Ready(());
                }
                Poll::Pending => {
                    drop(upstream);
                    shared.give_baton();
                    return Poll::Pending;
                }
            }
        }
    }
}

/// Saved state: the elements taken from the upstream and not passed on, as its [`Hold`] saves
/// them (taken while holding the baton, so the producer is not in the upstream and everything
/// it took is in the channel).
impl<T: Send + 'static> Resumable for PrefetchStream<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let shared = Arc::clone(&this.shared);
        // The producer holds the baton for one poll of the upstream at most.
        while !shared.take_baton(CONSUMER_WAITS) {
            std::thread::yield_now();
        }
        let saved = (|| {
            let mut upstream = shared.upstream();
            let hold = upstream
                .stream
                .as_mut()
                .ok_or_else(|| unsupported(STAGE, "its input stopped with a panic"))?;
            while let Ok(tagged) = this.rx.try_recv() {
                this.held.push_back(tagged);
            }
            let held = &this.held;
            let positions = || held.iter().map(|(_, tag)| tag.prov.clone()).collect();
            hold.save(State::new(STAGE), this.passed..hold.count(), positions)
        })();
        shared.give_baton();
        saved
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.last
            .clone()
            .ok_or_else(|| unsupported(STAGE, "the position of its last element was not recorded"))
    }
}

/// Receives what a spawned reader task sends, then reports how the task ended: `None` after
/// a clean end, an error element if it panicked. Shared by prefetch-like stages.
pub(crate) fn poll_task_end(
    task: &mut Task<()>,
    stage: &'static str,
    cx: &mut Context<'_>,
) -> Poll<Option<anyhow::Error>> {
    match ready!(Pin::new(task).poll(cx)) {
        Ok(()) => Poll::Ready(None),
        Err(e) => Poll::Ready(Some(runtime::join_error(stage, e))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt;

    use super::*;
    use crate::engine::BoxStream;

    fn spin(micros: u64) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_micros(micros) {
            std::hint::spin_loop();
        }
    }

    /// `0..n`, each element costing `cost` of CPU, answering `Pending` (and waking at once)
    /// before every third element, counting what it produced.
    fn upstream(n: u64, cost: u64, produced: Arc<AtomicUsize>) -> BoxStream<u64> {
        let mut next = 0;
        let mut paused = false;
        Box::pin(crate::engine::Opaque::new(
            futures::stream::poll_fn(move |cx| {
                if next == n {
                    return Poll::Ready(None);
                }
                if next % 3 == 0 && !paused {
                    paused = true;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                paused = false;
                spin(cost);
                produced.fetch_add(1, Ordering::SeqCst);
                next += 1;
                Poll::Ready(Some(Ok(next - 1)))
            }),
            "test",
        ))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn order_is_exact_whoever_polls_the_upstream() {
        // Phases of a fast consumer (the upstream runs inline) and of a slow one (the
        // producer runs ahead), with an upstream that pauses: every element once, in order.
        for buffer in [1, 3] {
            let produced = Arc::new(AtomicUsize::new(0));
            let mut prefetch = PrefetchStream::new(
                Hold::new(
                    upstream(600, 60, Arc::clone(&produced)),
                    crate::engine::Answers::PLAIN,
                    false,
                    false,
                    STAGE,
                ),
                buffer,
                None,
                None,
            );
            let mut got = Vec::new();
            while let Some(x) = prefetch.next().await {
                got.push(x.unwrap_or(u64::MAX));
                if (got.len() / 100) % 2 == 1 {
                    tokio::time::sleep(Duration::from_micros(300)).await;
                }
            }
            assert_eq!(got, (0..600).collect::<Vec<_>>(), "prefetch({buffer})");
            assert_eq!(produced.load(Ordering::SeqCst), 600);
        }
    }

    /// `0..n`, answering `Pending` before every other element and waking only the waker it
    /// was last polled with, from another thread after a random few microseconds (the
    /// common shape of a channel or a socket, and the hardest for a stage whose upstream is
    /// polled from two tasks: a wake-up that reaches the task that stopped caring is lost).
    fn late_waking_upstream(n: u64, seed: u64) -> BoxStream<u64> {
        let waker: Arc<Mutex<Option<std::task::Waker>>> = Arc::default();
        let (wake_tx, wake_rx) = std::sync::mpsc::channel::<u64>();
        let slot = Arc::clone(&waker);
        std::thread::spawn(move || {
            while let Ok(micros) = wake_rx.recv() {
                std::thread::sleep(Duration::from_micros(micros));
                let waker = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
        });
        let (mut next, mut ready, mut rng) = (0, false, seed);
        Box::pin(crate::engine::Opaque::new(
            futures::stream::poll_fn(move |cx| {
                if next == n {
                    return Poll::Ready(None);
                }
                if !ready {
                    *waker.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some(cx.waker().clone());
                    if wake_tx.send(0).is_ok() {
                        ready = true;
                    }
                    return Poll::Pending;
                }
                // xorshift: the next wake-up comes after 0-63 us; an element costs 60 us (so
                // running ahead pays while the consumer is away).
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                spin(60);
                ready = false;
                let _ = wake_tx.send(rng % 64);
                next += 1;
                Poll::Ready(Some(Ok(next - 1)))
            }),
            "test",
        ))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_wake_up_is_lost_between_producer_and_consumer() {
        // Consumers that alternate between taking elements at once (the upstream runs inline)
        // and spending 0-200 us away (the producer runs ahead), over an upstream that wakes
        // late and only its last poller: every run ends, with every element once, in order.
        for run in 0..24u64 {
            let buffer = 1 + (run % 3) as usize;
            let mut prefetch = PrefetchStream::new(
                Hold::new(
                    late_waking_upstream(300, run + 1),
                    crate::engine::Answers::PLAIN,
                    false,
                    false,
                    STAGE,
                ),
                buffer,
                None,
                None,
            );
            let mut got = Vec::new();
            let drained = tokio::time::timeout(Duration::from_secs(20), async {
                while let Some(x) = prefetch.next().await {
                    got.push(x.unwrap_or(u64::MAX));
                    let phase = (got.len() as u64 / 30 + run) % 3;
                    spin(phase * 100);
                }
            })
            .await;
            assert!(
                drained.is_ok(),
                "run {run} hung after {} elements",
                got.len()
            );
            assert_eq!(got, (0..300).collect::<Vec<_>>(), "run {run}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_consumer_is_prefetched_for_within_the_bound() {
        // Elements cost 200 us, the consumer is away 10 ms per element: overlapping pays, so
        // the producer fills the buffer while the consumer is away, and never more.
        let produced = Arc::new(AtomicUsize::new(0));
        let mut prefetch = PrefetchStream::new(
            Hold::new(
                upstream(1000, 200, Arc::clone(&produced)),
                crate::engine::Answers::PLAIN,
                false,
                false,
                STAGE,
            ),
            2,
            None,
            None,
        );
        let (mut consumed, mut most_ahead) = (0, 0);
        for _ in 0..30 {
            assert!(matches!(prefetch.next().await, Some(Ok(_))));
            consumed += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
            let ahead = produced.load(Ordering::SeqCst) - consumed;
            assert!(ahead <= 2, "{ahead} elements ahead of the consumer");
            most_ahead = most_ahead.max(ahead);
        }
        assert_eq!(most_ahead, 2, "the producer never ran ahead");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fast_consumer_runs_a_cheap_upstream_itself() {
        // Nothing to overlap: the consumer polls the upstream, so at most the element the
        // producer was polling when the consumer came back is produced ahead.
        let produced = Arc::new(AtomicUsize::new(0));
        let mut prefetch = PrefetchStream::new(
            Hold::new(
                upstream(100_000, 0, Arc::clone(&produced)),
                crate::engine::Answers::PLAIN,
                false,
                false,
                STAGE,
            ),
            4,
            None,
            None,
        );
        let mut consumed = 0;
        while let Some(x) = prefetch.next().await {
            assert_eq!(x.ok(), Some(consumed as u64));
            consumed += 1;
            if consumed > 1000 && consumed % 1000 == 0 {
                std::thread::sleep(Duration::from_millis(1));
                let ahead = produced.load(Ordering::SeqCst) - consumed;
                assert!(
                    ahead <= 1,
                    "the producer ran {ahead} ahead of a fast consumer"
                );
            }
        }
        assert_eq!(consumed, 100_000);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn running_the_upstream_itself_counts_as_the_consumer_waiting() {
        // 2,000 elements of 20 us each and a consumer that does nothing: the consumer runs
        // the upstream, and the report must not say it hardly waited for the pipeline.
        let ds = crate::Dataset::range(0, 2000)
            .map(|x| {
                spin(20);
                anyhow::Ok(x)
            })
            .batch(10)
            .prefetch(1);
        let mut epoch = ds.iter();
        let mut n = 0;
        while let Some(batch) = epoch.next().await {
            n += batch.map_or(0, |b| b.len());
        }
        assert_eq!(n, 2000);
        let stages = epoch.stats().snapshot();
        let prefetch = stages.iter().find(|s| s.name == "prefetch");
        let wait = prefetch.map_or(Duration::ZERO, |s| s.wait);
        assert!(wait >= Duration::from_millis(20), "prefetch wait {wait:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_is_counted_once_when_the_upstream_was_pending() {
        // Each element waits on a timer (the consumer's inline poll answers `Pending`), then
        // costs CPU in the poll that answers: the stage's wrapper times that wait, the poll
        // included, so the inline time must not be added again. The consumer cannot have
        // waited longer than the epoch took.
        for timing in [false, true] {
            let ds = crate::Dataset::range(0, 100)
                .map_async(1, |x| async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    x
                })
                .map(|x| {
                    spin(1000);
                    x
                })
                .prefetch(1)
                .with_options(crate::Options::new().stats_timing(timing));
            let start = Instant::now();
            let mut epoch = ds.iter();
            let mut n = 0;
            while let Some(x) = epoch.next().await {
                n += u64::from(x.is_ok());
            }
            let took = start.elapsed();
            assert_eq!(n, 100);
            let stages = epoch.stats().snapshot();
            let wait = stages
                .iter()
                .find(|s| s.name == "prefetch")
                .map_or(Duration::ZERO, |s| s.wait);
            assert!(
                wait <= took,
                "timing {timing}: prefetch wait {wait:?} in an epoch of {took:?}"
            );
            assert!(
                wait >= Duration::from_millis(100),
                "timing {timing}: {wait:?}"
            );
        }
    }
}
