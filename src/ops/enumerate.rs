use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::checkpoint::{Prov, State};
use crate::engine::{
    BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Resumable, Start, error_stream,
};
use futures::stream::Stream;
use pin_project::pin_project;

/// The [`enumerate`](crate::Dataset::enumerate) operation: each element with its index, from
/// `start`.
#[derive(Hash)]
pub(crate) struct Enumerate {
    pub(crate) start: i64,
}

impl<T: Send + 'static> Operation<T> for Enumerate {
    type Out = (i64, T);
    type Stream = EnumerateStream<BoxStream<T>>;
    const NAME: &'static str = "enumerate";

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    /// Saved state: `[the next index]` and the input's. In replay, each position carries the
    /// index it gave the element as its last word.
    fn open(&self, _: &Ctx, input: Input<'_, T>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let (next, input) = match start {
            Start::Fresh => (self.start, input.open()),
            Start::Restore(state) => (state.word(0)? as i64, input.open()),
            Start::Replay(provs) => {
                let (indices, inner): (Vec<u64>, Vec<Prov>) = provs
                    .iter()
                    .map(|p| p.split_key().and_then(|(i, rest)| Ok((i.single()?, rest))))
                    .collect::<anyhow::Result<_>>()?;
                return Ok(EnumerateStream {
                    input: input.replay(inner.into()),
                    next: 0,
                    replayed: Some((indices, 0)),
                });
            }
        };
        Ok(EnumerateStream {
            input,
            next,
            replayed: None,
        })
    }
}

/// `input` numbered from `start`, as the stage `ctx` builds (inside another operation).
pub(crate) fn build<T: Send + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    start: i64,
) -> BoxStream<(i64, T)> {
    let op = Enumerate { start };
    match Operation::<T>::open(&op, ctx, Input::new(input, ctx), ctx.start()) {
        Ok(stream) => Box::pin(stream),
        Err(e) => error_stream(e),
    }
}

/// Stream for the [`enumerate`](crate::Dataset::enumerate) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct EnumerateStream<St> {
    #[pin]
    input: St,
    next: i64,
    /// In replay: the saved index of each element, and how many were yielded.
    replayed: Option<(Vec<u64>, usize)>,
}

impl<St, T> Stream for EnumerateStream<St>
where
    St: Stream<Item = anyhow::Result<T>>,
{
    type Item = anyhow::Result<(i64, T)>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        // tf.data's enumerate is a zip with a counter, which advances for error elements too.
        Poll::Ready(ready!(this.input.poll_next(cx)).map(|r| {
            let i = match this.replayed {
                Some((indices, n)) => {
                    let i = indices.get(*n).map_or(0, |&i| i as i64);
                    *n += 1;
                    i
                }
                None => *this.next,
            };
            *this.next = i.wrapping_add(1);
            r.map(|x| (i, x))
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.input.size_hint()
    }
}

impl<St: Resumable> Resumable for EnumerateStream<St> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let next = self.next as u64;
        Ok(State::new("enumerate")
            .words([next])
            .input(self.project().input.save()?))
    }

    /// The input's position, with the index this stage gave the element.
    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.input
            .last_prov()?
            .keyed(&Prov::at(self.next.wrapping_sub(1) as u64))
    }
}
