use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Replay, Resumable};
use crate::engine::{Routed, Start, replayed, unsupported};

const STAGE: &str = "repeat";

/// The [`repeat`](crate::Dataset::repeat) operation: the input `times` times (`None`: forever).
#[derive(Hash)]
pub(crate) struct Repeat {
    pub(crate) times: Option<u64>,
}

impl<T: Send + 'static> Operation<T> for Repeat {
    type Out = T;
    type Stream = RepeatStream<T>;
    const NAME: &'static str = STAGE;

    /// tf.data's RepeatDataset: forever is infinite unless the input is known to be empty.
    fn cardinality(&self, input: Cardinality) -> Cardinality {
        match (self.times, input) {
            (Some(0), _) | (_, Cardinality::Finite(0)) => Cardinality::Finite(0),
            (None, _) => Cardinality::Infinite,
            (Some(c), Cardinality::Finite(n)) => Cardinality::Finite(n.saturating_mul(c)),
            (Some(_), other) => other,
        }
    }

    /// In replay each position is keyed by the repetition it came from, which is built again
    /// as itself; the saved state of a repetition (still in reach) gives the seeds of unseeded
    /// stages inside.
    fn replay(&self, ctx: &Ctx, input: Input<'_, T>, provs: &Arc<[Prov]>) -> Replay<T> {
        let seeds = ctx.restoring().and_then(|s| s.inputs.first().cloned());
        let (dataset, ctx) = (input.dataset(), ctx.fresh());
        replayed(Routed::new(provs, usize::MAX, STAGE, |n, list| {
            let repetition = ctx.repetition(n as u64).with_restore(seeds.clone());
            dataset.build(&repetition.with_replay(list))
        }))
    }

    /// Saved state: `[repetitions started]`, and the current one's state.
    fn open(
        &self,
        ctx: &Ctx,
        input: Input<'_, T>,
        start: Start<'_>,
    ) -> anyhow::Result<Self::Stream> {
        let (dataset, ctx) = (input.dataset(), ctx.fresh());
        let mut repeat = RepeatStream {
            dataset: dataset.clone(),
            ctx,
            remaining: self.times,
            started: 0,
            current: None,
            produced: false,
        };
        if let Start::Restore(state) = start {
            repeat.restore(state)?;
        }
        Ok(repeat)
    }
}

/// Stream for the [`repeat`](crate::Dataset::repeat) method: builds the upstream anew for
/// each repetition, each with an epoch number of its own (so shuffles inside reshuffle).
#[must_use = "streams do nothing unless polled"]
pub(crate) struct RepeatStream<T> {
    dataset: Dataset<T>,
    ctx: Ctx,
    /// Repetitions left to start; `None` repeats forever.
    remaining: Option<u64>,
    /// Repetitions started.
    started: u64,
    current: Option<BoxStream<T>>,
    /// Whether the current repetition has yielded anything.
    produced: bool,
}

impl<T: Send + 'static> RepeatStream<T> {
    /// Goes on from a saved state: `[repetitions started]`, and the current one's state.
    fn restore(&mut self, state: &State) -> anyhow::Result<()> {
        let started = state.word(0)?;
        self.started = started;
        if let Some(left) = self.remaining.as_mut() {
            *left = left.saturating_sub(started);
        }
        if let Some(current) = state.inputs.first() {
            let n = started.saturating_sub(1);
            let ctx = self.ctx.repetition(n).with_restore(Some(current.clone()));
            self.current = Some(self.dataset.build(&ctx));
            self.produced = true;
        }
        Ok(())
    }
}

impl<T: Send + 'static> Stream for RepeatStream<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let current = match &mut this.current {
                Some(s) => s,
                None => {
                    match &mut this.remaining {
                        Some(0) => return Poll::Ready(None),
                        Some(n) => *n -= 1,
                        None => {}
                    }
                    this.produced = false;
                    let ctx = this.ctx.repetition(this.started);
                    this.started += 1;
                    this.current.insert(this.dataset.build(&ctx))
                }
            };
            match ready!(current.as_mut().poll_next(cx)) {
                Some(item) => {
                    this.produced = true;
                    return Poll::Ready(Some(item));
                }
                None => {
                    this.current = None;
                    if this.remaining.is_none() && !this.produced {
                        // An empty repetition: repeating forever would spin.
                        this.remaining = Some(0);
                    }
                }
            }
        }
    }
}

impl<T: Send + 'static> Resumable for RepeatStream<T> {
    /// `[repetitions started]`, and the current repetition's state (none between two).
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let state = State::new(STAGE).words([this.started]);
        Ok(match this.current.as_mut() {
            Some(current) => state.input(current.as_mut().save()?),
            None => state,
        })
    }

    /// The current repetition's position, with the repetition's number.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        let current = self
            .current
            .as_ref()
            .ok_or_else(|| unsupported(STAGE, "no element yielded yet"))?;
        let repetition = Prov::at(self.started.saturating_sub(1));
        current.last_prov()?.keyed(&repetition)
    }
}
