use futures::stream::{self, StreamExt};

use crate::dataset::{Cardinality, Dataset};

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
    Dataset::stage("concatenate", card, options, depth, move |ctx| {
        let (b, ctx2) = (b.clone(), ctx.clone());
        Box::pin(
            a.build(ctx)
                .chain(stream::once(async move { b.build(&ctx2) }).flatten()),
        )
    })
}
