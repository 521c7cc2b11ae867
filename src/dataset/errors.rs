//! Error elements: `ignore_errors` and `ignore_errors_within`.

use crate::engine::{Cardinality, Counting, Dataset};
use crate::ops;

impl<T: Send + 'static> Dataset<T> {
    /// Drops error elements (tf.data's `ignore_errors`). Sources whose damage leaves the rest
    /// unreadable (a corrupt file) end that file after the error, so this goes on with the next.
    pub fn ignore_errors(&self) -> Dataset<T> {
        self.then(ops::ignore_errors::IgnoreErrors)
    }

    /// Skips error elements within an error `budget`, and fails the epoch past it: tf.data's
    /// [`ignore_errors`](Dataset::ignore_errors) with SPDL's `max_failures` (a count,
    /// [`ErrorBudget::count`](crate::ErrorBudget::count), or a rate,
    /// [`ErrorBudget::rate`](crate::ErrorBudget::rate)). Every skipped element is reported to
    /// the budget's [`Quarantine`](crate::Quarantine) (a JSON-lines file or a callback: the
    /// file or URL, record index and byte offset of damaged data, the element's index, the
    /// error) and counted in the stage's statistics
    /// ([`StageSnapshot::skipped`](crate::StageSnapshot::skipped)).
    ///
    /// Place it at the end of a pipeline for a budget of the whole pipeline (errors travel
    /// downstream as elements: a reader's damaged records, a `map`'s or `map_parallel`'s
    /// failed calls), or right after a stage for a budget of that stage. Every reader's errors
    /// come through it: TFRecord, text, CSV and fixed-length files yield an
    /// [`Error::DataLoss`](crate::Error) for damage and then end that file (as in
    /// TensorFlow), except a TFRecord file read with
    /// [`resync`](crate::format::TFRecordDataset::resync), which goes on after the damage, so
    /// that a flipped bit costs one record. See the guide's [Damaged data](crate::guide::damaged_data).
    ///
    /// # Examples
    ///
    /// ```
    /// use streamload::{Dataset, ErrorBudget, Quarantine};
    /// use std::sync::{Arc, Mutex};
    /// # tokio_test::block_on(async {
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&seen);
    /// let budget = ErrorBudget::count(2)
    ///     .quarantine(Quarantine::callback(move |s| log.lock().unwrap().push(s.index)));
    /// let parsed = Dataset::from_iter(["1", "x", "3", "y"])
    ///     .try_map(|s| Ok(s.parse::<i64>()?))
    ///     .ignore_errors_within(budget.clone());
    /// assert_eq!(parsed.collect().await?, [1, 3]);
    /// assert_eq!(*seen.lock().unwrap(), [1, 3], "the indices of the skipped elements");
    ///
    /// // A third error exhausts the budget: the epoch ends with an error summing it up.
    /// let err = Dataset::from_iter(["x", "y", "z", "4"])
    ///     .try_map(|s| Ok(s.parse::<i64>()?))
    ///     .ignore_errors_within(ErrorBudget::count(2))
    ///     .collect()
    ///     .await
    ///     .unwrap_err();
    /// assert!(format!("{err:#}").contains("error budget exhausted (at most 2 errors)"));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// The error that exceeds the budget, in the context of a summary ("error budget
    /// exhausted (...): N errors in M elements; damaged files: ...; first skipped: ..."),
    /// after which the epoch ends. The error keeps its type (`downcast_ref` finds a
    /// `DataLoss`).
    ///
    /// # Checkpoints
    ///
    /// Resumable: the counts of elements seen and errors skipped are saved, so a resumed epoch
    /// goes on with the budget where it was (the summary's lists start afresh).
    pub fn ignore_errors_within(&self, budget: crate::ErrorBudget) -> Dataset<T> {
        let key = budget.key();
        self.unary_with(
            "ignore_errors_within",
            Cardinality::Unknown,
            Counting::Wrapped,
            move |ctx, input| ops::ignore_errors_within::build(ctx, input, &budget),
        )
        .keyed(key)
    }
}
