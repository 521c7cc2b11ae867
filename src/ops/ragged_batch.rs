use futures::stream::Stream;

use crate::dataset::BoxStream;
use crate::ops::batch::Batch;
use crate::ops::collate::CollateBatches;
use crate::tensor::RaggedCollate;

/// Stream for the [`ragged_batch`](crate::Dataset::ragged_batch) method: `batch`, then each
/// batch's rows concatenated with their row splits.
pub(crate) fn ragged_batch<T>(
    input: BoxStream<T>,
    batch_size: usize,
    drop_remainder: bool,
) -> impl Stream<Item = anyhow::Result<T::Ragged>>
where
    T: RaggedCollate,
{
    CollateBatches::new(
        Batch::plain(input, batch_size, drop_remainder),
        "ragged_batch",
        |batch: Vec<T>| T::ragged_collate(&batch),
    )
}
