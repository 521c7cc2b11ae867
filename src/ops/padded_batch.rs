//! Saved state: `[index of the next batch]`, and the state of its `batch` step (see
//! `batch::build_with`).

use crate::engine::{BoxStream, Ctx, Dataset, error_stream};
use crate::ops::batch::{self, Batch, Config, Sizes};
use crate::ops::collate::{self, CollateBatches};
use crate::tensor::PaddedCollate;

/// The stream of one epoch of the [`padded_batch`](crate::Dataset::padded_batch) method:
/// `batch` (fresh, restored or in replay), then each batch padded and stacked.
#[allow(clippy::type_complexity)]
pub(crate) fn build<T>(
    ctx: &Ctx,
    input: &Dataset<T>,
    batch_size: usize,
    drop_remainder: bool,
    shapes: Option<T::PaddedShapes>,
    values: T::PaddingValues,
) -> CollateBatches<Batch<BoxStream<T>, T>, impl Fn(Vec<T>) -> anyhow::Result<T::Batch> + use<T>>
where
    T: PaddedCollate + Send + 'static,
{
    let config = Config {
        sizes: Sizes::One(batch_size),
        drop_remainder,
        stage: "batch",
    };
    let batches = batch::build_with(
        &ctx.for_input(0),
        &|ctx: &Ctx| input.build(ctx),
        error_stream,
        config,
    );
    collate::build(ctx, batches, "padded_batch", move |batch: Vec<T>| {
        T::padded_collate_components(batch.iter(), shapes.as_ref(), &values, None, 0)
    })
}
