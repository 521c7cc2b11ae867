//! Saved state: `[unfinished buckets flushed + 1 once the input has ended (else 0), index of
//! the next batch]`, then the buckets' elements as `engine::Hold` saves them (a mark is taken
//! every 32 elements); after a restore the hold hands them back and each goes into its bucket
//! again.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use anyhow::Context as _;
use futures::stream::Stream;

use crate::Error;
use crate::checkpoint::{Prov, State};
use crate::engine::Resumable;
use crate::engine::hold::{Group, MARK_EVERY};
use crate::engine::{Cardinality, Ctx, Dataset, Hold, Input, Members, Operation, Replay, Start};
use crate::engine::{Unkeyed, replayed};
use crate::ops::map::MapStream;
use crate::runtime::catch_panic;
use crate::tensor::PaddedCollate;

const STAGE: &str = "bucket_by_sequence_length";

/// The optional arguments of [`bucket_by_sequence_length`](crate::Dataset::bucket_by_sequence_length),
/// with tf.data's defaults: no padded shapes (pad to the longest in the batch), default padding
/// values (`0`, `false`, empty strings), and `pad_to_bucket_boundary`, `no_padding` and
/// `drop_remainder` off.
///
/// ```
/// use streamload::BucketOptions;
/// let options = BucketOptions::<Vec<i64>>::default().padding_values(-1).drop_remainder(true);
/// ```
pub struct BucketOptions<T: PaddedCollate> {
    pub(crate) padded_shapes: Option<T::PaddedShapes>,
    pub(crate) padding_values: Option<T::PaddingValues>,
    pub(crate) pad_to_bucket_boundary: bool,
    pub(crate) no_padding: bool,
    pub(crate) drop_remainder: bool,
}

impl<T: PaddedCollate> Default for BucketOptions<T> {
    fn default() -> Self {
        BucketOptions {
            padded_shapes: None,
            padding_values: None,
            pad_to_bucket_boundary: false,
            no_padding: false,
            drop_remainder: false,
        }
    }
}

impl<T: PaddedCollate> Clone for BucketOptions<T> {
    fn clone(&self) -> Self {
        BucketOptions {
            padded_shapes: self.padded_shapes.clone(),
            padding_values: self.padding_values.clone(),
            ..*self
        }
    }
}

impl<T: PaddedCollate> fmt::Debug for BucketOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketOptions")
            .field("padded_shapes", &self.padded_shapes.is_some())
            .field("padding_values", &self.padding_values.is_some())
            .field("pad_to_bucket_boundary", &self.pad_to_bucket_boundary)
            .field("no_padding", &self.no_padding)
            .field("drop_remainder", &self.drop_remainder)
            .finish()
    }
}

impl<T: PaddedCollate> BucketOptions<T> {
    /// The shapes to pad each component to (as [`padded_batch`](crate::Dataset::padded_batch)).
    pub fn padded_shapes(mut self, shapes: T::PaddedShapes) -> Self {
        self.padded_shapes = Some(shapes);
        self
    }

    /// The value to pad each component with.
    pub fn padding_values(mut self, values: T::PaddingValues) -> Self {
        self.padding_values = Some(values);
        self
    }

    /// Pads the unknown dimensions of bucket `i` to `bucket_boundaries[i] - 1` rather than to
    /// the longest in the batch, so every batch of a bucket has one shape. Elements of the last
    /// bucket (length `>= bucket_boundaries[-1]`) are then an error.
    pub fn pad_to_bucket_boundary(mut self, on: bool) -> Self {
        self.pad_to_bucket_boundary = on;
        self
    }

    /// Stacks without padding (the elements of a batch must have the same shapes).
    pub fn no_padding(mut self, on: bool) -> Self {
        self.no_padding = on;
        self
    }

    /// Drops each bucket's final short batch.
    pub fn drop_remainder(mut self, on: bool) -> Self {
        self.drop_remainder = on;
        self
    }
}

/// What one `bucket_by_sequence_length` stage was configured with.
pub(crate) struct Config<T: PaddedCollate, F> {
    pub(crate) length: F,
    pub(crate) boundaries: Vec<usize>,
    pub(crate) batch_sizes: Vec<usize>,
    pub(crate) options: BucketOptions<T>,
}

/// The [`bucket_by_sequence_length`](crate::Dataset::bucket_by_sequence_length) operation:
/// its boundaries, batch sizes and flags are keyed; the length function, padded shapes and
/// padding values are not (resume with the same ones).
pub(crate) struct BucketBySequenceLength<T: PaddedCollate, F> {
    pub(crate) config: Unkeyed<Arc<Config<T, F>>>,
}

impl<T: PaddedCollate, F> std::hash::Hash for BucketBySequenceLength<T, F> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Every field of the configuration, keyed or not (a new one does not build until it
        // is listed here).
        let Config {
            length: _,
            boundaries,
            batch_sizes,
            options,
        } = &**self.config;
        let BucketOptions {
            padded_shapes: _,
            padding_values: _,
            pad_to_bucket_boundary,
            no_padding,
            drop_remainder,
        } = options;
        boundaries.hash(state);
        batch_sizes.hash(state);
        pad_to_bucket_boundary.hash(state);
        no_padding.hash(state);
        drop_remainder.hash(state);
    }
}

impl<T, F> Operation<T> for BucketBySequenceLength<T, F>
where
    T: PaddedCollate + Send + 'static,
    T::Batch: Send + 'static,
    F: Fn(&T) -> usize + Send + Sync + 'static,
{
    type Out = T::Batch;
    type Stream = BucketStream<T, F>;
    const NAME: &'static str = "bucket_by_sequence_length";

    fn cardinality(&self, _: Cardinality) -> Cardinality {
        Cardinality::Unknown
    }

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        build(ctx, input.dataset(), &self.config)
    }

    /// Each saved batch (the group of its members' positions) made again, padded as its
    /// bucket (its first member's) pads.
    fn replay(&self, _: &Ctx, input: Input<'_, T>, provs: &Arc<[Prov]>) -> Replay<T::Batch> {
        let config = Arc::clone(&self.config);
        let pad = move |items: Vec<T>| {
            let first = items.first();
            let bucket = first
                .map(|x| BucketStream::bucket(&config, x))
                .transpose()?;
            BucketStream::pad(&config, items, bucket.unwrap_or(0), 0)
        };
        let batches = Members::new(provs, STAGE, None, |members| input.replay(members));
        replayed(batches.map(|b| MapStream::over(b, Arc::new(pad))))
    }
}

/// The bucketing of one epoch: fresh or restored.
pub(crate) fn build<T, F>(
    ctx: &Ctx,
    input: &Dataset<T>,
    config: &Arc<Config<T, F>>,
) -> anyhow::Result<BucketStream<T, F>>
where
    T: PaddedCollate + Send + 'static,
    T::Batch: Send + 'static,
    F: Fn(&T) -> usize + Send + Sync + 'static,
{
    // Where the flush stood (when the input had ended) and the next batch's index.
    let (flush_at, index) = match ctx.restoring() {
        Some(state) => (state.word(0)?.checked_sub(1), state.word(1)?),
        None => (None, 0),
    };
    let mut hold = Hold::of(ctx, input, false, STAGE, 2)?;
    hold.marking_every(MARK_EVERY);
    let mut bucketing = BucketStream::new(hold, Arc::clone(config));
    bucketing.flush_at = flush_at.map(|n| n as usize);
    bucketing.index = index;
    Ok(bucketing)
}

/// Stream for the [`bucket_by_sequence_length`](crate::Dataset::bucket_by_sequence_length)
/// method.
///
/// tf.data builds it as `group_by_window(bucket id, padded_batch, window_size_func)`; this is
/// the same order without a nested dataset per batch: a bucket is padded and yielded as soon as
/// it holds its batch size, and at the end the unfinished buckets in ascending bucket order.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct BucketStream<T: PaddedCollate, F> {
    hold: Hold<T>,
    config: Arc<Config<T, F>>,
    buckets: Vec<Vec<T>>,
    /// Once the input has ended: how many buckets have been flushed.
    flushed: Option<usize>,
    /// The index of the next batch, for error messages.
    index: u64,
    /// For checkpoints: each bucket's elements as placed by a checkpoint.
    members: Vec<Group>,
    /// The last batch's members' positions, when recorded.
    last: Option<Prov>,
    /// After a restore: where the flush stood (when the input had ended).
    flush_at: Option<usize>,
}

// No field is ever pinned: the input is a boxed stream and the buckets are plain vectors.
impl<T: PaddedCollate, F> Unpin for BucketStream<T, F> {}

impl<T: PaddedCollate, F> BucketStream<T, F> {
    pub(crate) fn new(hold: Hold<T>, config: Arc<Config<T, F>>) -> Self {
        let buckets = config
            .batch_sizes
            .iter()
            .map(|&n| Vec::with_capacity(n.min(4096)))
            .collect();
        let members = config
            .batch_sizes
            .iter()
            .map(|_| Group::default())
            .collect();
        BucketStream {
            hold,
            config,
            buckets,
            flushed: None,
            index: 0,
            members,
            last: None,
            flush_at: None,
        }
    }

    /// Bucket `bucket`'s batch, padded; it is passed on.
    fn make_batch(&mut self, bucket: usize) -> anyhow::Result<T::Batch> {
        let items = std::mem::replace(
            &mut self.buckets[bucket],
            Vec::with_capacity(self.config.batch_sizes[bucket].min(4096)),
        );
        self.last = self.hold.passed(&mut self.members[bucket]);
        self.hold.release_groups(self.members.iter());
        let index = self.index;
        self.index += 1;
        Self::pad(&self.config, items, bucket, index)
    }

    fn pad(
        config: &Config<T, F>,
        items: Vec<T>,
        bucket: usize,
        index: u64,
    ) -> anyhow::Result<T::Batch> {
        let options = &config.options;
        let batch = if options.no_padding {
            T::collate(&items)
        } else {
            let unknown = if options.pad_to_bucket_boundary {
                match config.boundaries.get(bucket) {
                    Some(&b) => Some(b.saturating_sub(1)),
                    None => {
                        return Err(Error::InvalidArgument(
                            "When pad_to_bucket_boundary=True, elements must have length < \
                             max(bucket_boundaries)."
                                .into(),
                        ))
                        .with_context(|| {
                            format!("bucket_by_sequence_length: batch {index} (bucket {bucket})")
                        });
                    }
                }
            } else {
                None
            };
            let default;
            let values = match &options.padding_values {
                Some(v) => v,
                None => {
                    default = T::default_padding_values();
                    &default
                }
            };
            T::padded_collate_components(
                items.iter(),
                options.padded_shapes.as_ref(),
                values,
                unknown,
                0,
            )
        };
        batch.with_context(|| format!("bucket_by_sequence_length: batch {index} (bucket {bucket})"))
    }
}

impl<T, F> BucketStream<T, F>
where
    T: PaddedCollate + Send + 'static,
    F: Fn(&T) -> usize,
{
    /// The bucket of `x`.
    fn bucket(config: &Config<T, F>, x: &T) -> anyhow::Result<usize> {
        let length = catch_panic(STAGE, || Ok((config.length)(x)))?;
        Ok(bucket_of(&config.boundaries, length))
    }
}

impl<T, F> Stream for BucketStream<T, F>
where
    T: PaddedCollate + Send + 'static,
    F: Fn(&T) -> usize,
{
    type Item = anyhow::Result<T::Batch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(flushed) = this.flushed {
                // Unfinished buckets in ascending order, as group_by_window flushes its windows.
                if flushed == this.buckets.len() {
                    return Poll::Ready(None);
                }
                this.flushed = Some(flushed + 1);
                if this.buckets[flushed].is_empty() || this.config.options.drop_remainder {
                    this.buckets[flushed].clear();
                    this.members[flushed].take();
                    continue;
                }
                return Poll::Ready(Some(this.make_batch(flushed)));
            }
            let item = ready!(this.hold.poll_next(cx));
            match item {
                Some(Ok(x)) => {
                    let bucket = match Self::bucket(&this.config, &x) {
                        Ok(bucket) => bucket,
                        Err(e) => return Poll::Ready(Some(Err(e))),
                    };
                    this.hold.add_to(&mut this.members[bucket]);
                    this.buckets[bucket].push(x);
                    // An element held at the checkpoint goes back into a bucket that was
                    // not full.
                    if !this.hold.again()
                        && this.buckets[bucket].len() == this.config.batch_sizes[bucket]
                    {
                        return Poll::Ready(Some(this.make_batch(bucket)));
                    }
                }
                Some(Err(e)) => {
                    // An error passes on at once, at its own position: as a batch of it
                    // alone, made again it is that error again.
                    this.last = this.hold.alone();
                    return Poll::Ready(Some(Err(e)));
                }
                None => this.flushed = Some(this.flush_at.take().unwrap_or(0)),
            }
        }
    }
}

/// Saved state: see the module doc.
impl<T: PaddedCollate, F> Resumable for BucketStream<T, F> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        let flushed = this.flushed.map_or(0, |n| n as u64 + 1);
        let state = State::new(STAGE).words([flushed, this.index]);
        this.hold.save_groups(state, this.members.iter())
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.hold.placed(&self.last, "its batches")
    }
}

/// The bucket of an element of length `length`, as tf.data computes it: the first `i` with
/// `boundaries[i - 1] <= length < boundaries[i]` (no lower bound for the first bucket, no upper
/// bound for the last). For increasing boundaries that is the one bucket whose range holds
/// `length`; tf.data does not require them to increase, and neither does this. Some bucket
/// always matches: the first takes every length below `boundaries[0]`, the last every length
/// from `boundaries[n - 1]`, and one of the two holds whenever the other does not.
fn bucket_of(boundaries: &[usize], length: usize) -> usize {
    (0..=boundaries.len())
        .find(|&i| {
            (i == 0 || boundaries[i - 1] <= length) && boundaries.get(i).is_none_or(|&b| length < b)
        })
        .unwrap_or(boundaries.len())
}

#[cfg(test)]
mod tests {
    use super::bucket_of;

    #[test]
    fn buckets_as_tf_data_assigns_them() {
        // Increasing boundaries: a length equal to a boundary goes to the next bucket.
        let b = [3, 5];
        let got: Vec<usize> = [0, 2, 3, 4, 5, 9]
            .iter()
            .map(|&n| bucket_of(&b, n))
            .collect();
        assert_eq!(got, [0, 0, 1, 1, 2, 2]);
        // Unsorted boundaries, as TensorFlow 2.21 takes them (reduce_min of the buckets
        // whose [min, max) holds the length).
        let b = [5, 3];
        let got: Vec<usize> = [1, 2, 3, 4, 5, 7]
            .iter()
            .map(|&n| bucket_of(&b, n))
            .collect();
        assert_eq!(got, [0, 0, 0, 0, 2, 2]);
        assert_eq!(bucket_of(&[], 7), 0);
    }
}
