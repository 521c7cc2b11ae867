use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::checkpoint::{Prov, State};
use crate::engine::{Cardinality, Ctx, Dataset, Held, Hold, Input, Operation, Start, Unkeyed};
use crate::engine::{Resumable, unsupported};
use crate::hash::mix64;
use crate::stats::StageCounters;

const STAGE: &str = "shuffle";

/// The [`shuffle`](crate::Dataset::shuffle) operation.
#[derive(Hash)]
pub(crate) struct Shuffle {
    pub(crate) buffer_size: usize,
    pub(crate) seed: Option<u64>,
    pub(crate) reshuffle_each_iteration: bool,
    /// Drawn once per recipe, as tf.data does for an unseeded shuffle, so that
    /// `reshuffle_each_iteration = false` repeats one order even without a seed. A checkpoint
    /// saves the seed in use, so an unseeded shuffle resumes exactly too.
    pub(crate) fallback: Unkeyed<u64>,
}

impl<T: Send + 'static> Operation<T> for Shuffle {
    type Out = T;
    type Stream = ShuffleStream<T>;
    const NAME: &'static str = STAGE;
    const SMALL: bool = false;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let dataset = input.dataset();
        build(
            ctx,
            dataset,
            self.buffer_size,
            self.seed,
            *self.fallback,
            dataset.depth() + 1,
            self.reshuffle_each_iteration,
        )
    }
}

/// The shuffle of one epoch: its order drawn from (seed, epoch); restored from a checkpoint
/// (the random generator's position, and the buffer's members made again by [`Hold`] from
/// their saved positions, in the buffer's order); or, in replay, passing the replayed
/// elements through in order.
///
/// Saved state: `[seed, epoch, word position (low, high)]`, the members' positions (`held`),
/// the input's state.
fn build<T: Send + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    buffer_size: usize,
    seed: Option<u64>,
    fallback: u64,
    depth: u64,
    reshuffle: bool,
) -> anyhow::Result<ShuffleStream<T>> {
    let answers = input.answers(ctx);
    let input = |ctx: &Ctx| input.build(ctx);
    if ctx.replaying().is_some() {
        // The replayed elements are ones it held or passed on: it keeps their order.
        let hold = Hold::open(ctx, &input, answers, true, STAGE, 0)?;
        let mut shuffle = ShuffleStream::new(hold, 1, rng(0, 0), None);
        shuffle.passthrough = true;
        return Ok(shuffle);
    }
    ctx.gauge();
    let (base, epoch, pos) = match ctx.restoring() {
        None => {
            let base = ctx.seed_for(seed, depth, fallback);
            (base, if reshuffle { ctx.epoch() } else { 0 }, 0)
        }
        Some(state) => {
            let pos = u128::from(state.word(2)?) | (u128::from(state.word(3)?) << 64);
            (state.word(0)?, state.word(1)?, pos)
        }
    };
    let mut generator = rng(base, epoch);
    generator.set_word_pos(pos);
    let hold = Hold::open(ctx, &input, answers, true, STAGE, 4)?;
    let mut shuffle = ShuffleStream::new(hold, buffer_size, generator, ctx.stats_handle());
    shuffle.seed = (base, epoch);
    Ok(shuffle)
}

/// The generator of one epoch's order.
fn rng(base: u64, epoch: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix64(base ^ mix64(epoch.wrapping_add(0x5EED))))
}

/// Stream for the [`shuffle`](crate::Dataset::shuffle) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ShuffleStream<T> {
    hold: Hold<T>,
    buffer: Held<T>,
    /// Where the last element yielded came from.
    last: Option<Prov>,
    buffer_size: usize,
    rng: ChaCha8Rng,
    /// The seed and epoch the generator was made from (saved by checkpoints).
    seed: (u64, u64),
    /// The stage's statistics: the buffer's fill is reported there.
    stats: Option<Arc<StageCounters>>,
    /// In replay: elements pass through in order.
    passthrough: bool,
}

impl<T> Unpin for ShuffleStream<T> {}

impl<T> ShuffleStream<T> {
    fn new(
        hold: Hold<T>,
        buffer_size: usize,
        rng: ChaCha8Rng,
        stats: Option<Arc<StageCounters>>,
    ) -> Self {
        if let Some(stats) = &stats {
            stats.set_buffer_limit(buffer_size);
        }
        let capacity = buffer_size.min(1 << 16);
        ShuffleStream {
            buffer: Held::new(capacity, hold.resumable()),
            hold,
            last: None,
            buffer_size,
            rng,
            seed: (0, 0),
            stats,
            passthrough: false,
        }
    }
}

impl<T: Send + 'static> Stream for ShuffleStream<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.passthrough {
            let item = std::task::ready!(this.hold.poll_next(cx));
            this.last = this.hold.prov();
            return Poll::Ready(item);
        }
        // Fill the buffer before each output (the whole buffer before the first one).
        while this.buffer.len() < this.buffer_size && !this.hold.is_terminated() {
            match std::task::ready!(this.hold.poll_next(cx)) {
                Some(Ok(x)) => this.buffer.push(x, &mut this.hold),
                Some(Err(e)) => {
                    // An error passes through at once, at its own position.
                    this.last = this.hold.prov();
                    return Poll::Ready(Some(Err(e)));
                }
                None => break,
            }
        }
        if let Some(stats) = &this.stats {
            stats.set_buffered(this.buffer.len());
        }
        if this.buffer.is_empty() {
            return Poll::Ready(None);
        }
        let i = this.rng.random_range(0..this.buffer.len());
        let (x, prov) = this.buffer.swap_remove(i);
        this.last = prov;
        Poll::Ready(Some(Ok(x)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (lo, hi) = self.hold.size_hint();
        let n = self.buffer.len();
        (lo.saturating_add(n), hi.and_then(|h| h.checked_add(n)))
    }
}

impl<T> Resumable for ShuffleStream<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let pos = this.rng.get_word_pos();
        let state =
            State::new(STAGE).words([this.seed.0, this.seed.1, pos as u64, (pos >> 64) as u64]);
        let buffer = &this.buffer;
        this.hold
            .save(state, std::iter::empty(), || buffer.positions())
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.last
            .clone()
            .ok_or_else(|| unsupported(STAGE, "its input cannot say where its elements come from"))
    }
}
