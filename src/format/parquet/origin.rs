//! Where a batch was read: its file and the index of its first row in the file, carried in
//! the batch's schema metadata so that whatever converts its columns can name the row of a
//! bad value in the file ([`BatchOrigin`]).

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::Schema;

/// The schema metadata key of the file a batch was read from (as it was given, without
/// credentials).
pub const FILE_KEY: &str = "streamload.file";
/// The schema metadata key of the index of a batch's first row in its file (from 0, counted
/// from the file's first row, across its row groups).
pub const FIRST_ROW_KEY: &str = "streamload.first_row";

/// Where a batch of [`ParquetDataset`](super::ParquetDataset) was read: its file (the path
/// or URL as given, without credentials) and the index of its first row in the file (from
/// 0, counted over all the file's row groups, whichever columns and shard were read).
///
/// Every batch the dataset yields carries it in its schema's metadata (keys [`FILE_KEY`] and
/// [`FIRST_ROW_KEY`]); [`column_tensor`](super::column_tensor) and
/// [`column_view`](super::column_view) name the file and the row of a null or a ragged list
/// with it.
///
/// ```
/// use std::sync::Arc;
/// use streamload::format::parquet::{BatchOrigin, RecordBatch};
/// use streamload::format::parquet::arrow_array::{ArrayRef, Int64Array};
///
/// let id: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
/// let batch = RecordBatch::try_from_iter([("id", id)])?;
/// // A batch made by hand was read from nowhere.
/// assert_eq!(BatchOrigin::of(&batch), None);
/// # anyhow::Ok(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOrigin<'a> {
    /// The file, as given to the dataset (credentials left out of a URL).
    pub file: &'a str,
    /// The index of the batch's first row in the file, from 0.
    pub first_row: u64,
}

impl<'a> BatchOrigin<'a> {
    /// Where `batch` was read, if a [`ParquetDataset`](super::ParquetDataset) read it.
    pub fn of(batch: &'a RecordBatch) -> Option<BatchOrigin<'a>> {
        let metadata = batch.schema_ref().metadata();
        Some(BatchOrigin {
            file: metadata.get(FILE_KEY)?,
            first_row: metadata.get(FIRST_ROW_KEY)?.parse().ok()?,
        })
    }

    /// The index in the file of row `row` of the batch.
    pub fn row(&self, row: usize) -> u64 {
        self.first_row + row as u64
    }
}

/// `batches`, read in order from `file` starting at row `first_row` of it, each with its
/// origin in its schema's metadata (one schema per batch: no work per row).
pub(super) fn place(
    batches: Vec<RecordBatch>,
    file: &str,
    first_row: u64,
) -> Result<Vec<RecordBatch>, String> {
    let mut row = first_row;
    batches
        .into_iter()
        .map(|batch| {
            let (schema, columns, rows) = batch.into_parts();
            let mut metadata = schema.metadata().clone();
            // Over any origin the file's own metadata carries (a file written from batches
            // read here).
            metadata.insert(FILE_KEY.to_owned(), file.to_owned());
            metadata.insert(FIRST_ROW_KEY.to_owned(), row.to_string());
            row += rows as u64;
            let schema = Schema::new_with_metadata(schema.fields().clone(), metadata);
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            RecordBatch::try_new_with_options(Arc::new(schema), columns, &options)
                .map_err(|e| e.to_string())
        })
        .collect()
}
