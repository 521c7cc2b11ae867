//! [`random_map`](crate::Dataset::random_map): a parallel map whose function draws from a
//! random generator of its element's own.
//!
//! Grain's `RandomMapTransform`, on [`map_parallel`](crate::Dataset::map_parallel)'s
//! machinery: the generator handed to `f` for an element depends only on (seed, epoch, index of
//! the element in this stage's input), never on which worker runs the call or when, so the
//! output is the same at every parallelism level and on every run with a seed.

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::engine::{Cardinality, Ctx, Operation, Start, Unkeyed};
use crate::hash::mix64;
use crate::ops::parallel_map::{self, ParallelMap};
use crate::options::Parallelism;

const STAGE: &str = "random_map";

type RandomFn<T, U> = dyn Fn(T, &mut ChaCha8Rng) -> anyhow::Result<U> + Send + Sync;

/// The ChaCha8 key of one epoch: 32 bytes drawn from (seed, epoch).
pub(crate) fn epoch_key(seed: u64, epoch: u64) -> [u8; 32] {
    let mut key = [0u8; 32];
    let mut state = mix64(seed ^ mix64(epoch.wrapping_add(0xE90C_4000)));
    for chunk in key.chunks_exact_mut(8) {
        state = mix64(state);
        chunk.copy_from_slice(&state.to_le_bytes());
    }
    key
}

/// The generator of element `index` under an epoch's key: ChaCha8 with the key, on stream
/// `index` (ChaCha's 64-bit stream id), so every element has an independent stream.
pub(crate) fn element_rng(key: [u8; 32], index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::from_seed(key);
    rng.set_stream(index);
    rng
}

/// The [`random_map`](crate::Dataset::random_map) operation. Its seed is keyed; its
/// parallelism is not (the output is the same at every level).
pub(crate) struct RandomMap<T, U> {
    pub(crate) seed: Option<u64>,
    pub(crate) parallelism: Unkeyed<Parallelism>,
    pub(crate) f: Unkeyed<Arc<RandomFn<T, U>>>,
    /// Drawn once per recipe, as for an unseeded shuffle; a checkpoint saves the seed in use.
    pub(crate) fallback: Unkeyed<u64>,
}

crate::engine::keyed_fields!(impl[T, U] RandomMap<T, U> { keyed: [seed], unkeyed: [parallelism, f, fallback] });

impl<T: Send + 'static, U: Send + 'static> Operation<T> for RandomMap<T, U> {
    type Out = U;
    type Stream = ParallelMap<(i64, T), U>;
    const NAME: &'static str = STAGE;
    const ORDERED: bool = true;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    /// Saved state: `[seed, epoch]` first, then `map_parallel`'s. The saved seed wins (an
    /// unseeded recipe draws another in each process), in replay too; the epoch is the
    /// context's (a replayed element may come from an earlier repetition).
    fn open(
        &self,
        ctx: &Ctx,
        input: crate::engine::Input<'_, T>,
        start: Start<'_>,
    ) -> anyhow::Result<Self::Stream> {
        let saved = match start {
            Start::Fresh => None,
            Start::Restore(state) => Some(state.word(0)?),
            // The saved state stays in reach in replay, when there is one of this stage.
            Start::Replay(_) => ctx.restoring().and_then(|s| s.word(0).ok()),
        };
        let depth = input.dataset().depth();
        let seed = saved.unwrap_or_else(|| ctx.seed_for(self.seed, depth, *self.fallback));
        let epoch = ctx.epoch();
        let key = epoch_key(seed, epoch);
        let f = Arc::clone(&self.f);
        let call: Arc<dyn Fn((i64, T)) -> anyhow::Result<U> + Send + Sync> =
            Arc::new(move |(index, x)| f(x, &mut element_rng(key, index as u64)));
        // Elements are numbered in input order before they are handed to the workers
        // (errors take an index too, so an element's index is its position in the input);
        // the number is part of its saved position.
        let upstream = input.dataset();
        let numbered = |ctx: &Ctx| crate::ops::enumerate::build(ctx, upstream, 0);
        let parallelism = *self.parallelism;
        Ok(parallel_map::build(
            ctx,
            &numbered,
            upstream.answers(ctx),
            call,
            parallelism,
            STAGE,
            vec![seed, epoch],
        ))
    }
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    #[test]
    fn streams_differ_by_index_and_epoch_and_repeat_for_the_same_ones() {
        let draw = |seed, epoch, index| element_rng(epoch_key(seed, epoch), index).random::<u64>();
        assert_eq!(draw(1, 0, 5), draw(1, 0, 5));
        assert_ne!(draw(1, 0, 5), draw(1, 0, 6));
        assert_ne!(draw(1, 0, 5), draw(1, 1, 5));
        assert_ne!(draw(1, 0, 5), draw(2, 0, 5));
    }
}
