//! Saved state: `[index of the next batch]`, and the state of its `batch` step (see
//! `batch::build_with`).

use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Start, Unkeyed};
use crate::ops::batch::{self, Config, Sizes};
use crate::ops::collate::{self, CollateBatches};
use crate::tensor::PaddedCollate;

/// The [`padded_batch`](crate::Dataset::padded_batch) operation. The padded shapes and
/// padding values are not keyed (they need not be hashable): resume with the same ones.
pub(crate) struct PaddedBatch<T: PaddedCollate> {
    pub(crate) size: usize,
    pub(crate) drop_remainder: bool,
    pub(crate) shapes: Unkeyed<Option<T::PaddedShapes>>,
    pub(crate) values: Unkeyed<T::PaddingValues>,
}

crate::engine::keyed_fields!(impl[T: PaddedCollate] PaddedBatch<T> { keyed: [size, drop_remainder], unkeyed: [shapes, values] });

impl<T> Operation<T> for PaddedBatch<T>
where
    T: PaddedCollate + Send + 'static,
    T::Batch: Send + 'static,
{
    type Out = T::Batch;
    type Stream = BoxStream<T::Batch>;
    const NAME: &'static str = "padded_batch";

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        batch::cardinality(input, self.size as u64, self.drop_remainder)
    }

    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(Box::pin(build(
            ctx,
            input.dataset(),
            self.size,
            self.drop_remainder,
            self.shapes.0.clone(),
            self.values.0.clone(),
        )))
    }
}

/// The stream of one epoch of the [`padded_batch`](crate::Dataset::padded_batch) method:
/// `batch` (fresh, restored or in replay), then each batch padded and stacked.
#[allow(clippy::type_complexity)]
fn build<T>(
    ctx: &Ctx,
    input: &Dataset<T>,
    batch_size: usize,
    drop_remainder: bool,
    shapes: Option<T::PaddedShapes>,
    values: T::PaddingValues,
) -> CollateBatches<BoxStream<Vec<T>>, impl Fn(Vec<T>) -> anyhow::Result<T::Batch> + use<T>>
where
    T: PaddedCollate + Send + 'static,
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
    collate::build(ctx, batches, "padded_batch", move |batch: Vec<T>| {
        T::padded_collate_components(batch.iter(), shapes.as_ref(), &values, None, 0)
    })
}
