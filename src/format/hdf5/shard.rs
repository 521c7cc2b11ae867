//! HDF5 files as a [`ShardSource`](crate::distribute::ShardSource) for data-parallel ranks: counted from the datasets'
//! shapes, read from any row (a rank's run of rows starts where it starts, reading only
//! the chunks from there), so [`ShardPolicy::Record`](crate::distribute::ShardPolicy::Record)
//! deals each rank an equal run of rows, across file boundaries.

use super::{ArrayD, Element, Hdf5Dataset};
use crate::format::arrays::{self, shard_source_type};

shard_source_type! {
/// The rows (or slices) of an [`Hdf5Dataset`] as a [`ShardSource`](crate::distribute::ShardSource): made by
/// [`Hdf5Dataset::shard_source`] or [`Hdf5Dataset::shard_source_labeled`]; an element is
/// what the dataset's `build` (or `build_labeled`) yields.
Hdf5Shards, Hdf5Dataset
}

impl Hdf5Dataset {
    /// This dataset as a [`ShardSource`](crate::distribute::ShardSource) for
    /// [`Distribute::plan`](crate::distribute::Distribute::plan): each rank reads only its
    /// files (by file) or an equal run of rows (by record: HDF5 reads from any row), its
    /// elements those of [`build`](Self::build). Its own [`shard`](Self::shard) is ignored.
    ///
    /// ```
    /// use streamload::distribute::{Distribute, ShardPolicy};
    /// use streamload::format::hdf5::Hdf5Dataset;
    ///
    /// # tokio_test::block_on(async {
    /// let files = ["tests/data/hdf5/scenes-0.h5", "tests/data/hdf5/scenes-1.h5"]; // 50 + 37 rows
    /// let mut counts = Vec::new();
    /// for rank in 0..3 {
    ///     let source = Hdf5Dataset::new(files, "/scenes/labels").shard_source::<i64>();
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
    pub fn shard_source<T: Element>(self) -> Hdf5Shards<ArrayD<T>> {
        assert!(
            self.labels.is_none(),
            "Hdf5Dataset::shard_source: labels were set with `with_labels`; use \
             `shard_source_labeled`"
        );
        Hdf5Shards(arrays::shards::<_, T, T, _>(self, Hdf5Dataset::build::<T>))
    }

    /// As [`shard_source`](Self::shard_source), each element with its labels (those of
    /// [`build_labeled`](Self::build_labeled)).
    ///
    /// # Panics
    ///
    /// When no labels were set with [`with_labels`](Self::with_labels).
    pub fn shard_source_labeled<T: Element, L: Element>(
        self,
    ) -> Hdf5Shards<(ArrayD<T>, ArrayD<L>)> {
        assert!(
            self.labels.is_some(),
            "Hdf5Dataset::shard_source_labeled: no labels dataset: set one with `with_labels`"
        );
        Hdf5Shards(arrays::shards::<_, T, L, _>(
            self,
            Hdf5Dataset::build_labeled::<T, L>,
        ))
    }
}
