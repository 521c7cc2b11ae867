//! Saved state: `[index of the next batch]`, and the state of its `batch` step (see
//! `batch::build_with`).

use crate::engine::{BoxStream, Ctx, Dataset, error_stream};
use crate::ops::batch::{self, Batch, Config, Sizes};
use crate::ops::collate::{self, CollateBatches};
use crate::tensor::RaggedCollate;

/// The stream of one epoch of the [`ragged_batch`](crate::Dataset::ragged_batch) method:
/// `batch` (fresh, restored or in replay), then each batch's rows concatenated with their
/// row splits.
#[allow(clippy::type_complexity)]
pub(crate) fn build<T>(
    ctx: &Ctx,
    input: &Dataset<T>,
    batch_size: usize,
    drop_remainder: bool,
) -> CollateBatches<Batch<BoxStream<T>, T>, impl Fn(Vec<T>) -> anyhow::Result<T::Ragged> + use<T>>
where
    T: RaggedCollate + Send + 'static,
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
    collate::build(ctx, batches, "ragged_batch", |batch: Vec<T>| {
        T::ragged_collate(&batch)
    })
}
