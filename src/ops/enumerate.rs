use std::pin::Pin;
use std::task::{Context, Poll, ready};

use crate::checkpoint::{Prov, Resumable, State};
use crate::dataset::{BoxStream, Ctx, Dataset, error_stream};
use futures::stream::Stream;
use pin_project::pin_project;

/// Stream for the [`enumerate`](crate::Dataset::enumerate) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Enumerate<St> {
    #[pin]
    input: St,
    next: i64,
    /// In replay: the saved index of each element, and how many were yielded.
    replayed: Option<(Vec<u64>, usize)>,
}

impl<St> Enumerate<St> {
    pub(crate) fn new(input: St, start: i64) -> Self {
        Enumerate {
            input,
            next: start,
            replayed: None,
        }
    }
}

/// The stream of one epoch: fresh, restored (its counter saved), or replaying saved
/// positions (each with the index it gave the element as its last word).
pub(crate) fn build<T: Send + 'static>(
    ctx: &Ctx,
    input: &Dataset<T>,
    start: i64,
) -> Enumerate<BoxStream<T>> {
    if let Some(provs) = ctx.replaying() {
        let popped: anyhow::Result<(Vec<u64>, Vec<Prov>)> = provs
            .iter()
            .map(|p| p.split_key().and_then(|(i, rest)| Ok((i.single()?, rest))))
            .collect();
        return match popped {
            Ok((indices, inner)) => Enumerate {
                input: input.build(&ctx.for_input(0).with_replay(inner.into())),
                next: 0,
                replayed: Some((indices, 0)),
            },
            Err(e) => Enumerate::new(error_stream(e), start),
        };
    }
    let next = match ctx.restoring().map(|s| s.word(0)).transpose() {
        Ok(next) => next.map_or(start, |n| n as i64),
        Err(e) => return Enumerate::new(error_stream(e), start),
    };
    Enumerate::new(input.build(&ctx.for_input(0)), next)
}

impl<St, T> Stream for Enumerate<St>
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

impl<St: Resumable> Resumable for Enumerate<St> {
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

    fn is_small(&self) -> bool {
        self.input.is_small()
    }

    fn resumable(&self) -> bool {
        self.input.resumable()
    }
}
