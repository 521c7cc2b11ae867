//! Zarr stores as a [`ShardSource`](crate::distribute::ShardSource) for data-parallel ranks: counted from the arrays'
//! shapes, read from any row (a rank's run of rows starts where it starts, reading only
//! the chunks from there), so [`ShardPolicy::Record`](crate::distribute::ShardPolicy::Record)
//! deals each rank an equal run of rows, across store boundaries.

use super::{ArrayD, Element, ZarrDataset};
use crate::format::arrays::{self, shard_source_type};

shard_source_type! {
/// The rows (or slices, chunks, patches) of a [`ZarrDataset`] as a [`ShardSource`](crate::distribute::ShardSource): made by
/// [`ZarrDataset::shard_source`] or [`ZarrDataset::shard_source_labeled`]; an element is
/// what the dataset's `build` (or `build_labeled`) yields.
ZarrShards, ZarrDataset
}

impl ZarrDataset {
    /// This dataset as a [`ShardSource`](crate::distribute::ShardSource) for
    /// [`Distribute::plan`](crate::distribute::Distribute::plan): each rank reads only its
    /// stores (by file) or an equal run of rows (by record: Zarr reads from any row), its
    /// elements those of [`build`](Self::build). Its own [`shard`](Self::shard) is ignored.
    ///
    /// ```
    /// use streamload::distribute::{Distribute, ShardPolicy};
    /// use streamload::format::zarr::ZarrDataset;
    ///
    /// # tokio_test::block_on(async {
    /// let stores = ["tests/data/zarr/scenes-0.zarr", "tests/data/zarr/scenes-1.zarr"]; // 50 + 37 rows
    /// let mut counts = Vec::new();
    /// for rank in 0..3 {
    ///     let source = ZarrDataset::new(stores, "labels").shard_source::<i64>();
    ///     let plan = Distribute::new(rank, 3).policy(ShardPolicy::Record).plan(source).await?;
    ///     counts.push(plan.dataset().collect().await?.len());
    /// }
    /// assert_eq!(counts, [29, 29, 29]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// When [`with_labels`](Self::with_labels) was set: use
    /// [`shard_source_labeled`](Self::shard_source_labeled).
    pub fn shard_source<T: Element>(self) -> ZarrShards<ArrayD<T>> {
        assert!(
            self.labels.is_none(),
            "ZarrDataset::shard_source: labels were set with `with_labels`; use \
             `shard_source_labeled`"
        );
        ZarrShards(arrays::shards::<_, T, T, _>(self, ZarrDataset::build::<T>))
    }

    /// As [`shard_source`](Self::shard_source), each element with its labels (those of
    /// [`build_labeled`](Self::build_labeled)).
    ///
    /// # Panics
    ///
    /// When no labels were set with [`with_labels`](Self::with_labels).
    pub fn shard_source_labeled<T: Element, L: Element>(
        self,
    ) -> ZarrShards<(ArrayD<T>, ArrayD<L>)> {
        assert!(
            self.labels.is_some(),
            "ZarrDataset::shard_source_labeled: no labels array: set one with `with_labels`"
        );
        ZarrShards(arrays::shards::<_, T, L, _>(
            self,
            ZarrDataset::build_labeled::<T, L>,
        ))
    }
}
