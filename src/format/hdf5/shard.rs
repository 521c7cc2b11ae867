//! HDF5 files as a [`ShardSource`] for data-parallel ranks: counted from the datasets'
//! shapes, read from any row (a rank's run of rows starts where it starts, reading only
//! the chunks from there), so [`ShardPolicy::Record`](crate::distribute::ShardPolicy::Record)
//! deals each rank an equal run of rows, across file boundaries.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt, TryStreamExt};

use super::{ArrayD, Element, Hdf5Dataset, OPEN_AT_ONCE, STAGE, open_hdf5};
use crate::Dataset;
use crate::distribute::{ShardSource, Unit};
use crate::runtime;
use crate::storage;

/// The rows (or slices) of an [`Hdf5Dataset`] as a [`ShardSource`]: made by
/// [`Hdf5Dataset::shard_source`] or [`Hdf5Dataset::shard_source_labeled`]; an element is
/// what the dataset's `build` (or `build_labeled`) yields.
pub struct Hdf5Shards<Out> {
    config: Hdf5Dataset,
    build: Arc<dyn Fn(Hdf5Dataset) -> Dataset<Out> + Send + Sync>,
}

impl<Out> Clone for Hdf5Shards<Out> {
    fn clone(&self) -> Self {
        Hdf5Shards {
            config: self.config.clone(),
            build: Arc::clone(&self.build),
        }
    }
}

impl<Out> std::fmt::Debug for Hdf5Shards<Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hdf5Shards")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Hdf5Dataset {
    /// This dataset as a [`ShardSource`] for
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
        Hdf5Shards {
            config: self,
            build: Arc::new(|config: Hdf5Dataset| config.build::<T>()),
        }
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
        Hdf5Shards {
            config: self,
            build: Arc::new(|config: Hdf5Dataset| config.build_labeled::<T, L>()),
        }
    }
}

impl<Out: Send + 'static> ShardSource for Hdf5Shards<Out> {
    type Item = Out;

    fn names(&self) -> Vec<String> {
        self.config.files.iter().map(ToString::to_string).collect()
    }

    /// Each file's rows (or slices): its superblock and the dataset's header are read, a few
    /// files at once, nothing of the data.
    fn count(&self) -> BoxFuture<'_, anyhow::Result<Vec<u64>>> {
        let path = self.config.dataset.clone();
        let slices = self.config.slices;
        let patches = self.config.patches.as_ref().map(|p| p.per_file);
        let select = self.config.select.clone();
        Box::pin(
            stream::iter(self.config.files.clone())
                .map(move |location| {
                    let (path, select) = (path.clone(), select.clone());
                    async move {
                        let identity = storage::identity(&location).await?;
                        let handle = tokio::runtime::Handle::current();
                        let task = runtime::spawn_blocking(STAGE, move || {
                            let file = open_hdf5(&location, identity, handle)?;
                            let data = file.dataset(&path).map_err(|e| {
                                anyhow::anyhow!("{location}: no dataset `{path}` ({e})")
                            })?;
                            let rows = data.shape().first().copied().ok_or_else(|| {
                                anyhow::anyhow!(
                                    "{location}: dataset `{path}` is a scalar: it has no rows"
                                )
                            })?;
                            let rows = match select.as_ref().and_then(|r| r.first()) {
                                Some(r) if r.start <= r.end && r.end <= rows => r.end - r.start,
                                Some(r) => anyhow::bail!(
                                    "{location}: dataset `{path}`: the selected rows {r:?} are \
                                     outside its {rows} rows"
                                ),
                                None => rows,
                            };
                            if let Some(per_file) = patches {
                                return anyhow::Ok(per_file);
                            }
                            anyhow::Ok(slices.map_or(rows, |k| rows.div_ceil(k)))
                        })?;
                        task.await.map_err(|e| runtime::join_error(STAGE, e))?
                    }
                })
                .buffered(OPEN_AT_ONCE)
                .try_collect(),
        )
    }

    /// Rows (or slices) `unit.start..unit.end` of the file (of its selected rows, with
    /// [`select`](Hdf5Dataset::select)): only the chunks holding them are
    /// read, blocks starting at `unit.start`.
    fn read(&self, unit: Unit) -> Dataset<Out> {
        let mut config = self.config.clone();
        config.files = vec![config.files[unit.file].clone()];
        config.shard = (1, 0);
        // Rows, or runs of k rows; patches by their index in the file's draw.
        let k = config.slices.unwrap_or(1);
        config.only_rows = Some(match config.patches {
            Some(_) => unit.start..unit.end,
            None => unit.start.saturating_mul(k)..unit.end.saturating_mul(k),
        });
        (self.build)(config)
    }

    fn seekable_records(&self) -> bool {
        true
    }
}
