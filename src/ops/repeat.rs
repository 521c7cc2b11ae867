use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use crate::dataset::{BoxStream, Cardinality, Ctx, Dataset};

/// `times`: `None` repeats forever, `Some(n)` `n` times.
pub(crate) fn dataset<T: Send + 'static>(input: &Dataset<T>, times: Option<u64>) -> Dataset<T> {
    // tf.data's RepeatDataset: forever is infinite unless the input is known to be empty.
    let card = match (times, input.cardinality()) {
        (Some(0), _) | (_, Cardinality::Finite(0)) => Cardinality::Finite(0),
        (None, _) => Cardinality::Infinite,
        (Some(c), Cardinality::Finite(n)) => Cardinality::Finite(n.saturating_mul(c)),
        (Some(_), other) => other,
    };
    let upstream = input.clone();
    Dataset::stage(
        "repeat",
        card,
        input.options().clone(),
        input.depth() + 1,
        move |ctx| {
            Box::pin(Repeat {
                dataset: upstream.clone(),
                ctx: ctx.clone(),
                remaining: times,
                current: None,
                produced: false,
            })
        },
    )
}

/// Stream for the [`repeat`](crate::Dataset::repeat) and [`repeat_n`](crate::Dataset::repeat_n)
/// methods: builds the upstream anew for
/// each repetition.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Repeat<T> {
    dataset: Dataset<T>,
    ctx: Ctx,
    /// Repetitions left to start; `None` repeats forever.
    remaining: Option<u64>,
    current: Option<BoxStream<T>>,
    /// Whether the current repetition has yielded anything.
    produced: bool,
}

impl<T: Send + 'static> Stream for Repeat<T> {
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
                    this.current.insert(this.dataset.build(&this.ctx))
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
