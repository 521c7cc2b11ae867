use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use crate::checkpoint::{Resumable, State};
use futures::stream::Stream;
use pin_project::{pin_project, pinned_drop};

use crate::stats::StageCounters;

/// Elements kept between two additions to the shared count.
const FLUSH_EVERY: u64 = 64;

/// Stream for the [`filter`](crate::Dataset::filter) method.
///
/// It counts itself (when the stage is not timed): the elements it keeps, added to the
/// stage's count every [`FLUSH_EVERY`], at the end and when dropped; errors as they pass.
#[pin_project(PinnedDrop)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Filter<St, P> {
    #[pin]
    input: St,
    predicate: Arc<P>,
    counters: Option<Arc<StageCounters>>,
    kept: u64,
}

impl<St, P> Filter<St, P> {
    pub(crate) fn new(input: St, predicate: Arc<P>, counters: Option<Arc<StageCounters>>) -> Self {
        Filter {
            input,
            predicate,
            counters,
            kept: 0,
        }
    }
}

#[cold]
#[inline(never)]
fn flush(counters: &Option<Arc<StageCounters>>, kept: &mut u64) {
    if let Some(counters) = counters {
        counters.add_elements(*kept);
    }
    *kept = 0;
}

#[cold]
#[inline(never)]
fn count_error(counters: &Option<Arc<StageCounters>>) {
    if let Some(counters) = counters {
        counters.add_own_error();
    }
}

#[pinned_drop]
impl<St, P> PinnedDrop for Filter<St, P> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        flush(this.counters, this.kept);
    }
}

impl<St, P, T> Stream for Filter<St, P>
where
    St: Stream<Item = anyhow::Result<T>>,
    P: Fn(&T) -> bool,
{
    type Item = anyhow::Result<T>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            match ready!(this.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => {
                    let p = &**this.predicate;
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p(&x))) {
                        Ok(true) => {
                            *this.kept += 1;
                            if *this.kept == FLUSH_EVERY {
                                flush(this.counters, this.kept);
                            }
                            return Poll::Ready(Some(Ok(x)));
                        }
                        Ok(false) => continue,
                        Err(payload) => {
                            count_error(this.counters);
                            let message = crate::error::panic_message(payload.as_ref());
                            return Poll::Ready(Some(Err(crate::Error::WorkerPanicked {
                                stage: "filter",
                                message,
                            }
                            .into())));
                        }
                    }
                }
                Some(Err(e)) => {
                    count_error(this.counters);
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    flush(this.counters, this.kept);
                    return Poll::Ready(None);
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.input.size_hint().1)
    }
}

impl<St: Resumable, P> Resumable for Filter<St, P> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Ok(State::new("filter").input(self.project().input.save()?))
    }

    crate::checkpoint::positions_of_input!();
}
