use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{Stream, StreamExt};

use crate::checkpoint::Opaque;
use crate::dataset::{BoxStream, Cardinality, Dataset};

fn min_cardinality(cards: impl IntoIterator<Item = Cardinality>) -> Cardinality {
    cards
        .into_iter()
        .fold(Cardinality::Infinite, |acc, c| match (acc, c) {
            (Cardinality::Finite(a), Cardinality::Finite(b)) => Cardinality::Finite(a.min(b)),
            (Cardinality::Finite(a), _) | (_, Cardinality::Finite(a)) => Cardinality::Finite(a),
            (Cardinality::Unknown, _) | (_, Cardinality::Unknown) => Cardinality::Unknown,
            _ => Cardinality::Infinite,
        })
}

pub(crate) fn zip<A: Send + 'static, B: Send + 'static>(
    a: Dataset<A>,
    b: Dataset<B>,
) -> Dataset<(A, B)> {
    let card = match (a.cardinality(), b.cardinality()) {
        // With one side unknown, the shorter side is unknown too.
        (Cardinality::Unknown, _) | (_, Cardinality::Unknown) => Cardinality::Unknown,
        (x, y) => min_cardinality([x, y]),
    };
    let options = a.options().merge(b.options());
    let depth = a.depth().max(b.depth()) + 1;
    Dataset::stage("zip", card, options, depth, move |ctx| {
        let zipped = ZipAll::new(vec![
            Box::pin(Opaque::new(a.build(ctx).map(|r| r.map(Either::A)), "zip")),
            Box::pin(Opaque::new(b.build(ctx).map(|r| r.map(Either::B)), "zip")),
        ]);
        Box::pin(zipped.map(|r| {
            r.and_then(|mut v| match (v.pop(), v.pop()) {
                (Some(Either::B(y)), Some(Either::A(x))) => Ok((x, y)),
                _ => Err(anyhow::anyhow!("zip: internal error: misaligned inputs")),
            })
        }))
    })
}

enum Either<A, B> {
    A(A),
    B(B),
}

pub(crate) fn zip_all<T: Send + 'static>(datasets: Vec<Dataset<T>>) -> Dataset<Vec<T>> {
    let card = if datasets
        .iter()
        .any(|d| d.cardinality() == Cardinality::Unknown)
    {
        Cardinality::Unknown
    } else {
        min_cardinality(datasets.iter().map(Dataset::cardinality))
    };
    let options = datasets
        .iter()
        .fold(crate::Options::default(), |o, d| o.merge(d.options()));
    let depth = datasets.iter().map(Dataset::depth).max().unwrap_or(0) + 1;
    Dataset::stage("zip", card, options, depth, move |ctx| {
        Box::pin(ZipAll::new(datasets.iter().map(|d| d.build(ctx)).collect()))
    })
}

/// Stream for the [`zip`](crate::Dataset::zip) and [`zip_all`](crate::Dataset::zip_all) methods.
///
/// As tf.data's zip, every step takes one item from each input, even when an earlier input's
/// item is an error, so the inputs stay in step: a step with an error yields its first error
/// and drops the other inputs' items.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ZipAll<T> {
    inputs: Vec<BoxStream<T>>,
    /// One item waiting from each input.
    slots: Vec<Option<anyhow::Result<T>>>,
    done: bool,
}

// Elements are never pinned in place.
impl<T> Unpin for ZipAll<T> {}

impl<T> ZipAll<T> {
    pub(crate) fn new(inputs: Vec<BoxStream<T>>) -> Self {
        let slots = inputs.iter().map(|_| None).collect();
        let done = inputs.is_empty();
        ZipAll {
            inputs,
            slots,
            done,
        }
    }
}

impl<T> Stream for ZipAll<T> {
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let mut pending = false;
        for (input, slot) in this.inputs.iter_mut().zip(this.slots.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            match input.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => *slot = Some(item),
                Poll::Ready(None) => {
                    // One input has ended: so has the zip. An error already taken from
                    // another input in this step is still reported.
                    this.done = true;
                    let error = this.slots.iter_mut().find_map(|s| s.take()?.err());
                    this.slots.iter_mut().for_each(|s| *s = None);
                    return Poll::Ready(error.map(Err));
                }
                Poll::Pending => pending = true,
            }
        }
        if pending {
            return Poll::Pending;
        }
        // Empty every slot before looking for an error, so the next step starts afresh.
        let items: Vec<anyhow::Result<T>> =
            this.slots.iter_mut().filter_map(Option::take).collect();
        Poll::Ready(Some(items.into_iter().collect()))
    }
}
