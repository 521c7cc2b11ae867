//! Saved state: `[1 once the predicate has failed, else 0]` and the input's state.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::{Resumable, State};
use crate::dataset::{BoxStream, Ctx, Dataset, error_stream};

/// The take_while of one epoch: fresh, restored (ended or not), or in replay (every element
/// replayed passed).
pub(crate) fn build<T: Send + 'static, P>(
    ctx: &Ctx,
    input: &Dataset<T>,
    predicate: Arc<P>,
) -> TakeWhile<BoxStream<T>, P> {
    let done = match ctx.restoring().filter(|_| ctx.replaying().is_none()) {
        None => false,
        Some(state) => match state.word(0) {
            Ok(done) => done == 1,
            Err(e) => return TakeWhile::new(error_stream(e), predicate),
        },
    };
    let mut take_while = TakeWhile::new(input.build(&ctx.for_input(0)), predicate);
    take_while.done = done;
    take_while
}

/// Stream for the [`take_while`](crate::Dataset::take_while) method.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct TakeWhile<St, P> {
    #[pin]
    input: St,
    predicate: Arc<P>,
    done: bool,
}

impl<St, P> TakeWhile<St, P> {
    pub(crate) fn new(input: St, predicate: Arc<P>) -> Self {
        TakeWhile {
            input,
            predicate,
            done: false,
        }
    }
}

impl<St, P, T> Stream for TakeWhile<St, P>
where
    St: Stream<Item = anyhow::Result<T>>,
    P: Fn(&T) -> bool,
{
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        match ready!(this.input.poll_next(cx)) {
            Some(Ok(x)) if (this.predicate)(&x) => Poll::Ready(Some(Ok(x))),
            Some(Ok(_)) => {
                *this.done = true;
                Poll::Ready(None)
            }
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => {
                *this.done = true;
                Poll::Ready(None)
            }
        }
    }
}

impl<St: Resumable, P> Resumable for TakeWhile<St, P> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let done = u64::from(self.done);
        Ok(State::new("take_while")
            .words([done])
            .input(self.project().input.save()?))
    }

    crate::checkpoint::positions_of_input!();
}
