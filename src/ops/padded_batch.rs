use futures::stream::Stream;

use crate::dataset::BoxStream;
use crate::ops::batch::Batch;
use crate::ops::collate::CollateBatches;
use crate::tensor::PaddedCollate;

/// Stream for the [`padded_batch`](crate::Dataset::padded_batch) method: `batch`, then each
/// batch padded and stacked.
pub(crate) fn padded_batch<T>(
    input: BoxStream<T>,
    batch_size: usize,
    drop_remainder: bool,
    shapes: Option<T::PaddedShapes>,
    values: T::PaddingValues,
) -> impl Stream<Item = anyhow::Result<T::Batch>>
where
    T: PaddedCollate,
{
    CollateBatches::new(
        Batch::plain(input, batch_size, drop_remainder),
        "padded_batch",
        move |batch: Vec<T>| {
            T::padded_collate_components(batch.iter(), shapes.as_ref(), &values, None, 0)
        },
    )
}
