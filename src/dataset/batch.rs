//! Elements into groups and back: the batches, `unbatch`, `rebatch`, windows, `group_by_window`,
//! and tensors in batches (stacked, padded, bucketed, ragged).

use std::sync::Arc;

use crate::engine::{Dataset, Unkeyed};
use crate::ops;
use crate::tensor::{Collate, PaddedCollate, RaggedCollate, Unbatch};

impl<T: Send + 'static> Dataset<T> {
    /// Groups consecutive elements into vectors of `batch_size`; the last may be shorter
    /// (tf.data's `batch(batch_size)`). An error element passes through at once and, as in
    /// tf.data, takes the partial batch being filled with it: the elements gathered before it
    /// are dropped, and the next batch starts after it.
    ///
    /// # Panics
    ///
    /// If `batch_size` is 0.
    pub fn batch(&self, batch_size: usize) -> Dataset<Vec<T>> {
        self.batch_with(batch_size, false)
    }

    /// Like [`batch`](Dataset::batch), dropping a final short batch (tf.data's
    /// `batch(batch_size, drop_remainder=True)`).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 7).batch_drop_remainder(3).collect().await?, [[0, 1, 2], [3, 4, 5]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn batch_drop_remainder(&self, batch_size: usize) -> Dataset<Vec<T>> {
        self.batch_with(batch_size, true)
    }

    /// Groups consecutive elements into batches of at most `max_tokens` tokens, an element
    /// counting for `length(&element)` (the token-budget batcher of variable-length training,
    /// fairseq's `max_tokens`): a batch is passed on when the next element would take it past
    /// the budget, and that element starts the next one. Batches hold whole elements, as many
    /// as fit; the sum of their lengths never exceeds `max_tokens`.
    ///
    /// An element longer than the budget is never cut: it is refused in its place with an
    /// `Error::InvalidArgument` saying its length, and the batch being filled goes on; an
    /// error element passes through at once too.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let docs = Dataset::from_vec(vec![vec![1; 3], vec![2; 4], vec![3; 2], vec![4; 5], vec![5; 1]]);
    /// let batches = docs.batch_by_tokens(8, |d| d.len()).collect().await?;
    /// let sizes: Vec<Vec<usize>> = batches.iter().map(|b| b.iter().map(Vec::len).collect()).collect();
    /// assert_eq!(sizes, [vec![3, 4], vec![2, 5, 1]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `max_tokens` is 0.
    pub fn batch_by_tokens(
        &self,
        max_tokens: usize,
        length: impl Fn(&T) -> usize + Send + Sync + 'static,
    ) -> Dataset<Vec<T>> {
        assert!(
            max_tokens > 0,
            "batch_by_tokens: the budget must be at least 1 token"
        );
        self.then(ops::batch_by_tokens::BatchByTokens {
            max_tokens,
            length: Unkeyed(Arc::new(length)),
        })
    }

    fn batch_with(&self, batch_size: usize, drop_remainder: bool) -> Dataset<Vec<T>> {
        assert!(
            batch_size > 0,
            "batch: Batch size must be greater than zero."
        );
        self.then(ops::batch::Batch {
            size: batch_size,
            drop_remainder,
        })
    }

    /// Splits every element into its rows (tf.data's `unbatch`): the items of a `Vec` batch,
    /// or the slices along the first dimension of the `ndarray` batches that
    /// [`collate`](Dataset::collate) and [`padded_batch`](Dataset::padded_batch) make (an
    /// `Array2<f32>` into `Array1<f32>`s, an `Array1<i64>` into `i64`s, a tuple of arrays into
    /// tuples of rows); see [`Unbatch`](crate::tensor::Unbatch) for every type. Cardinality:
    /// infinite for an infinite input, else unknown (tf.data knows more only from static
    /// shapes).
    ///
    /// ```
    /// use ndarray::{array, Array1};
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// assert_eq!(Dataset::range(0, 5).batch(2).unbatch().collect().await?, [0, 1, 2, 3, 4]);
    ///
    /// // Padded (or collated) batches split back into rows, as in tf.data.
    /// let seqs = Dataset::from_vec(vec![vec![1i64], vec![2, 2], vec![3, 3, 3]]);
    /// let rows: Vec<Array1<i64>> = seqs.padded_batch(2, None, None, false).unbatch().collect().await?;
    /// assert_eq!(rows, [array![1, 0], array![2, 2], array![3, 3, 3]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// An element that cannot be split is an error element naming it (`unbatch: element 3:
    /// ...`; [`Error::InvalidArgument`](crate::Error)), and the epoch goes on: a 0-d `ArrayD`
    /// or `Tensor` ("Cannot unbatch an input with scalar components.", TensorFlow's words), or
    /// a tuple whose components have different numbers of rows. An error element of the input
    /// passes through in its place.
    pub fn unbatch(&self) -> Dataset<T::Row>
    where
        T: Unbatch,
        T::Row: Send + 'static,
    {
        self.then(ops::unbatch::Unbatch)
    }

    /// Re-groups batches into batches of `batch_size` (tf.data's `rebatch(batch_size,
    /// drop_remainder)`; the same elements as `unbatch().batch(batch_size)`, with
    /// `drop_remainder` dropping a final short batch). It takes what
    /// [`unbatch`](Dataset::unbatch) takes and yields `Vec`s of rows: add
    /// [`collate`](Dataset::collate) to stack them into arrays again. Cardinality unknown.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 7).batch(3).rebatch(2, false);
    /// assert_eq!(ds.collect().await?, [vec![0, 1], vec![2, 3], vec![4, 5], vec![6]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`unbatch`](Dataset::unbatch); an error element takes the batch being filled with
    /// it, as in [`batch`](Dataset::batch).
    ///
    /// # Panics
    ///
    /// If `batch_size` is 0 (TensorFlow 2.21's `rebatch(0)` yields empty batches forever).
    pub fn rebatch(&self, batch_size: usize, drop_remainder: bool) -> Dataset<Vec<T::Row>>
    where
        T: Unbatch,
        T::Row: Send + 'static,
    {
        assert!(
            batch_size > 0,
            "rebatch: Batch size must be greater than zero."
        );
        self.then(ops::unbatch::Rebatch {
            sizes: vec![batch_size],
            cycling: false,
            drop_remainder,
        })
    }

    /// Re-groups batches into batches whose sizes cycle through `batch_sizes` (tf.data's
    /// `rebatch` with a list of batch sizes): `batch_sizes[0]` elements, then
    /// `batch_sizes[1]`, ..., then `batch_sizes[0]` again. The final batch may be shorter
    /// than its turn's size; `drop_remainder` drops it, as in tf.data. Otherwise as
    /// [`rebatch`](Dataset::rebatch).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 8).batch(4).rebatch_sizes(&[2, 1, 1], false);
    /// assert_eq!(ds.collect().await?, [vec![0, 1], vec![2], vec![3], vec![4, 5], vec![6], vec![7]]);
    /// let ds = Dataset::range(0, 9).batch(4).rebatch_sizes(&[2, 3], true);
    /// assert_eq!(ds.collect().await?, [vec![0, 1], vec![2, 3, 4], vec![5, 6]]); // [7, 8] of 3 dropped
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`rebatch`](Dataset::rebatch).
    ///
    /// # Panics
    ///
    /// If `batch_sizes` is empty or holds a 0.
    pub fn rebatch_sizes(&self, batch_sizes: &[usize], drop_remainder: bool) -> Dataset<Vec<T::Row>>
    where
        T: Unbatch,
        T::Row: Send + 'static,
    {
        assert!(
            !batch_sizes.is_empty(),
            "rebatch: batch_sizes must not be empty."
        );
        assert!(
            batch_sizes.iter().all(|&n| n > 0),
            "rebatch: Batch size must be greater than zero, but batch_sizes is {batch_sizes:?}."
        );
        self.then(ops::unbatch::Rebatch {
            sizes: batch_sizes.to_vec(),
            cycling: true,
            drop_remainder,
        })
    }

    /// Overlapping or strided windows of elements (tf.data's `window(size, shift, stride,
    /// drop_remainder)`), each as a vector (tf.data yields each window as a small dataset:
    /// [`window_datasets`](Dataset::window_datasets) does too).
    ///
    /// Window `k` starts at input `k * shift` and takes every `stride`-th element up to `size`.
    /// Windows cut short by the end are kept unless `drop_remainder`. As in tf.data, an error
    /// element takes its position like any element, and every window that would hold it is
    /// yielded as that error, in its place.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10).window(3, 2, 2, false);
    /// assert_eq!(ds.collect().await?, vec![vec![0, 2, 4], vec![2, 4, 6], vec![4, 6, 8], vec![6, 8], vec![8]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `size`, `shift` or `stride` is 0.
    pub fn window(
        &self,
        size: usize,
        shift: usize,
        stride: usize,
        drop_remainder: bool,
    ) -> Dataset<Vec<T>>
    where
        T: Clone,
    {
        assert!(size > 0, "window: Window size must be greater than zero.");
        assert!(shift > 0, "window: Window shift must be greater than zero.");
        assert!(
            stride > 0,
            "window: Window stride must be greater than zero."
        );
        self.then(ops::window::Window {
            size,
            shift,
            stride,
            drop_remainder,
        })
    }

    /// [`window`](Dataset::window) with each window as a dataset, as tf.data's `window(size,
    /// shift, stride, drop_remainder)` yields them: so `flat_map(|w| w.batch(n))` and the
    /// other idioms of tf.data carry over. Each window is gathered (as `window` does) and
    /// handed on as [`Dataset::from_vec`]; iterating it does not touch the input again.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 7).window_datasets(3, 2, 1, false).flat_map(|w| w.batch(3));
    /// assert_eq!(ds.collect().await?, vec![vec![0, 1, 2], vec![2, 3, 4], vec![4, 5, 6], vec![6]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`window`](Dataset::window): a window that would hold an error element is that
    /// error, in its place.
    ///
    /// # Panics
    ///
    /// If `size`, `shift` or `stride` is 0.
    pub fn window_datasets(
        &self,
        size: usize,
        shift: usize,
        stride: usize,
        drop_remainder: bool,
    ) -> Dataset<Dataset<T>>
    where
        T: Clone + Sync,
    {
        self.window(size, shift, stride, drop_remainder)
            .map(Dataset::from_vec)
    }

    /// Groups elements by `key_func` into windows of up to `window_size`, and yields the
    /// elements of `reduce_func(key, window)` for each full window (tf.data's
    /// `group_by_window`). At the end, unfinished windows are reduced in ascending key order.
    /// For a window size per key, see [`group_by_window_with`](Dataset::group_by_window_with).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 10).group_by_window(|x| x % 3, |_key, w| w.batch(2), 2);
    /// assert_eq!(ds.collect().await?, vec![vec![0, 3], vec![1, 4], vec![2, 5], vec![6, 9], vec![7], vec![8]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `window_size` is 0.
    pub fn group_by_window<K, U>(
        &self,
        key_func: impl Fn(&T) -> K + Send + Sync + 'static,
        reduce_func: impl Fn(K, Dataset<T>) -> Dataset<U> + Send + Sync + 'static,
        window_size: usize,
    ) -> Dataset<U>
    where
        T: Clone + Sync,
        K: Ord + Clone + Send + Sync + 'static,
        U: Send + 'static,
    {
        assert!(
            window_size > 0,
            "group_by_window: Window size must be greater than zero, but got 0."
        );
        let funcs = ops::group_by_window::Funcs {
            key: key_func,
            reduce: reduce_func,
            window_size: move |_: &K| window_size,
        };
        self.then(ops::group_by_window::GroupByWindow {
            window_size: Some(window_size),
            funcs: Unkeyed(Arc::new(funcs)),
        })
    }

    /// [`group_by_window`](Dataset::group_by_window) with a window size per key (tf.data's
    /// `group_by_window(key_func, reduce_func, window_size_func=...)`): the window of `key`
    /// is reduced once it holds `window_size_func(&key)` elements.
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// // Even numbers in windows of 2, odd ones in windows of 3.
    /// let ds = Dataset::range(0, 10).group_by_window_with(|x| x % 2, |_, w| w.batch(10), |k| *k as usize + 2);
    /// assert_eq!(ds.collect().await?, vec![vec![0, 2], vec![1, 3, 5], vec![4, 6], vec![8], vec![7, 9]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// When `window_size_func` returns 0 for an element's key, that element is an error element
    /// ([`Error::InvalidArgument`](crate::Error), "Window size must be greater than zero, but
    /// got 0.", TensorFlow's words, raised as it does when the window is filled) and the epoch
    /// goes on; a panic in it, in `key_func` or in `reduce_func` is an error element too.
    pub fn group_by_window_with<K, U>(
        &self,
        key_func: impl Fn(&T) -> K + Send + Sync + 'static,
        reduce_func: impl Fn(K, Dataset<T>) -> Dataset<U> + Send + Sync + 'static,
        window_size_func: impl Fn(&K) -> usize + Send + Sync + 'static,
    ) -> Dataset<U>
    where
        T: Clone + Sync,
        K: Ord + Clone + Send + Sync + 'static,
        U: Send + 'static,
    {
        let funcs = ops::group_by_window::Funcs {
            key: key_func,
            reduce: reduce_func,
            window_size: window_size_func,
        };
        self.then(ops::group_by_window::GroupByWindow {
            window_size: None,
            funcs: Unkeyed(Arc::new(funcs)),
        })
    }
}

impl<T: Send + 'static> Dataset<Vec<T>> {
    /// Stacks each batch into contiguous arrays with a leading batch dimension: what tf.data's
    /// `batch` does to tensors. `batch(n).collate()` over `(Array3<f32>, i64)` elements yields
    /// `(Array4<f32>, Array1<i64>)` (see [`Collate`](crate::tensor::Collate) for the element
    /// types: scalars, `Vec`s of scalars, `ndarray` arrays, tuples of these).
    ///
    /// Why a step of its own after `batch` rather than a stacking `batch`: a `Dataset<T>` may
    /// hold anything, so `batch` yields `Vec<T>`; `collate` turns any batch into tensors,
    /// whichever operation made it (`batch`, `batch_drop_remainder`, `rebatch`, `window`,
    /// `group_by_window`), and shows as a stage of its own in [`Epoch::stats`](crate::Epoch::stats). Each element's
    /// data is copied once, into the batch's buffer. For very large batches, stacking can run
    /// on the worker threads instead:
    /// `batch(n).try_map_parallel(AUTOTUNE, |b| Collate::collate(&b))`.
    ///
    /// ```
    /// use ndarray::{Array1, Array3, Array4};
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::range(0, 5)
    ///     .map(|i| (Array3::<f32>::from_elem((2, 2, 3), i as f32), i))
    ///     .batch(2)
    ///     .collate();
    /// let batches: Vec<(Array4<f32>, Array1<i64>)> = ds.collect().await?;
    /// assert_eq!(batches[0].0.shape(), [2, 2, 2, 3]);
    /// assert_eq!(batches[0].0[[1, 1, 1, 2]], 1.0);
    /// assert_eq!(batches[2].1.to_vec(), [4]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// A batch whose elements differ in shape is an error element naming the batch, the
    /// component, the element and both shapes: `collate: batch 3: Cannot batch tensors with
    /// different shapes in component 0. First element had shape [2,3] and element 1 had shape
    /// [3,3].` ([`Error::InvalidArgument`](crate::Error); the epoch goes on). After the
    /// batch's name it is tf.data's message word for word (TensorFlow names no batch and ends
    /// with ` [Op:IteratorGetNext]`); [`Collate`](crate::tensor::Collate) lists the messages
    /// that are the crate's own. To batch such
    /// elements, pad them ([`padded_batch`](Dataset::padded_batch)) or keep them ragged
    /// ([`ragged_batch`](Dataset::ragged_batch)).
    pub fn collate(&self) -> Dataset<T::Batch>
    where
        T: Collate,
        T::Batch: Send + 'static,
    {
        self.then(ops::collate::Collate)
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// Batches elements of different shapes by padding them to a common shape (tf.data's
    /// `padded_batch(batch_size, padded_shapes, padding_values, drop_remainder)`).
    ///
    /// Each component (a tuple's fields; see [`PaddedCollate`](crate::tensor::PaddedCollate)) is
    /// padded at the end of every dimension: to its [`PaddedShape`](crate::tensor::PaddedShape)
    /// entry when given (`Some(n)`), else to the longest in the batch. `padding_values` defaults
    /// to `0` / `false` / empty strings. Scalars are stacked. The output is `ndarray` arrays:
    /// `Vec<i64>` elements give `Array2<i64>`, `ArrayD` elements `ArrayD` batches of one more
    /// dimension. Cardinality as [`batch`](Dataset::batch).
    ///
    /// ```
    /// use ndarray::array;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let seqs = Dataset::from_vec(vec![vec![1i64], vec![3, 3, 3], vec![2, 2]]);
    /// let ds = seqs.padded_batch(2, None, None, false);
    /// assert_eq!(ds.collect().await?, [array![[1, 0, 0], [3, 3, 3]], array![[2, 2]]]);
    ///
    /// // A tuple: token ids padded with -1 to length 4, labels stacked.
    /// let pairs = Dataset::zip(seqs, Dataset::range(0, 3));
    /// let ds = pairs.padded_batch(3, Some((vec![Some(4)], ())), Some((-1, 0)), false);
    /// let (ids, labels) = ds.collect().await?.remove(0);
    /// assert_eq!(ids, array![[1, -1, -1, -1], [3, 3, 3, -1], [2, 2, -1, -1]]);
    /// assert_eq!(labels, array![0, 1, 2]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// An element longer than its padded shape makes its batch an error element,
    /// [`Error::PaddingTooSmall`](crate::Error) ("Attempted to pad to a smaller size than the
    /// input element.", TensorFlow's `DataLossError`), raised when that batch is made, as
    /// tf.data does; earlier batches are yielded and the epoch goes on. Elements of different
    /// ranks, or a padded shape of another rank than `ArrayD` elements, are
    /// [`Error::InvalidArgument`](crate::Error).
    ///
    /// # Panics
    ///
    /// If `batch_size` is 0, or a padded shape has another rank than its `Vec` or fixed-rank
    /// array component (TensorFlow's construction-time `ValueError`, with its message).
    pub fn padded_batch(
        &self,
        batch_size: usize,
        padded_shapes: Option<T::PaddedShapes>,
        padding_values: Option<T::PaddingValues>,
        drop_remainder: bool,
    ) -> Dataset<T::Batch>
    where
        T: PaddedCollate,
        T::Batch: Send + 'static,
    {
        assert!(
            batch_size > 0,
            "padded_batch: Batch size must be greater than zero."
        );
        if let Some(Err(message)) = padded_shapes.as_ref().map(T::check_padded_shapes) {
            panic!("padded_batch: {message}");
        }
        self.then(ops::padded_batch::PaddedBatch {
            size: batch_size,
            drop_remainder,
            shapes: Unkeyed(padded_shapes),
            values: Unkeyed(padding_values.unwrap_or_else(T::default_padding_values)),
        })
    }

    /// Batches rows of different lengths without padding (tf.data's `ragged_batch(batch_size,
    /// drop_remainder)`): `Vec` and array components become a
    /// [`RaggedTensor`](crate::tensor::RaggedTensor) (the rows' values concatenated, plus row
    /// splits), scalars an `Array1`. Only the first dimension of an array may differ between
    /// elements. Cardinality as [`batch`](Dataset::batch).
    ///
    /// ```
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let ds = Dataset::from_vec(vec![vec![1i64], vec![3, 3, 3], vec![2, 2]]).ragged_batch(2, false);
    /// let batches = ds.collect().await?;
    /// assert_eq!(batches[0].row_splits(), [0, 1, 4]);
    /// assert_eq!(batches[0].values().to_vec(), [1, 3, 3, 3]);
    /// assert_eq!(batches[1].to_vecs(), vec![vec![2, 2]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// A batch whose arrays differ in rank or after the first dimension is an error element
    /// ([`Error::InvalidArgument`](crate::Error)).
    ///
    /// # Panics
    ///
    /// If `batch_size` is 0.
    pub fn ragged_batch(&self, batch_size: usize, drop_remainder: bool) -> Dataset<T::Ragged>
    where
        T: RaggedCollate,
        T::Ragged: Send + 'static,
    {
        assert!(
            batch_size > 0,
            "ragged_batch: Batch size must be greater than zero."
        );
        self.then(ops::ragged_batch::RaggedBatch {
            size: batch_size,
            drop_remainder,
        })
    }

    /// Groups elements of similar length into buckets and pads each bucket's batches
    /// (tf.data's `bucket_by_sequence_length(element_length_func, bucket_boundaries,
    /// bucket_batch_sizes, padded_shapes, padding_values, pad_to_bucket_boundary, no_padding,
    /// drop_remainder)`; the optional arguments are in [`BucketOptions`](crate::BucketOptions)).
    ///
    /// Bucket `i` takes the elements whose `element_length_func` is in
    /// `[bucket_boundaries[i - 1], bucket_boundaries[i])` (the first from 0, the last without
    /// end), and yields a batch padded as [`padded_batch`](Dataset::padded_batch) does as soon
    /// as it holds `bucket_batch_sizes[i]` elements; at the end, the unfinished buckets are
    /// yielded in ascending bucket order (unless `drop_remainder`). This is the order of
    /// tf.data, which builds the operation from `group_by_window` and `padded_batch`. With
    /// `pad_to_bucket_boundary`, the unknown dimensions of bucket `i` are padded to
    /// `bucket_boundaries[i] - 1`: without padded shapes, that is the first dimension (the
    /// sequence; TensorFlow pads every dimension its static shape leaves unknown, and
    /// `ndarray` arrays carry no static shape), the others to the batch's longest.
    /// Cardinality unknown.
    ///
    /// ```
    /// use ndarray::array;
    /// use streamload::{BucketOptions, Dataset};
    /// # tokio_test::block_on(async {
    /// let seqs = Dataset::from_vec(vec![1usize, 4, 2, 6, 3]).map(|n| vec![n as i64; n]);
    /// let ds = seqs.bucket_by_sequence_length(
    ///     |s| s.len(),
    ///     vec![3, 5],
    ///     vec![2, 2, 2],
    ///     BucketOptions::default().padding_values(-1),
    /// );
    /// assert_eq!(
    ///     ds.collect().await?,
    ///     [
    ///         array![[1, -1], [2, 2]],                 // bucket 0 full
    ///         array![[4, 4, 4, 4], [3, 3, 3, -1]],     // bucket 1 full
    ///         array![[6, 6, 6, 6, 6, 6]],              // bucket 2 flushed at the end
    ///     ]
    /// );
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As `padded_batch`; with `no_padding`, as [`collate`](Dataset::collate). With
    /// `pad_to_bucket_boundary`, a batch of the last bucket is an error element ("When
    /// pad_to_bucket_boundary=True, elements must have length < max(bucket_boundaries).",
    /// TensorFlow's assertion). A panic in `element_length_func` is an error element.
    ///
    /// # Panics
    ///
    /// If `bucket_batch_sizes` does not have one more entry than `bucket_boundaries` (with
    /// TensorFlow's message), a batch size is 0, or `padded_shapes` has another rank than the
    /// elements (as [`padded_batch`](Dataset::padded_batch)). Boundaries need not increase:
    /// as in tf.data, an element goes to the first bucket `i` with
    /// `bucket_boundaries[i - 1] <= length < bucket_boundaries[i]`.
    pub fn bucket_by_sequence_length(
        &self,
        element_length_func: impl Fn(&T) -> usize + Send + Sync + 'static,
        bucket_boundaries: Vec<usize>,
        bucket_batch_sizes: Vec<usize>,
        options: crate::BucketOptions<T>,
    ) -> Dataset<T::Batch>
    where
        T: PaddedCollate,
        T::Batch: Send + 'static,
    {
        assert!(
            bucket_batch_sizes.len() == bucket_boundaries.len() + 1,
            "bucket_by_sequence_length: `len(bucket_batch_sizes)` must equal \
             `len(bucket_boundaries) + 1` but `len(bucket_batch_sizes)={}` and \
             `len(bucket_boundaries)={}`.",
            bucket_batch_sizes.len(),
            bucket_boundaries.len()
        );
        assert!(
            bucket_batch_sizes.iter().all(|&n| n > 0),
            "bucket_by_sequence_length: Batch size must be greater than zero."
        );
        if let Some(Err(message)) = options.padded_shapes.as_ref().map(T::check_padded_shapes) {
            panic!("bucket_by_sequence_length: {message}");
        }
        let config = Arc::new(ops::bucket_by_sequence_length::Config {
            length: element_length_func,
            boundaries: bucket_boundaries,
            batch_sizes: bucket_batch_sizes,
            options,
        });
        self.then(ops::bucket_by_sequence_length::BucketBySequenceLength {
            config: Unkeyed(config),
        })
    }
}

impl<D: crate::text::Document> Dataset<D> {
    /// Packs documents of token ids into sequences of `sequence_length` tokens, each with its
    /// segment ids, positions and loss mask ([`text::Packed`](crate::text::Packed)), as
    /// language-model training reads them (Grain's packing transformations):
    /// [`Packing::ConcatThenSplit`](crate::text::Packing::ConcatThenSplit) concatenates the
    /// documents and cuts every `sequence_length` tokens (no padding but in the last
    /// sequence); [`Packing::FirstFit`](crate::text::Packing::FirstFit) and
    /// [`Packing::BestFit`](crate::text::Packing::BestFit) fill several sequences at once and
    /// pad them, splitting a document only when it is longer than a sequence.
    ///
    /// Every token of every document is in exactly one sequence; a document's tokens in a
    /// sequence are one segment, in order. Empty documents add nothing. `.batch(n).collate()`
    /// stacks the sequences into a [`text::PackedBatch`](crate::text::PackedBatch) of
    /// `[n, sequence_length]` arrays. An error element passes through at once, in a sequence's
    /// place, and packing goes on around it.
    ///
    /// A checkpoint saves the packing by position (which documents it holds and where in the
    /// first one the next sequence starts), not the tokens: kilobytes however long the
    /// documents are, and a resume in the middle of a document goes on at its next token.
    ///
    /// The documents are `Vec<u32>`, or a rank's share of them
    /// ([`Distributed`](crate::distribute::Distributed) from
    /// [`ShardPlan::dataset`](crate::distribute::ShardPlan::dataset)): each sequence then
    /// says where its segments came from ([`Packed::pieces`](crate::text::Packed::pieces)),
    /// for [`Coverage::add_pieces`](crate::distribute::Coverage::add_pieces), and a document
    /// an elastic resume hands on part-way is packed from its
    /// [`offset`](crate::distribute::Distributed::offset) on (see the data-parallel guide).
    ///
    /// ```
    /// use streamload::Dataset;
    /// use streamload::text::Packing;
    /// # tokio_test::block_on(async {
    /// let docs = Dataset::from_vec(vec![vec![1, 2, 3], vec![4, 5, 6, 7, 8], vec![9]]);
    /// let rows = docs.pack(4, Packing::ConcatThenSplit).collect().await?;
    /// assert_eq!(rows[0].tokens, [1, 2, 3, 4]);
    /// assert_eq!(rows[0].segment_ids, [1, 1, 1, 2]);
    /// assert_eq!(rows[1].tokens, [5, 6, 7, 8]);
    /// assert_eq!(rows[1].positions, [0, 1, 2, 3]); // the rest of document 2, a segment anew
    /// assert_eq!(rows[2].tokens, [9, 0, 0, 0]);
    /// assert_eq!(rows[2].loss_mask, [true, false, false, false]);
    ///
    /// let rows = docs.pack(4, Packing::FirstFit { bins: 2 }).collect().await?;
    /// let tokens: Vec<_> = rows.iter().map(|r| r.tokens.clone()).collect();
    /// // Document 2 is longer than a sequence: its head (a token) fills the first bin, its
    /// // whole sequence follows.
    /// assert_eq!(tokens, [[1, 2, 3, 4], [5, 6, 7, 8], [9, 0, 0, 0]]);
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    ///
    /// # Panics
    ///
    /// If `sequence_length` or the number of bins is 0.
    pub fn pack(
        &self,
        sequence_length: usize,
        packing: crate::text::Packing,
    ) -> Dataset<crate::text::Packed> {
        assert!(
            sequence_length > 0,
            "pack: the sequence length must be at least 1"
        );
        if let crate::text::Packing::FirstFit { bins } | crate::text::Packing::BestFit { bins } =
            packing
        {
            assert!(bins > 0, "pack: the number of bins must be at least 1");
        }
        self.then(ops::pack::Pack {
            sequence_length,
            packing,
        })
    }
}
