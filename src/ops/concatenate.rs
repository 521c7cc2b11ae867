//! Saved state: `[0 while the first input is read, 1 the second]` and that input's state.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::checkpoint::{Prov, State};
use crate::engine::{BoxStream, Cardinality, Counting, Ctx, Dataset, error_stream};
use crate::engine::{Resumable, Routed};

const STAGE: &str = "concatenate";

/// Builds [`concatenate`](crate::Dataset::concatenate): the second input's stream is built
/// only when the first ends, so it starts no work early.
pub(crate) fn concatenate<T: Send + 'static>(
    first: &Dataset<T>,
    second: &Dataset<T>,
) -> Dataset<T> {
    let card = match (first.cardinality(), second.cardinality()) {
        (Cardinality::Finite(a), Cardinality::Finite(b)) => {
            Cardinality::Finite(a.saturating_add(b))
        }
        (Cardinality::Infinite, _) | (_, Cardinality::Infinite) => Cardinality::Infinite,
        _ => Cardinality::Unknown,
    };
    let options = first.options().merge(second.options());
    let depth = first.depth().max(second.depth()) + 1;
    let (a, b) = (first.clone(), second.clone());
    Dataset::stage_resumable(STAGE, card, options, depth, Counting::Wrapped, move |ctx| {
        build(ctx, &a, &b)
    })
    .keyed(first.fingerprint())
    .keyed(second.fingerprint())
    .resumable(first.is_resumable() && second.is_resumable())
    .small(first.is_small() && second.is_small())
}

/// The concatenation of one epoch: fresh, restored (in either input), or in replay (each
/// position's last word names the input).
fn build<T: Send + 'static>(ctx: &Ctx, a: &Dataset<T>, b: &Dataset<T>) -> Concatenate<T> {
    let inputs = [a, b];
    let small = a.is_small() && b.is_small();
    let resumable = a.is_resumable() && b.is_resumable();
    let ctx = &ctx.for_merged(small);
    if let Some(provs) = ctx.replaying() {
        let phase = ctx.restoring().and_then(|s| s.word(0).ok());
        let routed = Routed::new(provs, 2, STAGE, |i, list| {
            // The input being read at the checkpoint sees its saved state (a replaying
            // stage may take its seed from it).
            let ctx = match phase {
                Some(p) if p == i as u64 => ctx.for_input(0),
                _ => ctx.fresh(),
            };
            inputs[i].build(&ctx.with_replay(list))
        });
        let current = match routed {
            Ok(routed) => Box::pin(routed),
            Err(e) => error_stream(e),
        };
        return Concatenate {
            current,
            second: None,
            phase: 0,
            replaying: true,
            small,
            resumable,
        };
    }
    let phase = match ctx.restoring().map(|s| s.word(0)).transpose() {
        Ok(phase) => phase.unwrap_or(0),
        Err(e) => {
            return Concatenate {
                current: error_stream(e),
                second: None,
                phase: 0,
                replaying: false,
                small,
                resumable,
            };
        }
    };
    if phase == 0 {
        Concatenate {
            current: a.build(&ctx.for_input(0)),
            second: Some((b.clone(), ctx.fresh())),
            phase,
            replaying: false,
            small,
            resumable,
        }
    } else {
        Concatenate {
            current: b.build(&ctx.for_input(0)),
            second: None,
            phase,
            replaying: false,
            small,
            resumable,
        }
    }
}

/// Stream for the [`concatenate`](crate::Dataset::concatenate) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Concatenate<T> {
    current: BoxStream<T>,
    /// The second input, until it is built.
    second: Option<(Dataset<T>, Ctx)>,
    /// Which input `current` is.
    phase: u64,
    replaying: bool,
    /// Both inputs' (the stream's answers must not change when it moves to the second).
    small: bool,
    resumable: bool,
}

impl<T> Unpin for Concatenate<T> {}

impl<T: Send + 'static> Stream for Concatenate<T> {
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

impl<T: Send + 'static> Resumable for Concatenate<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        Ok(State::new(STAGE)
            .words([this.phase])
            .input(this.current.as_mut().save()?))
    }

    /// The input's position, with the input's index.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        let prov = self.current.last_prov()?;
        if self.replaying {
            return Ok(prov);
        }
        prov.keyed(&Prov::at(self.phase))
    }

    fn is_small(&self) -> bool {
        self.small
    }

    fn resumable(&self) -> bool {
        self.resumable
    }
}
