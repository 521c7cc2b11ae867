use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, FusedStream, Stream, StreamExt};

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::checkpoint::{Prov, State};
use crate::engine::hold::MARK_EVERY;
use crate::engine::{BoxStream, Ctx, Dataset, Hold, Input, Replay, Start};
use crate::engine::{Resumable, unsupported};
use crate::ops::interleave::{Cycle, Reopen, Slot};
use crate::ops::prefetch::poll_task_end;
use crate::runtime::{self, ChunkReceiver, Task, catch_panic, forward, gauged_chunk_channel};
use crate::stats::StageCounters;

const STAGE: &str = "parallel_interleave";

/// The knobs of one parallel interleave.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) cycle_length: usize,
    pub(crate) block_length: usize,
    /// Inner datasets opened ahead of the cursor, beyond the cycle.
    pub(crate) prefetch_input_elements: usize,
    /// Elements a reader task may hold ready ahead of the consumer.
    pub(crate) buffer_output_elements: usize,
    pub(crate) deterministic: bool,
}

/// An element and where it came from (when positions are kept).
type Tagged<U> = (anyhow::Result<U>, Option<Prov>);

/// A reader's inner stream, polled by its task and saved by the consumer (the task holds
/// the lock for one poll at a time).
struct Inner<U> {
    /// The inner stream held across a checkpoint: what the task read and the consumer has
    /// not passed on is held (marks taken before one element in [`MARK_EVERY`]).
    hold: Hold<U>,
    /// The positions of the last elements read (when recorded), up to the one before
    /// [`Hold::count`]: at least those not passed on.
    provs: VecDeque<Option<Prov>>,
}

/// What a reader's task and its consumer share.
struct Shared<U> {
    inner: Mutex<Inner<U>>,
    /// How many elements of the inner stream the consumer passed on (the hold numbers them
    /// the same way): the marks only those need are dropped.
    passed: AtomicU64,
}

/// One inner dataset, driven by a task of its own that hands over chunks of ready elements.
struct Reader<U> {
    rx: ChunkReceiver<Tagged<U>>,
    /// `Some` until the task has been joined.
    task: Option<Task<()>>,
    /// Shared with its task when it can be saved (deterministic order).
    shared: Option<Arc<Shared<U>>>,
    /// How many elements it passed on (counted when it can be saved).
    passed: u64,
    /// Where the input element it reads came from, when known.
    key: Option<Prov>,
    /// Where its last element passed on came from.
    last: Option<Prov>,
}

impl<U: Send + 'static> Reader<U> {
    /// Holds at most `buffer` elements ahead of the consumer, handed over in chunks of up to
    /// `buffer / 2` (see `runtime::chunks`), plus what is left of the chunk being read. The
    /// elements it holds count in `gauge` (the stage's buffer fill, summed over its readers).
    /// `saved`: the reader can be saved (deterministic order), so its hold takes marks.
    fn spawn(
        mut hold: Hold<U>,
        buffer: usize,
        gauge: Option<Arc<StageCounters>>,
        key: Option<Prov>,
        saved: bool,
    ) -> anyhow::Result<Self> {
        let (tx, rx) = gauged_chunk_channel(buffer, gauge);
        let passed = hold.resumes_at();
        let (task, shared) = if saved {
            hold.marking_every(MARK_EVERY);
            let shared = Arc::new(Shared {
                inner: Mutex::new(Inner {
                    hold,
                    provs: VecDeque::new(),
                }),
                passed: AtomicU64::new(passed),
            });
            let task = runtime::spawn(STAGE, forward(read(Arc::clone(&shared)), tx))?;
            (task, Some(shared))
        } else {
            // Nothing to save: the inner stream as it is, its elements untagged.
            let task = if hold.restoring() {
                let plain = futures::stream::poll_fn(move |cx| {
                    hold.poll_next(cx).map(|item| item.map(|item| (item, None)))
                });
                runtime::spawn(STAGE, forward(plain, tx))
            } else {
                let inner = hold.into_input();
                runtime::spawn(STAGE, forward(inner.map(|item| (item, None)), tx))
            };
            (task?, None)
        };
        Ok(Reader {
            rx,
            task: Some(task),
            shared,
            passed,
            key,
            last: None,
        })
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        if let Some((item, prov)) = ready!(self.rx.poll_recv(cx)) {
            if let Some(shared) = &self.shared {
                self.passed += 1;
                shared.passed.store(self.passed, Ordering::Release);
            }
            self.last = prov;
            return Poll::Ready(Some(item));
        }
        // The task ended: cleanly, or by a panic that must not pass for an end.
        let Some(task) = self.task.as_mut() else {
            return Poll::Ready(None);
        };
        let end = ready!(poll_task_end(task, STAGE, cx));
        self.task = None;
        Poll::Ready(end.map(Err))
    }

    /// The inner stream's state as of what was passed on: what the task read ahead is held
    /// (the hold's words over the inner stream's state).
    fn save(&self) -> anyhow::Result<State> {
        let shared = self.shared.as_ref().ok_or_else(|| {
            unsupported(
                STAGE,
                "its order is not deterministic (Options::deterministic(false))",
            )
        })?;
        let mut inner = shared
            .inner
            .lock()
            .map_err(|_| unsupported(STAGE, "a reader stopped with a panic"))?;
        let Inner { hold, provs } = &mut *inner;
        let count = hold.count();
        let first = count - provs.len() as u64;
        hold.save(State::new("(reader)"), self.passed..count, || {
            let skip = self.passed.saturating_sub(first) as usize;
            provs.iter().skip(skip).cloned().collect()
        })
    }
}

/// A reader's elements, read through its hold, with their positions when recorded.
fn read<U: Send + 'static>(
    shared: Arc<Shared<U>>,
) -> impl Stream<Item = Tagged<U>> + Unpin + Send + 'static {
    futures::stream::poll_fn(move |cx| {
        // A panic in the inner stream ends the task (the consumer reports it): the lock is
        // then poisoned, and `save` says so.
        let Ok(mut inner) = shared.inner.lock() else {
            return Poll::Ready(None);
        };
        let Inner { hold, provs } = &mut *inner;
        let item = ready!(hold.poll_next(cx));
        let Some(item) = item else {
            return Poll::Ready(None);
        };
        let passed = shared.passed.load(Ordering::Acquire);
        hold.release(passed);
        let prov = hold.prov();
        if hold.recording() {
            provs.push_back(prov.clone());
            while provs.len() as u64 > hold.count().saturating_sub(passed) {
                provs.pop_front();
            }
        }
        Poll::Ready(Some((item, prov)))
    })
}

impl<U> Slot<U> for Reader<U>
where
    U: Send + 'static,
{
    fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        self.poll_next(cx)
    }

    fn key(&self) -> Option<&Prov> {
        self.key.as_ref()
    }

    fn save_slot(&mut self) -> anyhow::Result<State> {
        self.save()
    }

    fn last_inner(&self) -> anyhow::Result<Prov> {
        self.last
            .clone()
            .ok_or_else(|| unsupported(STAGE, "the position of its last element was not recorded"))
    }
}

/// A reader opened ahead (or the error met opening it), the input's mark from before its
/// element, and the position of that element when it was an error.
type Ahead<U> = (anyhow::Result<Reader<U>>, Option<State>, Option<Prov>);

/// The input side: turns input elements into reader tasks, some of them ahead of the cursor.
struct Opener<T, U, F> {
    input: Fuse<BoxStream<T>>,
    /// The input's state is small (marks of it are taken).
    input_small: bool,
    f: Arc<F>,
    ctx: Ctx,
    config: Config,
    /// Readers opened ahead of the cursor, in input order (or the error met opening one,
    /// with its input element's position), each with the input's state from before its
    /// element (a mark of a small input).
    ahead: VecDeque<Ahead<U>>,
    /// The position of the input element of the error [`next_reader`](Opener::next_reader)
    /// returned last (an input's error element, or one opening its inner dataset).
    error_key: Option<Prov>,
    /// Readers record their elements' positions (in deterministic order only: a
    /// nondeterministic interleave cannot be saved).
    provs: bool,
}

impl<T, U, F> Opener<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    fn inputs_left(&self) -> bool {
        !self.input.is_terminated() || !self.ahead.is_empty()
    }

    fn start(&self, x: T, key: Option<Prov>, ctx: &Ctx) -> anyhow::Result<Reader<U>> {
        let ctx = self.reader_ctx(ctx);
        let dataset = catch_panic(STAGE, || Ok((self.f)(x)))?;
        let inner = Hold::new(
            dataset.build(&ctx),
            dataset.answers(&ctx),
            false,
            self.provs,
            STAGE,
        );
        self.spawn(inner, key)
    }

    /// The context an inner dataset is built with: asked for positions when they are kept.
    fn reader_ctx(&self, ctx: &Ctx) -> Ctx {
        if self.provs {
            ctx.with_provenance()
        } else {
            ctx.clone()
        }
    }

    fn spawn(&self, hold: Hold<U>, key: Option<Prov>) -> anyhow::Result<Reader<U>> {
        Reader::spawn(
            hold,
            self.config.buffer_output_elements,
            self.ctx.stats_handle(),
            key,
            self.config.deterministic,
        )
    }

    /// The position of the input element just taken, as a key.
    fn key(&self) -> Option<Prov> {
        self.input.get_ref().last_prov().ok()
    }

    /// Opens inner datasets ahead of the cursor, as far as the input has elements ready.
    fn fill_ahead(&mut self, cx: &mut Context<'_>) {
        while self.ahead.len() < self.config.prefetch_input_elements && !self.input.is_terminated()
        {
            let mark = if self.config.deterministic && self.input_small {
                self.input.get_mut().as_mut().save().ok()
            } else {
                None
            };
            match self.input.poll_next_unpin(cx) {
                Poll::Ready(Some(x)) => {
                    let key = self.key();
                    let ctx = self.ctx.clone();
                    let error_key = if x.is_err() { key.clone() } else { None };
                    let reader = x.and_then(|x| self.start(x, key, &ctx));
                    let error_key = if reader.is_err() {
                        error_key.or_else(|| self.key())
                    } else {
                        None
                    };
                    self.ahead.push_back((reader, mark, error_key));
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
    }

    /// The next reader in input order; `Ready(None)` once the input has ended.
    fn next_reader(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<Reader<U>>>> {
        let next = match self.ahead.pop_front() {
            Some((r, _, error_key)) => {
                self.error_key = error_key;
                Some(r)
            }
            None if self.input.is_terminated() => None,
            None => ready!(self.input.poll_next_unpin(cx)).map(|x| {
                let key = self.key();
                self.error_key = key.clone();
                let ctx = self.ctx.clone();
                x.and_then(|x| self.start(x, key, &ctx))
            }),
        };
        self.fill_ahead(cx);
        Poll::Ready(next)
    }
}

/// Stream for the [`parallel_interleave`](crate::Dataset::parallel_interleave) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ParallelInterleaveStream<T, U, F> {
    opener: Opener<T, U, F>,
    cycle: Cycle<Reader<U>>,
    /// After a restore: the open inputs' elements (replayed) and, for each, its slot, key
    /// and inner state, reopened before anything else.
    reopen: Option<Reopen<T>>,
    /// The last element yielded is an error of the input (`Some`), at that input
    /// element's position (if recorded).
    input_error: Option<Option<Prov>>,
}

// Elements are never pinned in place: they sit in queues and are moved out.
impl<T, U, F> Unpin for ParallelInterleaveStream<T, U, F> {}

impl<T, U, F> ParallelInterleaveStream<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    pub(crate) fn new(
        input: BoxStream<T>,
        input_small: bool,
        f: Arc<F>,
        ctx: Ctx,
        config: Config,
    ) -> Self {
        ctx.gauge();
        ParallelInterleaveStream {
            opener: Opener {
                input: input.fuse(),
                input_small,
                f,
                ctx,
                config,
                ahead: VecDeque::new(),
                error_key: None,
                provs: false,
            },
            cycle: Cycle::new(config.cycle_length, config.block_length).counting_errors_in_blocks(),
            reopen: None,
            input_error: None,
        }
    }

    /// First ready: fill every free slot at once, then take from the first slot, from the
    /// cursor on, that has an element ready.
    fn poll_first_ready(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        let Self { opener, cycle, .. } = self;
        let len = cycle.slots.len();
        loop {
            for i in 0..len {
                if cycle.slots[i].is_some() || !opener.inputs_left() {
                    continue;
                }
                match opener.next_reader(cx) {
                    Poll::Ready(Some(Ok(reader))) => cycle.open(i, reader),
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                    Poll::Ready(None) | Poll::Pending => break,
                }
            }
            if !opener.inputs_left() && cycle.num_open == 0 {
                return Poll::Ready(None);
            }
            let mut freed = false;
            for k in 0..len {
                let i = (cycle.cycle_index + k) % len;
                let Some(reader) = &mut cycle.slots[i] else {
                    continue;
                };
                match reader.poll_next(cx) {
                    Poll::Ready(Some(item)) => {
                        cycle.last = i;
                        if item.is_ok() {
                            cycle.advance_position(i);
                        }
                        return Poll::Ready(Some(item));
                    }
                    Poll::Ready(None) => {
                        cycle.close(i);
                        freed = true;
                    }
                    Poll::Pending => {}
                }
            }
            if !freed {
                return Poll::Pending;
            }
        }
    }
}

impl<T, U, F> Stream for ParallelInterleaveStream<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // After a restore: the slots open at the checkpoint first, each restored in a reader
        // of its own (what it had read and not passed on is handed back first by its hold).
        let opener = &this.opener;
        let reopened = Reopen::poll_open(&mut this.reopen, cx, &mut this.cycle, |key, inner, x| {
            let dataset = catch_panic(STAGE, || Ok((opener.f)(x)))?;
            let ctx = opener.reader_ctx(&opener.ctx.with_restore(Some(inner)));
            let answers = dataset.answers(&ctx);
            let hold = Hold::open(&ctx, &|ctx| dataset.build(ctx), answers, false, STAGE, 0)?;
            opener.spawn(hold, Some(key))
        });
        if let Err(e) = ready!(reopened) {
            return Poll::Ready(Some(Err(e)));
        }
        this.opener.fill_ahead(cx);
        if !this.opener.config.deterministic {
            return this.poll_first_ready(cx);
        }
        let ParallelInterleaveStream { opener, cycle, .. } = this;
        let mut from_input = false;
        let item = ready!(cycle.poll_in_order(cx, |cx| {
            let next = opener.next_reader(cx);
            from_input = matches!(next, Poll::Ready(Some(Err(_))));
            next
        }));
        this.input_error = match &item {
            Some(Err(_)) if from_input => Some(opener.error_key.take()),
            _ => None,
        };
        Poll::Ready(item)
    }
}

/// The parallel interleave of one epoch: fresh, restored, or in replay (sequentially, as the
/// interleave's replay: the elements at saved positions, in order).
/// The [`parallel_interleave`](crate::Dataset::parallel_interleave) operation. Its cycle
/// and block lengths are keyed (the cycle length resolved, as `interleave`'s); not
/// `num_parallel_calls`: with deterministic options the order is `interleave`'s whatever it
/// is (and a nondeterministic interleave cannot be saved).
pub(crate) struct ParallelInterleave<F> {
    pub(crate) cycle_length: usize,
    pub(crate) block_length: usize,
    pub(crate) num_parallel_calls: crate::engine::Unkeyed<crate::options::Parallelism>,
    pub(crate) f: crate::engine::Unkeyed<Arc<F>>,
}

crate::engine::keyed_fields!(impl[F] ParallelInterleave<F> { keyed: [cycle_length, block_length], unkeyed: [num_parallel_calls, f] });

impl<T, U, F> crate::engine::Operation<T> for ParallelInterleave<F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U> + Send + Sync + 'static,
{
    type Out = U;
    type Stream = ParallelInterleaveStream<T, U, F>;
    const NAME: &'static str = STAGE;
    const ORDERED: bool = true;

    fn cardinality(&self, _: crate::engine::Cardinality) -> crate::engine::Cardinality {
        crate::engine::Cardinality::Unknown
    }

    /// Fresh, or restored as the sequential interleave is (the readers opened ahead of the
    /// cycle are opened again).
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        use crate::options::Parallelism;
        let cycle = self.cycle_length;
        let parallel = match *self.num_parallel_calls {
            Parallelism::Fixed(n) => n,
            Parallelism::Autotune => 2 * cycle,
        };
        if let Some(stats) = ctx.stage_counters() {
            stats.set_nested_detached(parallel.max(cycle));
            // The readers as the user asked for them: AUTOTUNE's readers opened ahead of the
            // cycle are not shown as workers of their own.
            stats.set_parallelism(match *self.num_parallel_calls {
                Parallelism::Fixed(_) => parallel.max(cycle),
                Parallelism::Autotune => cycle,
            });
        }
        let config = Config {
            cycle_length: cycle,
            block_length: self.block_length,
            prefetch_input_elements: parallel.saturating_sub(cycle),
            buffer_output_elements: self.block_length.max(128),
            deterministic: ctx.options().is_deterministic(),
        };
        let input = input.dataset();
        let upstream = input.build(&ctx.for_input(0).with_provenance());
        let (f, nested) = (Arc::clone(&self.f), ctx.nested().fresh());
        let mut interleave =
            ParallelInterleaveStream::new(upstream, input.is_small(), f, nested, config);
        // Nothing is recorded in a nondeterministic interleave (it cannot be saved);
        // positions when a stage downstream asks, and always over an input that is not small.
        let deterministic = interleave.opener.config.deterministic;
        interleave.opener.provs = deterministic && (ctx.provenance() || !input.is_small());
        if let Some(state) = ctx.restoring() {
            interleave.reopen = Reopen::restore(ctx, input, state, &mut interleave.cycle)?;
        }
        Ok(interleave)
    }

    /// As the sequential interleave's: each saved position's last word names the input
    /// element.
    fn replay(&self, ctx: &Ctx, input: Input<'_, T>, _: &Arc<[Prov]>) -> Replay<U> {
        let replay =
            crate::ops::interleave::replay(ctx, input.dataset(), &self.f, ctx.nested(), STAGE);
        Some(Ok(replay))
    }
}

/// Saved state (deterministic order only), laid out as the sequential interleave's: `[slot,
/// taken from its block, slots, a 0/1 per slot: open]`, the open slots' input elements'
/// positions (`held`), the input's state (from before the inputs opened ahead of the cycle:
/// they are opened again), then each open slot's reader: its hold's words over its inner
/// stream's state (what the reader's task read ahead and was not passed on is held).
impl<T, U, F> Resumable for ParallelInterleaveStream<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
{
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if !this.opener.config.deterministic {
            return Err(unsupported(
                STAGE,
                "its order is not deterministic (Options::deterministic(false))",
            ));
        }
        if this.reopen.is_some() {
            return Err(unsupported(
                STAGE,
                "a checkpoint before its inputs were reopened after a restore",
            ));
        }
        let input = match this.opener.ahead.front() {
            Some((_, Some(mark), _)) => mark.clone(),
            Some((_, None, _)) => {
                return Err(unsupported(STAGE, "its input cannot save its position"));
            }
            None => this.opener.input.get_mut().as_mut().save()?,
        };
        this.cycle.save(STAGE, input)
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.cycle.last_prov(self.input_error.as_ref(), STAGE)
    }
}
