//! Saved state: `[index of the next batch]`, and the state of its `batch` step (see
//! `batch::build_with`).

use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Start};
use crate::ops::batch::{self, Config, Sizes};
use crate::ops::collate::{self, CollateBatches};
use crate::tensor::RaggedCollate;

/// The [`ragged_batch`](crate::Dataset::ragged_batch) operation.
#[derive(Hash)]
pub(crate) struct RaggedBatch {
    pub(crate) size: usize,
    pub(crate) drop_remainder: bool,
}

impl<T> Operation<T> for RaggedBatch
where
    T: RaggedCollate + Send + 'static,
    T::Ragged: Send + 'static,
{
    type Out = T::Ragged;
    type Stream = BoxStream<T::Ragged>;
    const NAME: &'static str = "ragged_batch";

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        batch::cardinality(input, self.size as u64, self.drop_remainder)
    }

    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(Box::pin(build(
            ctx,
            input.dataset(),
            self.size,
            self.drop_remainder,
        )))
    }
}

/// The stream of one epoch of the [`ragged_batch`](crate::Dataset::ragged_batch) method:
/// `batch` (fresh, restored or in replay), then each batch's rows concatenated with their
/// row splits.
#[allow(clippy::type_complexity)]
fn build<T>(
    ctx: &Ctx,
    input: &Dataset<T>,
    batch_size: usize,
    drop_remainder: bool,
) -> CollateBatches<BoxStream<Vec<T>>, impl Fn(Vec<T>) -> anyhow::Result<T::Ragged> + use<T>>
where
    T: RaggedCollate + Send + 'static,
{
    let config = Config {
        sizes: Sizes::One(batch_size),
        drop_remainder,
        stage: "batch",
    };
    let batches = batch::batches(
        &ctx.for_input(0),
        &|ctx: &Ctx| input.build(ctx),
        input.answers(ctx),
        config,
    );
    collate::build(ctx, batches, "ragged_batch", |batch: Vec<T>| {
        T::ragged_collate(&batch)
    })
}
