//! `parse_single_example` / `parse_example`: serialized `tf.train.Example`s to tensors under a
//! feature spec (TensorFlow's `FixedLenFeature`, `VarLenFeature`, `FixedLenSequenceFeature`
//! and `RaggedFeature` without partitions), with TensorFlow's outputs and TensorFlow's errors.
//!
//! The parser walks the protobuf wire format directly (with `prost`'s wire primitives), once
//! per record: features the spec does not name are stepped over without being looked into,
//! and the lists of those it names are decoded straight into their output values (floats and
//! integers into the tensor's vector, `string` values as slices of the record, never copied).
//! It builds no feature map and, for specs of up to 8 features, allocates only the outputs.
//!
//! [`parse_single_example_view`] checks a record exactly as `parse_single_example` does (the
//! same walk, the same checks, the same errors) and then reads the features in place, as
//! typed iterators, for callers who turn each record into their own struct: no tensor and
//! no value list is built (W3 of WORKLOADS.md parses this way).
//!
//! `wire` holds the wire format (the walk over the feature map, the decoding of one list);
//! `view` the in-place reading.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::Error;
use crate::tensor::{DType, Element, RaggedValues, SparseTensor, Tensor, Values};

mod view;
mod wire;

pub use view::{ExampleView, ViewBytes, ViewFloats, ViewInt64s, parse_single_example_view};

/// How to parse one feature, as TensorFlow's `tf.io.*Feature` classes.
#[derive(Clone, Debug, PartialEq)]
pub enum FeatureSpec {
    /// `tf.io.FixedLenFeature(shape, dtype, default_value)`: exactly `product(shape)` values,
    /// or the default when the feature is missing.
    FixedLen {
        /// The shape of one example's tensor.
        shape: Vec<usize>,
        /// The element type.
        dtype: DType,
        /// Used when the feature is missing; `None` makes it required.
        default: Option<Values>,
    },
    /// `tf.io.VarLenFeature(dtype)`: any number of values, as a [`SparseTensor`].
    VarLen {
        /// The element type.
        dtype: DType,
    },
    /// `tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing, default_value)`: any
    /// number of rows of `shape`; batches are padded to the longest with the default.
    FixedLenSequence {
        /// The shape of one row.
        shape: Vec<usize>,
        /// The element type.
        dtype: DType,
        /// Must be `true`, as in TensorFlow (a missing feature parses as zero rows).
        allow_missing: bool,
        /// The padding value when batching (one value); zero or empty when `None`.
        default: Option<Values>,
    },
    /// `tf.io.RaggedFeature(dtype, value_key)` without partitions: any number of values. One
    /// example parses to its values (a 1-D [`Tensor`], as TensorFlow's); a batch to a
    /// [`RaggedValues`], one row per example (empty for a missing feature), its row splits
    /// `i64` (TensorFlow's default `row_splits_dtype` is `int32`: the same numbers).
    ///
    /// TensorFlow's `partitions` (`RowLengths`, `RowSplits`, `UniformRowLength`, ...: more
    /// ragged dimensions read from other features) are not supported: there is no field for
    /// them.
    Ragged {
        /// The element type.
        dtype: DType,
        /// The feature to read; the spec's name when `None`.
        value_key: Option<String>,
    },
}

impl FeatureSpec {
    /// `tf.io.FixedLenFeature(shape, dtype)` with no default (required).
    ///
    /// A shape of more than 2^28 values is refused by [`ParseSpec::new`] (no `Example` can
    /// hold that many), so a mistyped shape is an error, never an allocation that aborts.
    pub fn fixed_len(shape: impl Into<Vec<usize>>, dtype: DType) -> FeatureSpec {
        FeatureSpec::FixedLen {
            shape: shape.into(),
            dtype,
            default: None,
        }
    }

    /// `tf.io.VarLenFeature(dtype)`.
    pub fn var_len(dtype: DType) -> FeatureSpec {
        FeatureSpec::VarLen { dtype }
    }

    /// `tf.io.RaggedFeature(dtype)`: reads the feature of the spec's name; see
    /// [`FeatureSpec::with_value_key`] to read another.
    ///
    /// ```
    /// use streamload::format::{
    ///     Example, FeatureSpec, ParseSpec, parse_example, parse_single_example,
    /// };
    /// use streamload::tensor::{DType, Values};
    ///
    /// let spec = ParseSpec::new([
    ///     ("tokens", FeatureSpec::ragged(DType::String)),
    ///     ("ids", FeatureSpec::ragged(DType::Int64).with_value_key("token_ids")),
    /// ])?;
    /// let records = [
    ///     Example::new().with_bytes("tokens", ["a", "b"]).with_int64("token_ids", [4, 5]),
    ///     Example::new(), // missing: no values
    ///     Example::new().with_bytes("tokens", ["c"]).with_int64("token_ids", [6]),
    /// ]
    /// .map(|e| e.encode_to_bytes());
    ///
    /// // One example: its values, a 1-D tensor.
    /// let one = parse_single_example(&records[0], &spec)?;
    /// assert_eq!(one.dense("ids")?.as_slice::<i64>(), Some(&[4, 5][..]));
    ///
    /// // A batch: one ragged row per example.
    /// let batch = parse_example(&records, &spec)?;
    /// let ids = batch.ragged("ids")?;
    /// assert_eq!(ids.values(), &Values::Int64(vec![4, 5, 6]));
    /// assert_eq!(ids.row_splits(), [0, 2, 2, 3]);
    /// assert_eq!(batch.ragged("tokens")?.to_ragged::<bytes::Bytes>()?.to_vecs(), [
    ///     vec!["a", "b"],
    ///     vec![],
    ///     vec!["c"]
    /// ]);
    /// # anyhow::Ok(())
    /// ```
    pub fn ragged(dtype: DType) -> FeatureSpec {
        FeatureSpec::Ragged {
            dtype,
            value_key: None,
        }
    }

    /// Sets a `Ragged` feature's `value_key`: the feature it reads from the record (the
    /// spec's name by default). Other kinds have no `value_key`: they are returned unchanged.
    pub fn with_value_key(mut self, key: impl Into<String>) -> FeatureSpec {
        if let FeatureSpec::Ragged { value_key, .. } = &mut self {
            *value_key = Some(key.into());
        }
        self
    }

    /// `tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing)`.
    pub fn fixed_len_sequence(
        shape: impl Into<Vec<usize>>,
        dtype: DType,
        allow_missing: bool,
    ) -> FeatureSpec {
        FeatureSpec::FixedLenSequence {
            shape: shape.into(),
            dtype,
            allow_missing,
            default: None,
        }
    }

    /// Sets `default_value` (for `FixedLen`: all `product(shape)` values, row-major; for
    /// `FixedLenSequence`: the one padding value). Ignored by `VarLen` and `Ragged` (which
    /// have no default in TensorFlow either).
    pub fn with_default(mut self, value: impl Into<Values>) -> FeatureSpec {
        match &mut self {
            FeatureSpec::FixedLen { default, .. }
            | FeatureSpec::FixedLenSequence { default, .. } => *default = Some(value.into()),
            FeatureSpec::VarLen { .. } | FeatureSpec::Ragged { .. } => {}
        }
        self
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            FeatureSpec::FixedLen { dtype, .. }
            | FeatureSpec::VarLen { dtype }
            | FeatureSpec::FixedLenSequence { dtype, .. }
            | FeatureSpec::Ragged { dtype, .. } => *dtype,
        }
    }
}

/// Specs of at most this many features are searched by a scan, larger ones by halves.
const SCAN_UP_TO: usize = 8;

/// A checked set of named [`FeatureSpec`]s; cheap to clone (shared).
///
/// ```
/// use bytes::Bytes;
/// use streamload::format::{Example, FeatureSpec, ParseSpec, parse_single_example};
/// use streamload::tensor::DType;
///
/// let spec = ParseSpec::new([
///     ("label", FeatureSpec::fixed_len([], DType::Int64).with_default(-1)),
///     ("weights", FeatureSpec::fixed_len([2], DType::Float32)),
///     ("tokens", FeatureSpec::var_len(DType::String)),
/// ])?;
/// let record = Example::new()
///     .with_floats("weights", [0.5, 2.0])
///     .with_bytes("tokens", ["a", "b", "c"])
///     .encode_to_bytes();
/// let parsed = parse_single_example(&record, &spec)?;
/// assert_eq!(parsed.dense("label")?.as_slice::<i64>(), Some(&[-1][..]));
/// assert_eq!(parsed.dense("weights")?.view::<f32>()?[[1]], 2.0);
/// assert_eq!(parsed.sparse("tokens")?.dense_shape(), &[3]);
/// # anyhow::Ok(())
/// ```
#[derive(Clone, Debug)]
pub struct ParseSpec {
    /// Sorted by name.
    inner: Arc<[Entry]>,
}

#[derive(Clone, Debug)]
struct Entry {
    /// The output's name.
    name: String,
    /// `name`'s length and first bytes, for [`ParseSpec::find`].
    head: NameHead,
    /// The key read from the record: `name`, or a `Ragged` feature's `value_key`.
    key: String,
    /// `key`'s length and first bytes, for [`ParseSpec::find_in`].
    key_head: NameHead,
    /// The index of the entry with the `i`-th smallest key, in entry `i` (`i` itself unless
    /// a feature is renamed): large specs search the keys by halves through it.
    by_key: usize,
    spec: FeatureSpec,
    /// Values per example (`FixedLen`) or per row (`FixedLenSequence`).
    stride: usize,
}

impl Entry {
    /// The values one example's output holds at most: a `FixedLen` feature's, none for
    /// the others.
    fn capacity(&self) -> Option<usize> {
        match self.spec {
            FeatureSpec::FixedLen { .. } => Some(self.stride),
            _ => None,
        }
    }
}

impl ParseSpec {
    /// Checks and stores the features (TensorFlow raises these errors when the op is built).
    ///
    /// # Errors
    ///
    /// A `FixedLenSequence` without `allow_missing` ("Unsupported: FixedLenSequenceFeature
    /// requires allow_missing to be True."), a default of the wrong type or size, a name
    /// given twice, a key read by two features (a `Ragged` feature's `value_key` naming
    /// another feature's key: TensorFlow allows it between `RaggedFeature`s of one type,
    /// streamload does not), or a shape of more than 2^28 values (268,435,456) per example
    /// or row (an [`Error::InvalidArgument`] naming the feature): a protobuf message holds
    /// at most 2 GiB, so no `Example` can hold that many values of a feature, and such a
    /// shape is a mistake that would otherwise ask for memory it sizes when a record is
    /// parsed.
    pub fn new<N: Into<String>>(
        features: impl IntoIterator<Item = (N, FeatureSpec)>,
    ) -> anyhow::Result<ParseSpec> {
        let mut entries: Vec<Entry> = Vec::new();
        for (name, spec) in features {
            let name = name.into();
            let (stride, default) = match &spec {
                FeatureSpec::FixedLen { shape, default, .. } => {
                    (values_in(&name, shape)?, default.as_ref())
                }
                FeatureSpec::VarLen { .. } | FeatureSpec::Ragged { .. } => (1, None),
                FeatureSpec::FixedLenSequence {
                    shape,
                    allow_missing,
                    default,
                    ..
                } => {
                    if !allow_missing {
                        return Err(invalid(
                            "Unsupported: FixedLenSequenceFeature requires allow_missing to be True."
                                .to_string(),
                        ));
                    }
                    (values_in(&name, shape)?, default.as_ref())
                }
            };
            if let Some(default) = default {
                if default.dtype() != spec.dtype() {
                    return Err(invalid(format!(
                        "feature {name}: default_value is {} but the feature is {}",
                        default.dtype(),
                        spec.dtype()
                    )));
                }
                let want = match spec {
                    FeatureSpec::FixedLen { .. } => stride,
                    _ => 1,
                };
                if default.len() != want {
                    // TensorFlow reshapes the default to the feature's shape.
                    return Err(invalid(format!(
                        "feature {name}: default_value: Input to reshape is a tensor with {} \
                         values, but the requested shape has {want}",
                        default.len()
                    )));
                }
            }
            let key = match &spec {
                FeatureSpec::Ragged {
                    value_key: Some(key),
                    ..
                } => key.clone(),
                _ => name.clone(),
            };
            entries.push(Entry {
                head: NameHead::at(name.as_bytes(), 0..name.len()),
                key_head: NameHead::at(key.as_bytes(), 0..key.len()),
                by_key: 0,
                name,
                key,
                spec,
                stride,
            });
        }
        let mut names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(invalid(format!("feature {} is given twice", w[0])));
        }
        if entries.iter().any(|e| e.key != e.name) {
            let mut keys: Vec<&Entry> = entries.iter().collect();
            keys.sort_by(|a, b| a.key.cmp(&b.key));
            if let Some(w) = keys.windows(2).find(|w| w[0].key == w[1].key) {
                // `b` is renamed, `a` the feature of that name or the other renamed one.
                let (a, b) = if w[1].key == w[1].name {
                    (w[1], w[0])
                } else {
                    (w[0], w[1])
                };
                return Err(invalid(format!(
                    "feature {}: its value_key {} is read by feature {} too (streamload reads \
                     each key of a record for one feature)",
                    b.name, b.key, a.name
                )));
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut by_key: Vec<usize> = (0..entries.len()).collect();
        by_key.sort_by(|&a, &b| entries[a].key.cmp(&entries[b].key));
        for (e, i) in entries.iter_mut().zip(by_key) {
            e.by_key = i;
        }
        Ok(ParseSpec {
            inner: entries.into(),
        })
    }

    /// The calling thread's own copy of this spec, for the parses' outputs to hold. Parses
    /// on several threads at once would otherwise all count references on one shared word,
    /// which moves between the cores' caches on every record (measured: two threads parsing
    /// W3's records took 1.1 us per record each with one shared spec, 0.75 us with a copy
    /// each). A few specs per thread are kept, so alternating specs copy nothing either.
    fn local(&self) -> ParseSpec {
        /// Specs a thread keeps a copy of, at most.
        const KEPT: usize = 4;
        thread_local! {
            /// (the user's spec, this thread's copy of it), the newest last.
            static LOCAL: RefCell<Vec<(ParseSpec, ParseSpec)>> = const { RefCell::new(Vec::new()) };
        }
        LOCAL
            .try_with(|kept| {
                let mut kept = kept.borrow_mut();
                if let Some((_, copy)) = kept
                    .iter()
                    .find(|(spec, _)| Arc::ptr_eq(&spec.inner, &self.inner))
                {
                    return copy.clone();
                }
                let copy = ParseSpec {
                    inner: self.inner.iter().cloned().collect(),
                };
                if kept.len() == KEPT {
                    kept.remove(0);
                }
                kept.push((self.clone(), copy.clone()));
                copy
            })
            // The thread is exiting: its copies are gone.
            .unwrap_or_else(|_| self.clone())
    }

    /// The feature names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.inner.iter().map(|e| e.name.as_str())
    }

    /// The index of the feature called `name` (its output's name).
    #[inline]
    fn find(&self, name: &[u8]) -> Option<usize> {
        self.find_name(name, 0..name.len())
    }

    /// The index of the feature called `buf[name]`. Specs are small: a scan compares each
    /// name's length and first eight bytes as two integers, which settles most names; large
    /// specs are searched by halves.
    #[inline(always)]
    fn find_name(&self, buf: &[u8], name: Range<usize>) -> Option<usize> {
        if self.inner.len() <= SCAN_UP_TO {
            let head = NameHead::at(buf, name.clone());
            let rest = buf.get(name.start + HEAD..name.end).unwrap_or_default();
            self.inner.iter().position(|e| {
                e.head == head && (head.len <= HEAD || e.name.as_bytes()[HEAD..] == *rest)
            })
        } else {
            let name = buf.get(name)?;
            self.inner
                .binary_search_by(|e| e.name.as_bytes().cmp(name))
                .ok()
        }
    }

    /// The index of the feature that reads the key `buf[key]` of a record (its name, unless
    /// it is a renamed `Ragged` feature), found as [`ParseSpec::find_name`] finds names.
    #[inline(always)]
    fn find_in(&self, buf: &[u8], key: Range<usize>) -> Option<usize> {
        if self.inner.len() <= SCAN_UP_TO {
            let head = NameHead::at(buf, key.clone());
            let rest = buf.get(key.start + HEAD..key.end).unwrap_or_default();
            self.inner.iter().position(|e| {
                e.key_head == head && (head.len <= HEAD || e.key.as_bytes()[HEAD..] == *rest)
            })
        } else {
            let key = buf.get(key)?;
            let inner = &self.inner;
            inner
                .binary_search_by(|e| inner[e.by_key].key.as_bytes().cmp(key))
                .ok()
                .map(|i| inner[i].by_key)
        }
    }
}

/// The bytes of a name [`NameHead`] holds.
const HEAD: usize = 8;

/// A name's length and first [`HEAD`] bytes (zero-padded), compared as integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NameHead {
    len: usize,
    head: u64,
}

impl NameHead {
    /// The head of the name `buf[name]`: eight bytes read at once and masked to the name's
    /// length when the buffer has them, else byte by byte.
    #[inline(always)]
    fn at(buf: &[u8], name: Range<usize>) -> NameHead {
        let len = name.len();
        let head = match buf.get(name.start..).and_then(<[u8]>::first_chunk::<HEAD>) {
            Some(bytes) if len >= HEAD => u64::from_le_bytes(*bytes),
            Some(bytes) => u64::from_le_bytes(*bytes) & ((1u64 << (8 * len)) - 1),
            None => buf
                .get(name)
                .unwrap_or_default()
                .iter()
                .rev()
                .fold(0u64, |head, &b| (head << 8) | u64::from(b)),
        };
        NameHead { len, head }
    }
}

/// One parsed feature.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    /// `FixedLen` and `FixedLenSequence` features, and `Ragged` ones of one example.
    Dense(Tensor),
    /// `VarLen` features.
    Sparse(SparseTensor),
    /// `Ragged` features of a batch ([`parse_example`]).
    Ragged(RaggedValues),
}

impl Parsed {
    /// What the feature is, for errors: `dense`, `sparse` or `ragged`.
    fn kind(&self) -> &'static str {
        match self {
            Parsed::Dense(_) => "dense",
            Parsed::Sparse(_) => "sparse",
            Parsed::Ragged(_) => "ragged",
        }
    }
}

/// The features of one example (or of a batch), by name.
#[derive(Clone, Debug)]
pub struct ParsedExample {
    spec: ParseSpec,
    /// In the spec's order; `None` once taken out.
    features: Vec<Option<Parsed>>,
}

impl ParsedExample {
    /// The feature called `name`.
    pub fn get(&self, name: &str) -> Option<&Parsed> {
        self.spec
            .find(name.as_bytes())
            .and_then(|i| self.features[i].as_ref())
    }

    /// The feature called `name`, or why there is none.
    fn lookup(&self, name: &str) -> anyhow::Result<&Parsed> {
        match self.spec.find(name.as_bytes()) {
            Some(i) => self.features[i]
                .as_ref()
                .ok_or_else(|| invalid(format!("feature {name} was taken out"))),
            None => Err(invalid(format!("no feature {name} in the spec"))),
        }
    }

    /// The dense tensor called `name`.
    ///
    /// # Errors
    ///
    /// When the spec has no such feature, it is sparse or ragged, or it was taken out.
    pub fn dense(&self, name: &str) -> anyhow::Result<&Tensor> {
        match self.lookup(name)? {
            Parsed::Dense(t) => Ok(t),
            other => Err(invalid(format!("feature {name} is {}", other.kind()))),
        }
    }

    /// The sparse tensor called `name`.
    ///
    /// # Errors
    ///
    /// When the spec has no such feature, it is dense or ragged, or it was taken out.
    pub fn sparse(&self, name: &str) -> anyhow::Result<&SparseTensor> {
        match self.lookup(name)? {
            Parsed::Sparse(t) => Ok(t),
            other => Err(invalid(format!("feature {name} is {}", other.kind()))),
        }
    }

    /// The ragged tensor called `name`: a `Ragged` feature of a batch ([`parse_example`]; of
    /// one example, it is a 1-D dense tensor, as in TensorFlow).
    ///
    /// # Errors
    ///
    /// When the spec has no such feature, it is dense or sparse, or it was taken out.
    pub fn ragged(&self, name: &str) -> anyhow::Result<&RaggedValues> {
        match self.lookup(name)? {
            Parsed::Ragged(t) => Ok(t),
            other => Err(invalid(format!("feature {name} is {}", other.kind()))),
        }
    }

    /// The one value of the feature called `name`, as `i64`, `f32` or [`Bytes`]: the way to
    /// read a label or an id (a `FixedLen` feature of shape `[]` or `[1]`, or a `VarLen` one
    /// that holds one value).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use streamload::format::{Example, FeatureSpec, ParseSpec, parse_single_example};
    /// use streamload::tensor::DType;
    ///
    /// let spec = ParseSpec::new([
    ///     ("label", FeatureSpec::fixed_len([], DType::Int64)),
    ///     ("weight", FeatureSpec::fixed_len([1], DType::Float32)),
    ///     ("id", FeatureSpec::fixed_len([], DType::String)),
    ///     ("pixels", FeatureSpec::fixed_len([2], DType::Float32)),
    /// ])?;
    /// let record = Example::new()
    ///     .with_int64("label", [7])
    ///     .with_floats("weight", [0.5])
    ///     .with_bytes("id", ["img-1"])
    ///     .with_floats("pixels", [0.1, 0.2])
    ///     .encode_to_bytes();
    /// let parsed = parse_single_example(&record, &spec)?;
    /// let label: i64 = parsed.scalar("label")?;
    /// assert_eq!(label, 7);
    /// assert_eq!(parsed.scalar::<f32>("weight")?, 0.5);
    /// assert_eq!(parsed.scalar::<Bytes>("id")?, "img-1");
    /// // Another type, or more than one value, is an error that says what the feature holds.
    /// let err = parsed.scalar::<f32>("label").unwrap_err();
    /// assert_eq!(err.to_string(), "feature label holds int64 values, not float");
    /// let err = parsed.scalar::<f32>("pixels").unwrap_err();
    /// assert_eq!(err.to_string(), "feature pixels holds 2 values (shape [2]), not one");
    /// # anyhow::Ok(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the feature: when the spec has no such feature, it
    /// was taken out, it holds another data type, or it holds other than one value (a batch
    /// from `parse_example`, a longer shape, an empty or longer `VarLen` list).
    pub fn scalar<T: Element + Clone>(&self, name: &str) -> anyhow::Result<T> {
        let (values, shape) = match self.lookup(name)? {
            Parsed::Dense(t) => (t.values(), Some(t.shape())),
            Parsed::Sparse(t) => (t.values(), Some(t.dense_shape())),
            Parsed::Ragged(t) => (t.values(), None),
        };
        let Some(slice) = T::slice(values) else {
            return Err(invalid(format!(
                "feature {name} holds {} values, not {}",
                values.dtype(),
                T::DTYPE
            )));
        };
        match slice {
            [one] => Ok(one.clone()),
            _ => Err(invalid(format!(
                "feature {name} holds {} values ({}), not one",
                slice.len(),
                match shape {
                    Some(shape) => format!("shape {shape:?}"),
                    None => "a ragged batch".to_string(),
                }
            ))),
        }
    }

    /// Takes the dense tensor called `name` out, without copying it; the feature is gone
    /// from this `ParsedExample` afterwards.
    ///
    /// ```
    /// use streamload::format::{Example, FeatureSpec, ParseSpec, parse_single_example};
    /// use streamload::tensor::DType;
    ///
    /// let spec = ParseSpec::new([("label", FeatureSpec::fixed_len([], DType::Int64))])?;
    /// let record = Example::new().with_int64("label", [7]).encode_to_bytes();
    /// let mut parsed = parse_single_example(&record, &spec)?;
    /// assert_eq!(parsed.take_dense("label")?.as_slice::<i64>(), Some(&[7][..]));
    /// assert!(parsed.dense("label").is_err()); // taken out
    /// # anyhow::Ok(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`ParsedExample::dense`]; the feature stays when it is sparse or ragged.
    pub fn take_dense(&mut self, name: &str) -> anyhow::Result<Tensor> {
        match self.take(name)? {
            Parsed::Dense(t) => Ok(t),
            other => self.put_back(name, other),
        }
    }

    /// Takes the ragged tensor called `name` out, without copying it; the feature is gone
    /// from this `ParsedExample` afterwards.
    ///
    /// # Errors
    ///
    /// As [`ParsedExample::ragged`]; the feature stays when it is dense or sparse.
    pub fn take_ragged(&mut self, name: &str) -> anyhow::Result<RaggedValues> {
        match self.take(name)? {
            Parsed::Ragged(t) => Ok(t),
            other => self.put_back(name, other),
        }
    }

    /// Takes the feature called `name` out, whatever it is, without copying it.
    ///
    /// # Errors
    ///
    /// When the spec has no such feature, or it was taken out.
    pub fn take(&mut self, name: &str) -> anyhow::Result<Parsed> {
        let Some(i) = self.spec.find(name.as_bytes()) else {
            return Err(invalid(format!("no feature {name} in the spec")));
        };
        self.features[i]
            .take()
            .ok_or_else(|| invalid(format!("feature {name} was taken out")))
    }

    /// Puts back a feature [`ParsedExample::take`] took out that was not of the kind asked
    /// for, and says so.
    fn put_back<T>(&mut self, name: &str, parsed: Parsed) -> anyhow::Result<T> {
        let error = invalid(format!("feature {name} is {}", parsed.kind()));
        if let Some(i) = self.spec.find(name.as_bytes()) {
            self.features[i] = Some(parsed);
        }
        Err(error)
    }

    /// Every feature with its name, in the order of [`ParseSpec::names`] (those taken out are
    /// left out).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Parsed)> {
        self.spec
            .names()
            .zip(&self.features)
            .filter_map(|(name, parsed)| Some((name, parsed.as_ref()?)))
    }
}

/// `tf.io.parse_single_example`: one serialized `tf.train.Example` to tensors.
///
/// `FixedLen` features have their spec's shape; `VarLen` features are 1-D sparse tensors;
/// `FixedLenSequence` features have shape `[rows, ...shape]`; `Ragged` features are 1-D
/// tensors of their values (none when missing). Byte strings are slices of `serialized` (no
/// copy).
///
/// # Errors
///
/// TensorFlow's `InvalidArgumentError`s, with its messages: a record that is not an
/// `Example` ("Could not parse example input"), a required feature missing ("Feature: x
/// (data type: float) is required but could not be found."), a type mismatch ("Key: x.  Data
/// types don't match. ..."), the wrong number of values ("Key: x.  Can't parse serialized
/// Example: Some float_list slice was not parsed."), a sequence not divisible into rows.
/// The record is read as TensorFlow's fast parser reads it, quirks included: the last entry
/// of the feature map for a key counts, a `Feature`'s first list is its only one, and of
/// several problems the one nearest the record's end is reported.
pub fn parse_single_example(serialized: &Bytes, spec: &ParseSpec) -> anyhow::Result<ParsedExample> {
    let mut features = Vec::with_capacity(spec.inner.len());
    parse_raw(serialized, spec, Mode::Single, |entry, values| {
        features.push(Some(single_output(entry, values)));
    })?;
    Ok(ParsedExample {
        spec: spec.local(),
        features,
    })
}

/// `tf.io.parse_example`: a batch of serialized `tf.train.Example`s to batched tensors.
///
/// `FixedLen` features get shape `[batch, ...shape]`; `VarLen` features are 2-D sparse
/// tensors of dense shape `[batch, longest]`; `FixedLenSequence` features are padded with
/// their default (zero when none) to `[batch, longest, ...shape]`; `Ragged` features are
/// [`RaggedValues`] of `batch` rows (an empty row for a missing feature).
///
/// # Errors
///
/// TensorFlow's batched messages, which name the record: `Name: <unknown>, Key: x, Index: 3.
///  Number of float values != expected.  Values size: 1 but output shape: [2]`, `Name:
/// <unknown>, Feature: x (data type: float) is required but could not be found.`, ...; of
/// several records in error, the first.
pub fn parse_example(serialized: &[Bytes], spec: &ParseSpec) -> anyhow::Result<ParsedExample> {
    let batch = serialized.len();
    // Each feature's values for the whole batch, appended record by record where they are
    // decoded (no list per record), and, but for `FixedLen` features, how many each record
    // gave (`None`: missing). A record of n bytes holds at most n values: never more is
    // reserved.
    let bytes: usize = serialized.iter().map(Bytes::len).sum();
    let mut outs: PerFeature<Values> = spec
        .inner
        .iter()
        .map(|entry| {
            let capacity = entry.capacity().map_or(0, |n| n.saturating_mul(batch));
            Values::with_capacity(entry.spec.dtype(), capacity.min(bytes))
        })
        .collect();
    let mut counts: PerFeature<Vec<Option<usize>>> = spec
        .inner
        .iter()
        .map(|entry| match entry.spec {
            FeatureSpec::FixedLen { .. } => Vec::new(),
            _ => Vec::with_capacity(batch),
        })
        .collect();
    // TensorFlow parses a batch in minibatches; a sequence feature's error counts the values
    // of the records before in the same minibatch.
    let mut prior = vec![0usize; spec.inner.len()];
    let minibatches = minibatches(serialized);
    let mut next_minibatch = 1;
    std::hint::black_box(touch(serialized));
    // How many values each feature of the record gave (`None`: missing).
    let mut given = PerFeature::new();
    for (index, record) in serialized.iter().enumerate() {
        if next_minibatch < minibatches.len() && index == minibatches[next_minibatch] {
            prior.iter_mut().for_each(|p| *p = 0);
            next_minibatch += 1;
        }
        let mode = Mode::Batch {
            index,
            prior: &prior,
        };
        given.clear();
        // An error ends the batch: what a record appended before it does not matter.
        validate(
            record,
            spec,
            mode,
            &mut given,
            |f, entry, found| match found {
                Found::Missing => Ok(None),
                Found::Kindless { .. } => Ok(Some(0)),
                Found::List { kind, list, .. } => {
                    check(record, entry, f, *kind, list.clone(), mode, &mut outs[f]).map(Some)
                }
            },
        )?;
        for (f, (entry, &count)) in spec.inner.iter().zip(given.iter()).enumerate() {
            prior[f] += count.unwrap_or(0);
            match (&entry.spec, count) {
                (FeatureSpec::FixedLen { default, .. }, None) => match default {
                    Some(d) => outs[f].extend_from(d),
                    None => unreachable!("validate rejects a missing required feature"),
                },
                (FeatureSpec::FixedLen { .. }, Some(_)) => {}
                (_, count) => counts[f].push(count),
            }
        }
    }
    let features = spec
        .inner
        .iter()
        .zip(outs)
        .zip(counts)
        .map(|((entry, values), counts)| Some(batch_output(entry, values, &counts, batch)))
        .collect();
    Ok(ParsedExample {
        spec: spec.local(),
        features,
    })
}

/// Reads a byte of each of the first two and last two cache lines of every record: loads
/// that do not depend on each other, which the processor keeps in flight together, so
/// that the walk of each record (its feature map's entries: at its start, and after a long
/// value, often at its end) finds them in cache rather than waiting on each in turn. A
/// batch after a shuffle is records from all over a large buffer, none of them in cache.
fn touch(serialized: &[Bytes]) -> u8 {
    let at = |r: &Bytes, i: usize| r.get(i).copied().unwrap_or(0);
    serialized.iter().fold(0, |acc, r| {
        let n = r.len();
        acc ^ at(r, 0) ^ at(r, 64) ^ at(r, n.saturating_sub(128)) ^ at(r, n.saturating_sub(1))
    })
}

/// The first record of each of TensorFlow's minibatches (`FastParseExample`): about 50 kB of
/// records each, at least `min(8, records)` and at most 64 of them.
fn minibatches(serialized: &[Bytes]) -> Vec<usize> {
    let (mut count, mut bytes) = (0usize, 0usize);
    for record in serialized {
        if bytes == 0 {
            count += 1;
        }
        bytes += record.len() + 1;
        if bytes > 50_000 {
            bytes = 0;
        }
    }
    let n = serialized.len().min(8).max(count.min(64));
    (0..n).map(|m| serialized.len() * m / n).collect()
}

/// The most values a `FixedLen` feature's shape (a `FixedLenSequence`'s row) may hold: 2^28
/// (an `Example` is a protobuf message, at most 2 GiB; 2^28 int64s or floats are 1 to 2 GiB).
const MAX_VALUES: usize = 1 << 28;

/// The number of values in `shape`, refused past [`MAX_VALUES`] (or when it overflows).
fn values_in(name: &str, shape: &[usize]) -> anyhow::Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= MAX_VALUES)
        .ok_or_else(|| {
            invalid(format!(
                "feature {name}: shape {shape:?} holds more than {MAX_VALUES} values (2^28), \
                 more than an Example can hold"
            ))
        })
}

fn invalid(message: String) -> anyhow::Error {
    Error::InvalidArgument(message).into()
}

fn single_output(entry: &Entry, values: Option<Values>) -> Parsed {
    match &entry.spec {
        FeatureSpec::FixedLen { shape, default, .. } => {
            // `parse_raw` checked presence (or a default) and the count.
            let values = values
                .or_else(|| default.clone())
                .unwrap_or_else(|| unreachable!("parse_raw rejects a missing required feature"));
            Parsed::Dense(Tensor::new_unchecked(shape.clone(), values))
        }
        FeatureSpec::VarLen { dtype } => {
            let values = values.unwrap_or_else(|| Values::empty(*dtype));
            let n = values.len();
            Parsed::Sparse(SparseTensor::new_unchecked(
                (0..n as i64).collect(),
                values,
                vec![n],
            ))
        }
        FeatureSpec::FixedLenSequence { shape, dtype, .. } => {
            let values = values.unwrap_or_else(|| Values::empty(*dtype));
            let rows = values.len().checked_div(entry.stride).unwrap_or(0);
            let mut full = Vec::with_capacity(shape.len() + 1);
            full.push(rows);
            full.extend_from_slice(shape);
            Parsed::Dense(Tensor::new_unchecked(full, values))
        }
        FeatureSpec::Ragged { dtype, .. } => {
            let values = values.unwrap_or_else(|| Values::empty(*dtype));
            Parsed::Dense(Tensor::new_unchecked(vec![values.len()], values))
        }
    }
}

/// A feature's output for a batch: `values` are every record's, one after another (a
/// missing `FixedLen` feature's default in its place), `counts` how many each record gave
/// (not kept for `FixedLen` features, whose records give `stride` each).
fn batch_output(entry: &Entry, values: Values, counts: &[Option<usize>], batch: usize) -> Parsed {
    let dtype = entry.spec.dtype();
    match &entry.spec {
        FeatureSpec::FixedLen { shape, .. } => {
            let mut full = vec![batch];
            full.extend_from_slice(shape);
            Parsed::Dense(Tensor::new_unchecked(full, values))
        }
        FeatureSpec::VarLen { .. } => {
            let mut indices = Vec::with_capacity(2 * values.len());
            let mut longest = 0;
            for (b, &n) in counts.iter().enumerate() {
                let n = n.unwrap_or(0);
                for j in 0..n {
                    indices.extend_from_slice(&[b as i64, j as i64]);
                }
                longest = longest.max(n);
            }
            Parsed::Sparse(SparseTensor::new_unchecked(
                indices,
                values,
                vec![batch, longest],
            ))
        }
        FeatureSpec::FixedLenSequence { shape, default, .. } => {
            // Each record's rows, padded to the longest's.
            let stride = entry.stride;
            let rows = |n: Option<usize>| n.map_or(0, |n| n.checked_div(stride).unwrap_or(0));
            let longest = counts.iter().map(|&n| rows(n)).max().unwrap_or(0);
            let mut out = Values::with_capacity(dtype, batch * longest * stride);
            let mut at = 0;
            for &n in counts {
                let n_values = n.unwrap_or(0);
                out.extend_range(&values, at..at + n_values);
                at += n_values;
                let pad = (longest - rows(n)) * stride;
                match default {
                    Some(d) => out.extend_repeat(d, 0, pad),
                    None => out.extend_zeros(pad),
                }
            }
            let mut full = vec![batch, longest];
            full.extend_from_slice(shape);
            Parsed::Dense(Tensor::new_unchecked(full, out))
        }
        FeatureSpec::Ragged { .. } => {
            let mut row_splits = Vec::with_capacity(batch + 1);
            row_splits.push(0);
            let mut at = 0i64;
            for &n in counts {
                at += n.unwrap_or(0) as i64;
                row_splits.push(at);
            }
            Parsed::Ragged(RaggedValues::new_unchecked(values, row_splits))
        }
    }
}

/// How a record is parsed: alone (`parse_single_example`, TensorFlow's `FastParseSingleExample`)
/// or as record `index` of a batch (`parse_example`, its `FastParseExample`). The two differ in
/// their error messages and in one rule (see [`Found::Kindless`]).
#[derive(Clone, Copy)]
enum Mode<'a> {
    Single,
    Batch {
        index: usize,
        /// Values of each feature in the records before this one in its minibatch: TensorFlow
        /// counts them into a sequence feature's "Saw N values".
        prior: &'a [usize],
    },
}

/// The entry of the feature map that counts for one spec'd feature.
#[derive(Clone)]
enum Found {
    Missing,
    /// A `Feature` with no list set. Alone, TensorFlow steps over such entries (an earlier
    /// entry for the key counts instead); in a batch, the last entry of a `VarLen` or
    /// `Ragged` feature counts even when it is empty (it yields no values).
    Kindless {
        entry: usize,
    },
    /// A list of `kind`, the `Feature`'s bytes after its first tag in `list`.
    List {
        entry: usize,
        kind: DType,
        list: Range<usize>,
    },
}

impl Found {
    /// The index of the entry in the feature map (0 when missing).
    fn entry(&self) -> usize {
        match self {
            Found::Missing => 0,
            Found::Kindless { entry } | Found::List { entry, .. } => *entry,
        }
    }
}

/// One entry per spec'd feature, on the stack for specs of up to [`SCAN_UP_TO`] features.
type PerFeature<T> = SmallVec<[T; SCAN_UP_TO]>;

/// Parses the spec'd features of one record into flat values, checking everything
/// TensorFlow checks per example, and hands each feature's values to `emit` in the spec's
/// order. `None` means missing.
fn parse_raw(
    record: &Bytes,
    spec: &ParseSpec,
    mode: Mode<'_>,
    mut emit: impl FnMut(&Entry, Option<Values>),
) -> anyhow::Result<()> {
    let mut values = PerFeature::new();
    validate(
        record,
        spec,
        mode,
        &mut values,
        |f, entry, found| match found {
            Found::Missing => Ok(None),
            Found::Kindless { .. } => Ok(Some(Values::empty(entry.spec.dtype()))),
            Found::List { kind, list, .. } => {
                // A record of n bytes holds at most n values: never more is reserved.
                let capacity = entry.capacity().unwrap_or(0).min(record.len());
                let mut values = Values::with_capacity(entry.spec.dtype(), capacity);
                check(record, entry, f, *kind, list.clone(), mode, &mut values)?;
                Ok(Some(values))
            }
        },
    )?;
    for (entry, values) in spec.inner.iter().zip(values.iter_mut()) {
        emit(entry, values.take());
    }
    Ok(())
}

/// Walks one record and checks everything TensorFlow checks per example: `read` turns the
/// entry found for each spec'd feature into its output (`Ok(None)` for a missing feature) or
/// its error in TensorFlow's words, and pushes the outputs in the spec's order to `outputs`.
///
/// TensorFlow's fast parser is followed rule for rule, quirks included: the feature map's
/// entries are read in one walk; the last entry for a key counts (an entry with no list
/// does not replace an earlier one); a `Feature`'s kind is its first tag and only its first
/// list is read; of several problems in a record, the one in the entry nearest its end is
/// reported (TensorFlow walks the entries backwards), and a missing required feature only
/// when there is none.
fn validate<T>(
    record: &Bytes,
    spec: &ParseSpec,
    mode: Mode<'_>,
    outputs: &mut PerFeature<Option<T>>,
    mut read: impl FnMut(usize, &Entry, &Found) -> Result<Option<T>, String>,
) -> anyhow::Result<()> {
    let mut found: PerFeature<Found> = spec.inner.iter().map(|_| Found::Missing).collect();
    let Ok(unsupported) = wire::walk(record, spec, mode, &mut found) else {
        let shown = &record[..record.len().min(256)];
        let more = if record.len() > 256 { "..." } else { "" };
        return Err(invalid(format!(
            "Could not parse example input, value: '{}{more}'",
            shown.escape_ascii()
        )));
    };
    // Every feature's output (or its error, at the position of its entry).
    let mut error: Option<(usize, String)> =
        unsupported.map(|entry| (entry, "Unsupported datatype.".to_string()));
    for (f, (entry, found)) in spec.inner.iter().zip(&found).enumerate() {
        match read(f, entry, found) {
            Ok(output) => outputs.push(output),
            Err(message) => {
                let at = found.entry();
                if error.as_ref().is_none_or(|(e, _)| at > *e) {
                    error = Some((at, message));
                }
                outputs.push(None);
            }
        }
    }
    if let Some((_, message)) = error {
        return Err(invalid(message));
    }
    for (entry, output) in spec.inner.iter().zip(outputs.iter()) {
        if output.is_none()
            && let FeatureSpec::FixedLen { default: None, .. } = entry.spec
        {
            let name = match mode {
                Mode::Single => String::new(),
                Mode::Batch { .. } => "Name: <unknown>, ".to_string(),
            };
            return Err(invalid(format!(
                "{name}Feature: {} (data type: {}) is required but could not be found.",
                entry.name,
                entry.spec.dtype()
            )));
        }
    }
    Ok(())
}

/// Checks the list found for feature `f` and decodes it into `out` (`()` only counts): its
/// number of values, or the error in TensorFlow's words.
fn check(
    record: &Bytes,
    entry: &Entry,
    f: usize,
    kind: DType,
    list: Range<usize>,
    mode: Mode<'_>,
    out: &mut impl wire::ListOut,
) -> Result<usize, String> {
    let dtype = entry.spec.dtype();
    // TensorFlow names the key read (a `Ragged` feature's `value_key`), not the output.
    let name = &entry.key;
    // Built only for an error: the common path allocates nothing but the values.
    let key = || match mode {
        Mode::Single => format!("Key: {name}.  "),
        Mode::Batch { index, .. } => format!("Name: <unknown>, Key: {name}, Index: {index}.  "),
    };
    let list_name = match dtype {
        DType::Int64 => "int64_list",
        DType::Float32 => "float_list",
        DType::String => "bytes_list",
    };
    let values_name = match dtype {
        DType::Int64 => "int64",
        DType::Float32 => "float",
        DType::String => "bytes",
    };
    let parse_failed = |single: &str| match mode {
        Mode::Single => format!("{}Can't parse serialized Example: {single}", key()),
        Mode::Batch { .. } => format!("{}Can't parse serialized Example.", key()),
    };
    if kind != dtype {
        return Err(match entry.spec {
            FeatureSpec::VarLen { .. } | FeatureSpec::Ragged { .. } => {
                format!(
                    "{}Data types don't match. Expected type: {dtype}, Actual type: {kind}",
                    key()
                )
            }
            _ => {
                format!(
                    "{}Data types don't match. Data type: {kind} but expected type: {dtype}",
                    key()
                )
            }
        });
    }
    let count = wire::decode_list(record, list, dtype, entry.capacity(), out);
    match &entry.spec {
        FeatureSpec::FixedLen { shape, .. } => {
            let Ok(count) = count else {
                return Err(parse_failed(&format!("Parsing {list_name} failed.")));
            };
            if count != entry.stride {
                return Err(match mode {
                    Mode::Single => {
                        parse_failed(&format!("Some {list_name} slice was not parsed."))
                    }
                    Mode::Batch { .. } => format!(
                        "{}Number of {values_name} values != expected.  Values size: {count} \
                         but output shape: {}",
                        key(),
                        shape_string(None, shape)
                    ),
                });
            }
            Ok(count)
        }
        FeatureSpec::VarLen { .. }
        | FeatureSpec::FixedLenSequence { .. }
        | FeatureSpec::Ragged { .. } => {
            let Ok(count) = count else {
                return Err(parse_failed(&match dtype {
                    DType::String => "Could not get num elements in bytes_list.".to_string(),
                    _ => format!("Parsing {list_name} failed."),
                }));
            };
            if let FeatureSpec::FixedLenSequence { shape, .. } = &entry.spec
                && count.checked_rem(entry.stride).unwrap_or(count) != 0
            {
                return Err(match mode {
                    Mode::Single => format!(
                        "Error while parsing feature with key {name}: number of elements should \
                         be divisible by {}, found {count} instead",
                        entry.stride
                    ),
                    Mode::Batch { prior, .. } => format!(
                        "{}Number of {values_name} values is not a multiple of stride length. \
                         Saw {} values but output shape is: {}",
                        key(),
                        prior[f] + count,
                        shape_string(Some("?"), shape)
                    ),
                });
            }
            Ok(count)
        }
    }
}

/// TensorFlow's `TensorShape::DebugString`: `[2,3]`, `[]`, `[?,2]` (with a leading unknown).
fn shape_string(leading: Option<&str>, shape: &[usize]) -> String {
    let dims: Vec<String> = leading
        .map(str::to_string)
        .into_iter()
        .chain(shape.iter().map(usize::to_string))
        .collect();
    format!("[{}]", dims.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec without a renamed feature keeps the fast lookups (names are keys); one with a
    /// `value_key` finds records' keys by key and outputs by name.
    #[test]
    fn keys_and_names_are_found_apart_only_when_renamed() {
        let plain = ParseSpec::new([
            ("a", FeatureSpec::var_len(DType::Int64)),
            ("b", FeatureSpec::ragged(DType::Int64)),
        ])
        .expect("spec");
        assert!(
            plain
                .inner
                .iter()
                .enumerate()
                .all(|(i, e)| e.key == e.name && e.by_key == i)
        );
        assert_eq!(plain.find(b"b"), Some(1));
        assert_eq!(plain.find(b"b"), plain.find_in(b"b", 0..1));

        let renamed = ParseSpec::new([
            ("a", FeatureSpec::var_len(DType::Int64)),
            (
                "long_output_name",
                FeatureSpec::ragged(DType::Int64).with_value_key("long_record_key"),
            ),
        ])
        .expect("spec");
        assert!(renamed.local().inner.iter().any(|e| e.key != e.name));
        let by_name = renamed.find(b"long_output_name").expect("by name");
        let key = b"long_record_key";
        assert_eq!(renamed.find_in(key, 0..key.len()), Some(by_name));
        assert_eq!(renamed.find(key), None);
        assert_eq!(renamed.find_in(b"long_output_name", 0..16), None);
        assert_eq!(renamed.find(b"a"), renamed.find_in(b"a", 0..1));
    }
}
