use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{Answers, BoxStream, Cardinality, Ctx, Held, Hold, Input, Members, Operation};
use crate::engine::{Replay, Resumable, Start, replay_or_open, replayed, unsupported};

const STAGE: &str = "batch";

pub(crate) fn cardinality(input: Cardinality, size: u64, drop_remainder: bool) -> Cardinality {
    input.map_finite(|n| {
        if drop_remainder {
            n / size
        } else {
            n.div_ceil(size)
        }
    })
}

/// The [`batch`](crate::Dataset::batch) operation: `size` elements at a time, the last
/// batch shorter unless `drop_remainder`.
#[derive(Hash)]
pub(crate) struct Batch {
    pub(crate) size: usize,
    pub(crate) drop_remainder: bool,
}

impl<T: Send + 'static> Operation<T> for Batch {
    type Out = Vec<T>;
    type Stream = BatchStream<T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        cardinality(input, self.size as u64, self.drop_remainder)
    }

    /// See [`build_with`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let config = Config {
            sizes: Sizes::One(self.size),
            drop_remainder: self.drop_remainder,
            stage: STAGE,
        };
        let dataset = input.dataset();
        build_with(ctx, &|ctx| dataset.build(ctx), dataset.answers(ctx), config)
    }

    fn replay(&self, ctx: &Ctx, input: Input<'_, T>, _: &Arc<[Prov]>) -> Replay<Vec<T>> {
        replayed(replay_with(ctx, &|ctx| input.dataset().build(ctx), STAGE))
    }
}

/// How a batching stage groups its input.
pub(crate) struct Config {
    pub(crate) sizes: Sizes,
    pub(crate) drop_remainder: bool,
    /// The stage's name in its saved state (`batch`, `padded_batch`, `rebatch`, ...).
    pub(crate) stage: &'static str,
}

/// One batch size, or sizes taken in turn (`rebatch_sizes`; none of them 0).
#[derive(Clone)]
pub(crate) enum Sizes {
    One(usize),
    Cycle(Arc<[usize]>),
}

/// The batch stream of one epoch over the stream `input` makes for a context: fresh or
/// restored.
///
/// Saved state: `[size index]` when the sizes cycle, then the members of the batch being
/// filled as [`Hold`] saves them (over a small input: the mark before the first of them, read
/// again after a restore; otherwise their positions).
pub(crate) fn build_with<T: Send + 'static>(
    ctx: &Ctx,
    input: &dyn Fn(&Ctx) -> BoxStream<T>,
    answers: Answers,
    config: Config,
) -> anyhow::Result<BatchStream<T>> {
    let cycling = matches!(config.sizes, Sizes::Cycle(_));
    let turn = ctx.restoring().filter(|_| cycling).map(|s| s.word(0));
    let turn = turn.transpose()?;
    let at = usize::from(cycling);
    let hold = Hold::open(ctx, input, answers, false, config.stage, at)?;
    let mut batch = BatchStream::new(hold, config);
    if let (Some(turn), Some((sizes, i))) = (turn, batch.sizes.as_mut()) {
        *i = turn as usize % sizes.len();
        batch.size = sizes[*i];
    }
    Ok(batch)
}

/// The batches at the positions `ctx` replays, each made again from its members (read again
/// from the stream `input` makes for a context).
pub(crate) fn replay_with<T: Send + 'static>(
    ctx: &Ctx,
    input: &dyn Fn(&Ctx) -> BoxStream<T>,
    stage: &'static str,
) -> anyhow::Result<Members<T>> {
    let provs = ctx
        .replaying()
        .ok_or_else(|| unsupported(stage, "not in replay"))?;
    Members::new(provs, stage, None, |m| {
        input(&ctx.for_input(0).with_replay(m))
    })
}

/// The batches of one epoch, fresh, restored or in replay, for an operation that goes on
/// from them (`padded_batch`, `ragged_batch`, `rebatch`): [`build_with`] or [`replay_with`].
pub(crate) fn batches<T: Send + 'static>(
    ctx: &Ctx,
    input: &dyn Fn(&Ctx) -> BoxStream<T>,
    answers: Answers,
    config: Config,
) -> BoxStream<Vec<T>> {
    let stage = config.stage;
    replay_or_open(
        ctx,
        || replay_with(ctx, input, stage),
        || build_with(ctx, input, answers, config),
    )
}

/// Stream for the [`batch`](crate::Dataset::batch) method, and the batching step of
/// [`padded_batch`](crate::Dataset::padded_batch), [`ragged_batch`](crate::Dataset::ragged_batch),
/// [`rebatch`](crate::Dataset::rebatch) and [`rebatch_sizes`](crate::Dataset::rebatch_sizes).
#[must_use = "streams do nothing unless polled"]
pub(crate) struct BatchStream<T> {
    hold: Hold<T>,
    /// The batch being filled.
    buf: Held<T>,
    /// The size of the batch being filled.
    size: usize,
    /// The sizes taken in turn (`rebatch_sizes`), and the index of the current one; `None`
    /// for one size.
    sizes: Option<(Arc<[usize]>, usize)>,
    drop_remainder: bool,
    stage: &'static str,
    /// The last batch's members' positions, when recorded.
    last: Option<Prov>,
}

impl<T> Unpin for BatchStream<T> {}

impl<T> BatchStream<T> {
    fn new(hold: Hold<T>, config: Config) -> Self {
        let (size, sizes) = match config.sizes {
            Sizes::One(n) => (n, None),
            Sizes::Cycle(sizes) => (sizes[0], Some((sizes, 0))),
        };
        BatchStream {
            buf: Held::new(size.min(4096), hold.recording()),
            hold,
            size,
            sizes,
            drop_remainder: config.drop_remainder,
            stage: config.stage,
            last: None,
        }
    }

    /// The smallest and largest batch sizes.
    fn size_range(&self) -> (usize, usize) {
        match &self.sizes {
            Some((sizes, _)) => sizes
                .iter()
                .fold((usize::MAX, 0), |(lo, hi), &n| (lo.min(n), hi.max(n))),
            None => (self.size, self.size),
        }
    }

    /// An error element: as tf.data's batch, it fails the batch being filled, and the
    /// elements gathered into it are lost with it.
    fn failed(&mut self, e: anyhow::Error) -> anyhow::Error {
        self.buf.clear();
        if self.buf.records() {
            // The error passes on in a batch's place, at its own position: as a batch of it
            // alone, made again it is that error again.
            self.last = self.hold.alone();
        }
        self.hold.release(self.hold.count());
        e
    }

    /// The input ended: the last, partial batch unless dropped.
    fn ended(&mut self) -> Option<anyhow::Result<Vec<T>>> {
        if self.buf.is_empty() || self.drop_remainder {
            self.buf.clear();
            return None;
        }
        let n = self.buf.len();
        Some(Ok(self.take_batch(n)))
    }

    /// Hands over the gathered batch (and its members' positions, when recorded).
    fn take_batch(&mut self, capacity: usize) -> Vec<T> {
        self.hold.release(self.hold.count());
        if let Some((sizes, i)) = &mut self.sizes {
            *i = (*i + 1) % sizes.len();
            self.size = sizes[*i];
        }
        let (batch, members) = self.buf.take_all(capacity.min(4096));
        self.last = members;
        batch
    }
}

impl<T> Stream for BatchStream<T> {
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let size = this.size;
        loop {
            if this.buf.len() == size && size > 0 {
                return Poll::Ready(Some(Ok(this.take_batch(size))));
            }
            if this.buf.is_empty() {
                // Where this batch starts: restored from here, its members are read again.
                this.hold.mark();
            }
            if !this.buf.records() && size > 0 {
                // No positions recorded (the common case): gather until the batch is full,
                // with nothing else done per element.
                match ready!(this.hold.poll_fill(cx, this.buf.items_mut(), size)) {
                    None => continue,
                    Some(Err(e)) => return Poll::Ready(Some(Err(this.failed(e)))),
                    Some(Ok(())) => return Poll::Ready(this.ended()),
                }
            }
            match ready!(this.hold.poll_next(cx)) {
                Some(Ok(x)) => this.buf.push(x, &mut this.hold),
                Some(Err(e)) => return Poll::Ready(Some(Err(this.failed(e)))),
                None => return Poll::Ready(this.ended()),
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (lo, hi) = self.hold.size_hint();
        let pending = self.buf.len();
        // Each batch takes between the smallest and the largest size.
        let (smallest, largest) = self.size_range();
        let lo = if self.drop_remainder {
            (lo + pending) / largest
        } else {
            (lo + pending).div_ceil(largest)
        };
        let hi = hi.map(|h| (h + pending).div_ceil(smallest));
        (lo, hi)
    }
}

/// Saved state: see [`build_with`].
impl<T> Resumable for BatchStream<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let turn = this.sizes.as_ref().map(|(_, i)| *i as u64);
        let count = this.hold.count();
        let members = count - this.buf.len() as u64..count;
        let buf = &this.buf;
        let state = State::new(this.stage).words(turn);
        this.hold.save(state, members, || buf.positions())
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.hold.placed(&self.last, "its batches")
    }
}
