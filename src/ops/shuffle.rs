use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{Fuse, FusedStream, Stream, StreamExt};
use pin_project::pin_project;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Start, Unkeyed};
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
    type Stream = ShuffleStream<BoxStream<T>, T>;
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
/// (the random generator's position, and the buffer refilled by replaying its members'
/// saved positions); or, in replay, passing the replayed elements through in order.
fn build<T: Send + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    buffer_size: usize,
    seed: Option<u64>,
    fallback: u64,
    depth: u64,
    reshuffle: bool,
) -> anyhow::Result<ShuffleStream<BoxStream<T>, T>> {
    if ctx.replaying().is_some() {
        // The replayed elements are ones it held or passed on: it keeps their order.
        let mut shuffle =
            ShuffleStream::new(input.build(&ctx.for_input(0)), 1, rng(0, 0), None, false);
        shuffle.passthrough = true;
        return Ok(shuffle);
    }
    ctx.gauge();
    let Some(state) = ctx.restoring() else {
        let base = ctx.seed_for(seed, depth, fallback);
        let epoch = if reshuffle { ctx.epoch() } else { 0 };
        let upstream = input.build(&ctx.with_provenance());
        let record = upstream.resumable();
        let mut shuffle = ShuffleStream::new(
            upstream,
            buffer_size,
            rng(base, epoch),
            ctx.stats_handle(),
            record,
        );
        shuffle.seed = (base, epoch);
        return Ok(shuffle);
    };
    // [seed, epoch, word position (low, high)], the members' positions, the input.
    let (base, epoch) = (state.word(0)?, state.word(1)?);
    let pos = u128::from(state.word(2)?) | (u128::from(state.word(3)?) << 64);
    let mut generator = rng(base, epoch);
    generator.set_word_pos(pos);
    let upstream = input.build(&ctx.for_input(0).with_provenance());
    let mut shuffle =
        ShuffleStream::new(upstream, buffer_size, generator, ctx.stats_handle(), true);
    shuffle.seed = (base, epoch);
    if !state.held.is_empty() {
        let held: Arc<[Prov]> = state.held.clone().into();
        shuffle.refill = Some((
            input
                .build(&ctx.for_input(0).with_replay(Arc::clone(&held)))
                .fuse(),
            held,
            0,
        ));
    }
    Ok(shuffle)
}

/// After a restore: the buffer's members replayed from their saved positions, those
/// positions, and how many were read.
type Refill<T> = (Fuse<BoxStream<T>>, Arc<[Prov]>, usize);

/// The generator of one epoch's order.
fn rng(base: u64, epoch: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix64(base ^ mix64(epoch.wrapping_add(0x5EED))))
}

/// Stream for the [`shuffle`](crate::Dataset::shuffle) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ShuffleStream<St, T> {
    #[pin]
    input: Fuse<St>,
    buffer: Vec<T>,
    /// Where each buffered element came from, beside it (when the input can say).
    provs: Option<Vec<Prov>>,
    /// Where the last element yielded came from.
    last: Option<Prov>,
    buffer_size: usize,
    rng: ChaCha8Rng,
    /// The seed and epoch the generator was made from (saved by checkpoints).
    seed: (u64, u64),
    /// The stage's statistics: the buffer's fill is reported there.
    stats: Option<Arc<StageCounters>>,
    /// After a restore: the buffer's members replayed from their saved positions (and those
    /// positions), read before anything else.
    refill: Option<Refill<T>>,
    /// In replay: elements pass through in order.
    passthrough: bool,
}

impl<St: Stream, T> ShuffleStream<St, T> {
    pub(crate) fn new(
        input: St,
        buffer_size: usize,
        rng: ChaCha8Rng,
        stats: Option<Arc<StageCounters>>,
        record: bool,
    ) -> Self {
        if let Some(stats) = &stats {
            stats.set_buffer_limit(buffer_size);
        }
        ShuffleStream {
            input: input.fuse(),
            buffer: Vec::with_capacity(buffer_size.min(1 << 16)),
            provs: record.then(|| Vec::with_capacity(buffer_size.min(1 << 16))),
            last: None,
            buffer_size,
            rng,
            seed: (0, 0),
            stats,
            refill: None,
            passthrough: false,
        }
    }
}

impl<St, T: Send + 'static> Stream for ShuffleStream<St, T>
where
    St: Stream<Item = anyhow::Result<T>> + Resumable,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if *this.passthrough {
            let item = std::task::ready!(this.input.as_mut().poll_next(cx));
            if item.is_some() {
                *this.last = this.input.get_ref().last_prov().ok();
            }
            return Poll::Ready(item);
        }
        if let Some((refill, held, n)) = this.refill {
            // The members the buffer held at the checkpoint, in their saved order.
            loop {
                match std::task::ready!(refill.poll_next_unpin(cx)) {
                    Some(Ok(x)) => {
                        this.buffer.push(x);
                        if let Some(provs) = this.provs.as_mut() {
                            provs.push(held.get(*n).cloned().unwrap_or(Prov::group(Vec::new())));
                        }
                        *n += 1;
                    }
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => break,
                }
            }
            if *n != held.len() {
                let e = unsupported(
                    STAGE,
                    "replaying its saved buffer gave fewer elements than saved",
                );
                *this.refill = None;
                return Poll::Ready(Some(Err(e)));
            }
            *this.refill = None;
        }
        // Fill the buffer before each output (the whole buffer before the first one).
        while this.buffer.len() < *this.buffer_size && !this.input.is_terminated() {
            match this.input.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(x))) => {
                    if let Some(provs) = this.provs.as_mut() {
                        match this.input.get_ref().last_prov() {
                            Ok(p) => provs.push(p),
                            // The input cannot say where its elements come from: no
                            // checkpoint can hold this buffer.
                            Err(_) => *this.provs = None,
                        }
                    }
                    this.buffer.push(x);
                }
                Poll::Ready(Some(Err(e))) => {
                    // An error passes through at once, at its own position.
                    if this.provs.is_some() {
                        *this.last = this.input.get_ref().last_prov().ok();
                    }
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => break,
                Poll::Pending => return Poll::Pending,
            }
        }
        if let Some(stats) = this.stats {
            stats.set_buffered(this.buffer.len());
        }
        if this.buffer.is_empty() {
            return Poll::Ready(None);
        }
        let i = this.rng.random_range(0..this.buffer.len());
        if let Some(provs) = this.provs.as_mut() {
            *this.last = Some(provs.swap_remove(i));
        }
        Poll::Ready(Some(Ok(this.buffer.swap_remove(i))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (lo, hi) = self.input.size_hint();
        let n = self.buffer.len();
        (lo.saturating_add(n), hi.and_then(|h| h.checked_add(n)))
    }
}

impl<St: Resumable, T> Resumable for ShuffleStream<St, T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.project();
        if this.refill.is_some() {
            return Err(unsupported(
                STAGE,
                "a checkpoint before its first element after a restore",
            ));
        }
        let Some(held) = this.provs.clone() else {
            // Name the stage that cannot place its elements, when it says so.
            this.input.get_ref().last_prov()?;
            return Err(unsupported(
                STAGE,
                "its input cannot say where its elements come from",
            ));
        };
        let pos = this.rng.get_word_pos();
        Ok(State::new(STAGE)
            .words([this.seed.0, this.seed.1, pos as u64, (pos >> 64) as u64])
            .held(held)
            .input(this.input.get_pin_mut().save()?))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.last
            .clone()
            .ok_or_else(|| unsupported(STAGE, "its input cannot say where its elements come from"))
    }

    fn is_small(&self) -> bool {
        false
    }

    fn resumable(&self) -> bool {
        self.input.get_ref().resumable()
    }
}
