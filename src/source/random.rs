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

use crate::checkpoint::{Prov, State};
use crate::engine::unsupported;
use crate::engine::{Cardinality, Ctx, OrReplay, ReplaySource, Resumable, Source, Start};
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
    type Stream = OrReplay<RandomStream, i64>;
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
        match start {
            Start::Fresh => {}
            Start::Restore(state) => stream.seek(state.word(0)?),
            Start::Replay(provs) => {
                let replay = ReplaySource::new(Arc::clone(provs), STAGE, move |index| {
                    stream.seek(index);
                    Ok(stream.rng.next_u64() as i64)
                });
                return Ok(OrReplay::Replay(Box::pin(replay)));
            }
        }
        Ok(OrReplay::Own(stream))
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

impl Resumable for RandomStream {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new(STAGE).words([self.next]))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        match self.next.checked_sub(1) {
            Some(index) => Ok(Prov::at(index)),
            None => Err(unsupported(STAGE, "no element yielded yet")),
        }
    }
}
