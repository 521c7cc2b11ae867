//! `from_generator`: a blocking iterator on a thread of its own, behind a bounded channel;
//! `from_generator_at`: the same, made from a position, so that it can be checkpointed.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{Cardinality, Ctx, Dataset, Source, Start, Unkeyed};
use crate::engine::{Resumable, numbered, replaying, unsupported};
use crate::runtime::{self, ChunkReceiver, ChunkSender, chunk_channel};

const STAGE: &str = "from_generator";

/// Makes the generator and sends its items until it ends or the receiver is gone.
type RunFn<T> = dyn Fn(&mut ChunkSender<anyhow::Result<T>>) + Send + Sync;

pub(crate) fn dataset<T, I>(
    buffer: usize,
    make: impl Fn() -> I + Send + Sync + 'static,
) -> Dataset<T>
where
    T: Send + 'static,
    I: IntoIterator<Item = anyhow::Result<T>>,
{
    assert!(buffer > 0, "from_generator: buffer must be at least 1");
    let run: Arc<RunFn<T>> = Arc::new(move |tx| {
        for item in make() {
            if tx.blocking_send(item).is_err() {
                return; // the epoch was dropped
            }
        }
        let _ = tx.blocking_flush();
    });
    Dataset::from_source(FromGenerator {
        buffer: Unkeyed(buffer),
        run: Unkeyed(run),
    })
}

/// [`Dataset::from_generator`]: nothing to key (a function), and nothing to save.
struct FromGenerator<T> {
    buffer: Unkeyed<usize>,
    run: Unkeyed<Arc<RunFn<T>>>,
}

crate::engine::keyed_fields!(impl[T] FromGenerator<T> { keyed: [], unkeyed: [buffer, run] });

impl<T: Send + 'static> Source for FromGenerator<T> {
    type Out = T;
    type Stream = Generator<T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    fn resumable(&self) -> bool {
        false
    }

    fn open(&self, ctx: &Ctx, _: Start<'_>) -> anyhow::Result<Generator<T>> {
        let mut generator = Generator::new(Arc::clone(&self.run), *self.buffer, thread_stats(ctx));
        generator.plain = true;
        Ok(generator)
    }
}

/// The stage's counters, with its one thread as its parallelism (the generator's busy time
/// is the stage's worker time).
fn thread_stats(ctx: &Ctx) -> Option<Arc<crate::stats::StageCounters>> {
    let stats = ctx.stats_handle();
    if let Some(stats) = &stats {
        stats.set_parallelism(1);
    }
    stats
}

/// Why a plain generator cannot be saved.
const PLAIN: &str = "a plain generator cannot be restarted at a position: make it with \
                     Dataset::from_generator_at, whose generator starts where it is asked to";

/// The positional form: `make(start)` iterates the generator's elements from element
/// `start` on (0-based). Saved state: `[next]`, the position of the next element (elements
/// yielded, errors included, from the start of the epoch); an element's position is its
/// index. A restored epoch calls `make(next)`; in replay, the wanted positions are made in
/// runs (see [`replay`]).
pub(crate) fn dataset_at<T, I>(
    buffer: usize,
    make: impl Fn(u64) -> I + Send + Sync + 'static,
) -> Dataset<T>
where
    T: Send + 'static,
    I: IntoIterator<Item = anyhow::Result<T>>,
{
    assert!(buffer > 0, "from_generator_at: buffer must be at least 1");
    Dataset::from_source(FromGeneratorAt {
        buffer: Unkeyed(buffer),
        make: Unkeyed(Arc::new(make)),
    })
}

/// [`Dataset::from_generator_at`]: nothing to key (a function).
struct FromGeneratorAt<F> {
    buffer: Unkeyed<usize>,
    make: Unkeyed<Arc<F>>,
}

crate::engine::keyed_fields!(impl[F] FromGeneratorAt<F> { keyed: [], unkeyed: [buffer, make] });

impl<T, I, F> Source for FromGeneratorAt<F>
where
    T: Send + 'static,
    I: IntoIterator<Item = anyhow::Result<T>>,
    F: Fn(u64) -> I + Send + Sync + 'static,
{
    type Out = T;
    type Stream = Generator<T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }

    /// Fresh, restored (`make(next)`), or in replay (the wanted positions made in runs).
    fn open(&self, ctx: &Ctx, start: Start<'_>) -> anyhow::Result<Generator<T>> {
        let (buffer, stats, make) = (*self.buffer, thread_stats(ctx), Arc::clone(&self.make));
        if let Start::Replay(provs) = start {
            let wanted: Vec<u64> = provs
                .iter()
                .map(Prov::single)
                .collect::<anyhow::Result<_>>()?;
            let run: Arc<RunFn<T>> = Arc::new(move |tx| replay(&*make, &wanted, tx));
            let mut generator = Generator::new(run, buffer, stats);
            generator.picks = Some(Arc::clone(provs));
            return Ok(generator);
        }
        let start = match start {
            Start::Restore(state) => state.word(0)?,
            _ => 0,
        };
        let run: Arc<RunFn<T>> = Arc::new(move |tx| {
            for item in make(start) {
                if tx.blocking_send(item).is_err() {
                    return; // the epoch was dropped
                }
            }
            let _ = tx.blocking_flush();
        });
        let mut generator = Generator::new(run, buffer, stats);
        generator.next = start;
        Ok(generator)
    }
}

/// Wanted positions at most this far apart are made in one pass of the generator (the
/// elements between them made and dropped); farther ones start it again at the next.
const REPLAY_GAP: u64 = 16;

/// Sends the generator's elements at `wanted`, in that order: the positions are sorted and
/// made in runs, each run by one `make(first)` (positions a shuffle buffer holds lie close
/// together); a position wanted again, or past the generator's end, by one `make(position)`
/// of its own.
fn replay<T, I>(make: &dyn Fn(u64) -> I, wanted: &[u64], tx: &mut ChunkSender<anyhow::Result<T>>)
where
    I: IntoIterator<Item = anyhow::Result<T>>,
{
    let mut sorted = wanted.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut made = std::collections::HashMap::with_capacity(sorted.len());
    let mut i = 0;
    while let Some(&first) = sorted.get(i) {
        let mut items = make(first).into_iter();
        let mut at = first;
        while let Some(&want) = sorted.get(i) {
            if want - at > REPLAY_GAP {
                break; // the next run
            }
            let item = items.nth((want - at) as usize);
            i += 1;
            let Some(item) = item else {
                // Past the end: what is left of this run is made (and found missing) alone.
                break;
            };
            made.insert(want, item);
            at = want + 1;
        }
    }
    for &position in wanted {
        let item = made.remove(&position).unwrap_or_else(|| {
            make(position).into_iter().next().unwrap_or_else(|| {
                Err(crate::Error::Checkpoint(format!(
                    "from_generator_at: the generator made from position {position} has no \
                     element, but one was saved there (the generator changed since the \
                     checkpoint?)"
                ))
                .into())
            })
        });
        if tx.blocking_send(item).is_err() {
            return;
        }
    }
    let _ = tx.blocking_flush();
}

enum Phase<T> {
    Idle(Arc<RunFn<T>>),
    /// The generator runs on a thread of streamload's own (`runtime::spawn_thread`: it holds
    /// the thread for the whole epoch, which on tokio's blocking pool could starve the
    /// readers); it stops when `rx` is dropped (its next send fails).
    Running {
        rx: ChunkReceiver<anyhow::Result<T>>,
    },
    Done,
}

/// Stream for [`Dataset::from_generator`].
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Generator<T> {
    phase: Phase<T>,
    buffer: usize,
    stats: Option<Arc<crate::stats::StageCounters>>,
    /// The position of the next element (`from_generator_at`), or in replay the index of
    /// the next of `picks`.
    next: u64,
    picks: Option<Arc<[Prov]>>,
    /// Made by `from_generator`: cannot be saved.
    plain: bool,
}

// Elements are never pinned in place.
impl<T> Unpin for Generator<T> {}

impl<T> std::fmt::Debug for Generator<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl<T> Generator<T> {
    fn new(
        run: Arc<RunFn<T>>,
        buffer: usize,
        stats: Option<Arc<crate::stats::StageCounters>>,
    ) -> Self {
        Generator {
            phase: Phase::Idle(run),
            buffer,
            stats,
            next: 0,
            picks: None,
            plain: false,
        }
    }
}

impl<T: Send + 'static> Stream for Generator<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match &mut this.phase {
                Phase::Idle(run) => {
                    let run = Arc::clone(run);
                    let (mut tx, rx) = chunk_channel(this.buffer.div_ceil(2));
                    let stats = this.stats.take();
                    let job = move || {
                        if let Some(stats) = stats {
                            tx.time_work(stats);
                        }
                        // A panic in the generator becomes its last element, never a quiet end.
                        let result =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut tx)));
                        if let Err(payload) = result {
                            let message = crate::error::panic_message(payload.as_ref());
                            let err = crate::Error::WorkerPanicked {
                                stage: STAGE,
                                message,
                            };
                            let _ = tx.blocking_send(Err(err.into()));
                            let _ = tx.blocking_flush();
                        }
                    };
                    match runtime::spawn_thread(STAGE, job) {
                        Ok(()) => this.phase = Phase::Running { rx },
                        Err(e) => {
                            this.phase = Phase::Done;
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
                Phase::Running { rx, .. } => {
                    let item = std::task::ready!(rx.poll_recv(cx));
                    match item {
                        Some(_) => this.next += 1,
                        None => this.phase = Phase::Done,
                    }
                    return Poll::Ready(item);
                }
                Phase::Done => return Poll::Ready(None),
            }
        }
    }
}

/// Saved state (`from_generator_at` only; a plain generator's save is an error naming it):
/// `[next]`; an element's position is its index.
impl<T> Resumable for Generator<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        if self.plain {
            return Err(unsupported(STAGE, PLAIN));
        }
        if self.picks.is_some() {
            return Err(replaying(STAGE));
        }
        Ok(State::new(STAGE).words([self.next]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        if self.plain {
            return Err(unsupported(STAGE, PLAIN));
        }
        numbered(STAGE, self.next, self.picks.as_ref())
    }
}
