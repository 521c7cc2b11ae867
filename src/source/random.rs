//! `random`: pseudorandom integers, forever (tf.data's `Dataset.random`).
//!
//! Saved state: `[index of the next value]`. Value `i` is word `i` of a ChaCha8 stream keyed
//! by the seed (and the epoch, when rerandomized), so a restore or a replay seeks to it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::checkpoint::Prov;
use crate::engine::{Cardinality, Ctx, Replay, ReplaySource, Source, Start, replayed};
use crate::ops::random_map::epoch_key;
use crate::runtime::Coop;

const STAGE: &str = "random";

/// The [`random`](crate::Dataset::random) source.
#[derive(Hash)]
pub(crate) struct Random {
    pub(crate) seed: Option<u64>,
    pub(crate) rerandomize_each_iteration: bool,
    /// Drawn from OS entropy when the recipe was built, for an unseeded one (the seeds table
    /// of a checkpoint gives it back on resume): not a parameter.
    pub(crate) fallback: crate::engine::Unkeyed<u64>,
}

impl Source for Random {
    type Out = i64;
    type Stream = RandomStream;
    const NAME: &'static str = STAGE;

    fn cardinality(&self) -> Cardinality {
        Cardinality::Infinite
    }

    fn open(&self, ctx: &Ctx, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let seed = ctx.seed_for(self.seed, 0, *self.fallback);
        // As tf.data: the same sequence every epoch unless rerandomized.
        let epoch = if self.rerandomize_each_iteration {
            ctx.epoch()
        } else {
            0
        };
        let rng = ChaCha8Rng::from_seed(epoch_key(seed, epoch));
        let mut stream = RandomStream {
            rng,
            next: 0,
            coop: Coop::default(),
        };
        if let Start::Restore(state) = start {
            stream.seek(state.word(0)?);
        }
        Ok(stream)
    }

    /// Each saved index's value, the generator placed there.
    fn replay(&self, ctx: &Ctx, provs: &Arc<[Prov]>) -> Replay<i64> {
        replayed(self.open(ctx, Start::Fresh).map(|mut stream| {
            ReplaySource::new(Arc::clone(provs), STAGE, move |i| {
                stream.seek(i);
                Ok(stream.rng.next_u64() as i64)
            })
        }))
    }
}

/// Stream for the [`random`](crate::Dataset::random) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct RandomStream {
    rng: ChaCha8Rng,
    /// Index of the next value.
    next: u64,
    coop: Coop,
}

impl RandomStream {
    /// Places the generator at value `index` (two 32-bit words each).
    fn seek(&mut self, index: u64) {
        self.rng.set_word_pos(u128::from(index) * 2);
        self.next = index;
    }
}

impl Stream for RandomStream {
    type Item = anyhow::Result<i64>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Poll::Ready(_) = this.coop.poll_lap(cx) else {
            return Poll::Pending;
        };
        let value = this.rng.next_u64() as i64;
        this.next += 1;
        Poll::Ready(Some(Ok(value)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

crate::engine::numbered_source!(impl[] RandomStream, |s| STAGE, s.next);
