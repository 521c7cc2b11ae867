//! Saved state: `[0 while the first input is read, 1 the second]` and that input's state.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Combine, Ctx, Dataset, Inputs, OrReplay, Start};
use crate::engine::{Resumable, Routed};

const STAGE: &str = "concatenate";

/// The [`concatenate`](crate::Dataset::concatenate) operation: the second input's stream is
/// built only when the first ends, so it starts no work early.
#[derive(Hash)]
pub(crate) struct Concatenate;

impl<T: Send + 'static> Combine<T> for Concatenate {
    type Out = T;
    type Stream = OrReplay<ConcatenateStream<T>, T>;
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

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, inputs: Inputs<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(build(ctx, inputs.dataset(0), inputs.dataset(1)))
    }
}

/// The concatenation of one epoch: fresh, restored (in either input), or in replay (each
/// position's last word names the input).
fn build<T: Send + 'static>(
    ctx: &Ctx,
    a: &Dataset<T>,
    b: &Dataset<T>,
) -> OrReplay<ConcatenateStream<T>, T> {
    let inputs = [a, b];
    let small = a.is_small() && b.is_small();
    let ctx = &ctx.for_merged(small);
    let phase = ctx.restoring().map(|s| s.word(0)).transpose();
    if let Some(provs) = ctx.replaying() {
        return OrReplay::replay(Routed::new(provs, 2, STAGE, |i, list| {
            // The input being read at the checkpoint sees its saved state (a replaying
            // stage may take its seed from it).
            let ctx = match phase {
                Ok(Some(p)) if p == i as u64 => ctx.for_input(0),
                _ => ctx.fresh(),
            };
            inputs[i].build(&ctx.with_replay(list))
        }));
    }
    let phase = match phase {
        Ok(phase) => phase.unwrap_or(0),
        Err(e) => return OrReplay::error(e),
    };
    let (current, second) = match phase {
        0 => (a.build(&ctx.for_input(0)), Some((b.clone(), ctx.fresh()))),
        _ => (b.build(&ctx.for_input(0)), None),
    };
    OrReplay::Own(ConcatenateStream {
        current,
        second,
        phase,
    })
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
