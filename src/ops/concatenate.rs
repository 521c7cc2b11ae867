//! Saved state: `[0 while the first input is read, 1 the second]` and that input's state.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Combine, Ctx, Dataset, Inputs, Replay, Start};
use crate::engine::{Resumable, Routed, replayed};

const STAGE: &str = "concatenate";

/// The [`concatenate`](crate::Dataset::concatenate) operation: the second input's stream is
/// built only when the first ends, so it starts no work early.
#[derive(Hash)]
pub(crate) struct Concatenate;

impl<T: Send + 'static> Combine<T> for Concatenate {
    type Out = T;
    type Stream = ConcatenateStream<T>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, inputs: &[Cardinality]) -> Cardinality {
        match inputs {
            [Cardinality::Finite(a), Cardinality::Finite(b)] => {
                Cardinality::Finite(a.saturating_add(*b))
            }
            [a, b] if *a == Cardinality::Infinite || *b == Cardinality::Infinite => {
                Cardinality::Infinite
            }
            _ => Cardinality::Unknown,
        }
    }

    /// Fresh, or restored in either input.
    fn open(&self, ctx: &Ctx, inputs: Inputs<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        let (a, b) = (inputs.dataset(0), inputs.dataset(1));
        let ctx = &ctx.for_merged(inputs.small());
        let phase = ctx.restoring().map(|s| s.word(0)).transpose()?.unwrap_or(0);
        let (current, second) = match phase {
            0 => (a.build(&ctx.for_input(0)), Some((b.clone(), ctx.fresh()))),
            _ => (b.build(&ctx.for_input(0)), None),
        };
        Ok(ConcatenateStream {
            current,
            second,
            phase,
        })
    }

    /// Each position's last word names the input.
    fn replay(&self, ctx: &Ctx, inputs: Inputs<'_, T>, provs: &Arc<[Prov]>) -> Replay<T> {
        let ctx = &ctx.for_merged(inputs.small());
        let phase = ctx.restoring().and_then(|s| s.word(0).ok());
        replayed(Routed::new(provs, 2, STAGE, |i, list| {
            // The input being read at the checkpoint sees its saved state (a replaying
            // stage may take its seed from it).
            let ctx = match phase {
                Some(p) if p == i as u64 => ctx.for_input(0),
                _ => ctx.fresh(),
            };
            inputs.dataset(i).build(&ctx.with_replay(list))
        }))
    }
}

/// Stream for the [`concatenate`](crate::Dataset::concatenate) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ConcatenateStream<T> {
    current: BoxStream<T>,
    /// The second input, until it is built.
    second: Option<(Dataset<T>, Ctx)>,
    /// Which input `current` is.
    phase: u64,
}

impl<T> Unpin for ConcatenateStream<T> {}

impl<T: Send + 'static> Stream for ConcatenateStream<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match ready!(this.current.as_mut().poll_next(cx)) {
                Some(item) => return Poll::Ready(Some(item)),
                None => match this.second.take() {
                    Some((second, ctx)) => {
                        this.current = second.build(&ctx);
                        this.phase = 1;
                    }
                    None => return Poll::Ready(None),
                },
            }
        }
    }
}

impl<T: Send + 'static> Resumable for ConcatenateStream<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        Ok(State::new(STAGE)
            .words([this.phase])
            .input(this.current.as_mut().save()?))
    }

    /// The input's position, with the input's index.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.current.last_prov()?.keyed(&Prov::at(self.phase))
    }
}
