//! `parse_single_example` / `parse_example`: serialized `tf.train.Example`s to tensors under a
//! feature spec, with TensorFlow's outputs and TensorFlow's errors.
//!
//! The parser walks the protobuf wire format directly (with `prost`'s wire primitives), once
//! per record: features the spec does not name are stepped over without being looked into,
//! and the lists of those it names are decoded straight into their output values (floats and
//! integers into the tensor's vector, `string` values as slices of the record, never copied).
//! It builds no feature map and, for specs of up to 8 features, allocates only the outputs.

use std::ops::Range;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};
use smallvec::SmallVec;

use crate::Error;
use crate::tensor::{DType, SparseTensor, Tensor, Values};

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
}

impl FeatureSpec {
    /// `tf.io.FixedLenFeature(shape, dtype)` with no default (required).
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
    /// `FixedLenSequence`: the one padding value). Ignored by `VarLen`.
    pub fn with_default(mut self, value: impl Into<Values>) -> FeatureSpec {
        match &mut self {
            FeatureSpec::FixedLen { default, .. }
            | FeatureSpec::FixedLenSequence { default, .. } => *default = Some(value.into()),
            FeatureSpec::VarLen { .. } => {}
        }
        self
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            FeatureSpec::FixedLen { dtype, .. }
            | FeatureSpec::VarLen { dtype }
            | FeatureSpec::FixedLenSequence { dtype, .. } => *dtype,
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
    inner: Arc<[Entry]>,
}

#[derive(Debug)]
struct Entry {
    name: String,
    spec: FeatureSpec,
    /// Values per example (`FixedLen`) or per row (`FixedLenSequence`).
    stride: usize,
}

impl ParseSpec {
    /// Checks and stores the features (TensorFlow raises these errors when the op is built).
    ///
    /// # Errors
    ///
    /// A `FixedLenSequence` without `allow_missing` ("Unsupported: FixedLenSequenceFeature
    /// requires allow_missing to be True."), a default of the wrong type or size, or a name
    /// given twice.
    pub fn new<N: Into<String>>(
        features: impl IntoIterator<Item = (N, FeatureSpec)>,
    ) -> anyhow::Result<ParseSpec> {
        let mut entries: Vec<Entry> = Vec::new();
        for (name, spec) in features {
            let name = name.into();
            let (stride, default) = match &spec {
                FeatureSpec::FixedLen { shape, default, .. } => {
                    (shape.iter().product::<usize>(), default.as_ref())
                }
                FeatureSpec::VarLen { .. } => (1, None),
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
                    (shape.iter().product::<usize>(), default.as_ref())
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
                    return Err(invalid(format!(
                        "feature {name}: default_value has {} values, needs {want}",
                        default.len()
                    )));
                }
            }
            entries.push(Entry { name, spec, stride });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = entries.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(invalid(format!("feature {} is given twice", w[0].name)));
        }
        Ok(ParseSpec {
            inner: entries.into(),
        })
    }

    /// The feature names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.inner.iter().map(|e| e.name.as_str())
    }

    /// The index of the feature called `key`. Specs are small: a scan that compares lengths
    /// first settles most keys without comparing bytes; large specs are searched by halves.
    #[inline]
    fn find(&self, key: &[u8]) -> Option<usize> {
        if self.inner.len() <= SCAN_UP_TO {
            self.inner.iter().position(|e| e.name.as_bytes() == key)
        } else {
            self.inner
                .binary_search_by(|e| e.name.as_bytes().cmp(key))
                .ok()
        }
    }
}

/// One parsed feature.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    /// `FixedLen` and `FixedLenSequence` features.
    Dense(Tensor),
    /// `VarLen` features.
    Sparse(SparseTensor),
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
    /// When the spec has no such feature, it is sparse, or it was taken out.
    pub fn dense(&self, name: &str) -> anyhow::Result<&Tensor> {
        match self.lookup(name)? {
            Parsed::Dense(t) => Ok(t),
            Parsed::Sparse(_) => Err(invalid(format!("feature {name} is sparse"))),
        }
    }

    /// The sparse tensor called `name`.
    ///
    /// # Errors
    ///
    /// When the spec has no such feature, it is dense, or it was taken out.
    pub fn sparse(&self, name: &str) -> anyhow::Result<&SparseTensor> {
        match self.lookup(name)? {
            Parsed::Sparse(t) => Ok(t),
            Parsed::Dense(_) => Err(invalid(format!("feature {name} is dense"))),
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
    /// As [`ParsedExample::dense`]; the feature stays when it is sparse.
    pub fn take_dense(&mut self, name: &str) -> anyhow::Result<Tensor> {
        let Some(i) = self.spec.find(name.as_bytes()) else {
            return Err(invalid(format!("no feature {name} in the spec")));
        };
        match self.features[i].take() {
            Some(Parsed::Dense(t)) => Ok(t),
            Some(sparse @ Parsed::Sparse(_)) => {
                self.features[i] = Some(sparse);
                Err(invalid(format!("feature {name} is sparse")))
            }
            None => Err(invalid(format!("feature {name} was taken out"))),
        }
    }

    /// Every feature with its name, in name order (those taken out are left out).
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
/// `FixedLenSequence` features have shape `[rows, ...shape]`. Byte strings are slices of
/// `serialized` (no copy).
///
/// # Errors
///
/// TensorFlow's `InvalidArgumentError`s, with its messages: a record that is not an
/// `Example` ("Could not parse example input"), a required feature missing ("Feature: x
/// (data type: float) is required but could not be found."), a type mismatch ("Key: x.  Data
/// types don't match. ..."), the wrong number of values ("Key: x.  Can't parse serialized
/// Example: Some float_list slice was not parsed."), a sequence not divisible into rows.
pub fn parse_single_example(serialized: &Bytes, spec: &ParseSpec) -> anyhow::Result<ParsedExample> {
    let mut features = Vec::with_capacity(spec.inner.len());
    parse_raw(serialized, spec, |entry, values| {
        features.push(Some(single_output(entry, values)));
    })?;
    Ok(ParsedExample {
        spec: spec.clone(),
        features,
    })
}

/// `tf.io.parse_example`: a batch of serialized `tf.train.Example`s to batched tensors.
///
/// `FixedLen` features get shape `[batch, ...shape]`; `VarLen` features are 2-D sparse
/// tensors of dense shape `[batch, longest]`; `FixedLenSequence` features are padded with
/// their default (zero when none) to `[batch, longest, ...shape]`.
///
/// # Errors
///
/// As [`parse_single_example`], prefixed with the index of the record in the batch.
pub fn parse_example(serialized: &[Bytes], spec: &ParseSpec) -> anyhow::Result<ParsedExample> {
    let mut raws = Vec::with_capacity(serialized.len());
    for (i, record) in serialized.iter().enumerate() {
        let mut raw = PerFeature::with_capacity(spec.inner.len());
        parse_raw(record, spec, |_, values| raw.push(values))
            .map_err(|e| invalid(format!("record {i}: {e}")))?;
        raws.push(raw);
    }
    let batch = serialized.len();
    let features = spec
        .inner
        .iter()
        .enumerate()
        .map(|(f, entry)| {
            Some(batch_output(
                entry,
                raws.iter().map(|r| r[f].as_ref()),
                batch,
            ))
        })
        .collect();
    Ok(ParsedExample {
        spec: spec.clone(),
        features,
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
    }
}

fn batch_output<'a>(
    entry: &Entry,
    raws: impl Iterator<Item = Option<&'a Values>> + Clone,
    batch: usize,
) -> Parsed {
    let dtype = entry.spec.dtype();
    match &entry.spec {
        FeatureSpec::FixedLen { shape, default, .. } => {
            let mut out = Values::with_capacity(dtype, batch * entry.stride);
            for values in raws {
                match values.or(default.as_ref()) {
                    Some(v) => out.extend_from(v),
                    None => unreachable!("parse_raw rejects a missing required feature"),
                }
            }
            let mut full = vec![batch];
            full.extend_from_slice(shape);
            Parsed::Dense(Tensor::new_unchecked(full, out))
        }
        FeatureSpec::VarLen { .. } => {
            let mut out = Values::empty(dtype);
            let mut indices = Vec::new();
            let mut longest = 0;
            for (b, values) in raws.enumerate() {
                if let Some(v) = values {
                    for j in 0..v.len() {
                        indices.extend_from_slice(&[b as i64, j as i64]);
                    }
                    longest = longest.max(v.len());
                    out.extend_from(v);
                }
            }
            Parsed::Sparse(SparseTensor::new_unchecked(
                indices,
                out,
                vec![batch, longest],
            ))
        }
        FeatureSpec::FixedLenSequence { shape, default, .. } => {
            let stride = entry.stride;
            let rows =
                |v: Option<&Values>| v.map_or(0, |v| v.len().checked_div(stride).unwrap_or(0));
            let longest = raws.clone().map(rows).max().unwrap_or(0);
            let mut out = Values::with_capacity(dtype, batch * longest * stride);
            for values in raws {
                if let Some(v) = values {
                    out.extend_from(v);
                }
                let pad = (longest - rows(values)) * stride;
                match default {
                    Some(d) => out.extend_repeat(d, 0, pad),
                    None => out.extend_zeros(pad),
                }
            }
            let mut full = vec![batch, longest];
            full.extend_from_slice(shape);
            Parsed::Dense(Tensor::new_unchecked(full, out))
        }
    }
}

/// What the walk over a record found for one spec'd feature.
struct Slot {
    /// The kind of its list (the last member of the `Feature` oneof set), `None` when it is
    /// missing.
    kind: Option<DType>,
    /// Its values, decoded straight out of the record as its lists are met, when the kind is
    /// the spec's (other kinds are an error and are not decoded).
    values: Option<Values>,
    /// One of its lists could not be decoded.
    bad: bool,
}

impl Slot {
    const EMPTY: Slot = Slot {
        kind: None,
        values: None,
        bad: false,
    };

    /// Forgets what was found (a later map entry, or another oneof member, replaces it).
    fn reset(&mut self, kind: Option<DType>) {
        self.kind = kind;
        self.bad = false;
        match &mut self.values {
            Some(Values::Int64(v)) => v.clear(),
            Some(Values::Float32(v)) => v.clear(),
            Some(Values::String(v)) => v.clear(),
            None => {}
        }
    }
}

/// One entry per spec'd feature, on the stack for specs of up to [`SCAN_UP_TO`] features.
type PerFeature<T> = SmallVec<[T; SCAN_UP_TO]>;

/// Parses the spec'd features of one record into flat values, checking everything
/// TensorFlow checks per example, and hands each feature's values to `emit` in the spec's
/// order. `None` means missing (absent, or a `Feature` with no list).
///
/// One walk over the record: unknown features are skipped without being looked into, and the
/// lists of spec'd ones are decoded straight into their values. The checks then run in the
/// spec's order, so the error reported is the one TensorFlow reports.
fn parse_raw(
    record: &Bytes,
    spec: &ParseSpec,
    mut emit: impl FnMut(&Entry, Option<Values>),
) -> anyhow::Result<()> {
    let mut slots: PerFeature<Slot> = spec.inner.iter().map(|_| Slot::EMPTY).collect();
    if walk(record, spec, &mut slots).is_err() {
        let shown = &record[..record.len().min(256)];
        let more = if record.len() > 256 { "..." } else { "" };
        return Err(invalid(format!(
            "Could not parse example input, value: '{}{more}'",
            shown.escape_ascii()
        )));
    }
    for (entry, slot) in spec.inner.iter().zip(slots) {
        let dtype = entry.spec.dtype();
        let Some(kind) = slot.kind else {
            if let FeatureSpec::FixedLen { default: None, .. } = entry.spec {
                return Err(invalid(format!(
                    "Feature: {} (data type: {dtype}) is required but could not be found.",
                    entry.name
                )));
            }
            emit(entry, None);
            continue;
        };
        if kind != dtype {
            return Err(invalid(format!(
                "Key: {}.  Data types don't match. Data type: {kind} but expected type: {dtype}",
                entry.name
            )));
        }
        if slot.bad {
            return Err(invalid(format!(
                "Key: {}.  Can't parse serialized Example.",
                entry.name
            )));
        }
        let values = slot.values.unwrap_or_else(|| Values::empty(dtype));
        match entry.spec {
            FeatureSpec::FixedLen { .. } if values.len() != entry.stride => {
                let list = match dtype {
                    DType::Int64 => "int64_list",
                    DType::Float32 => "float_list",
                    DType::String => "bytes_list",
                };
                return Err(invalid(format!(
                    "Key: {}.  Can't parse serialized Example: Some {list} slice was not parsed.",
                    entry.name
                )));
            }
            FeatureSpec::FixedLenSequence { .. }
                if values
                    .len()
                    .checked_rem(entry.stride)
                    .unwrap_or(values.len())
                    != 0 =>
            {
                return Err(invalid(format!(
                    "Error while parsing feature with key {}: number of elements should be \
                     divisible by {}, found {} instead",
                    entry.name,
                    entry.stride,
                    values.len()
                )));
            }
            _ => {}
        }
        emit(entry, Some(values));
    }
    Ok(())
}

/// The record is not a well-formed protocol buffer of the expected shape.
struct Malformed;

impl From<prost::DecodeError> for Malformed {
    fn from(_: prost::DecodeError) -> Malformed {
        Malformed
    }
}

type Wire<T> = Result<T, Malformed>;

/// A varint; the one- and two-byte cases (keys, and lengths below 16 KiB) inline.
#[inline(always)]
fn varint(buf: &mut &[u8]) -> Wire<u64> {
    match **buf {
        [b, ..] if b < 0x80 => {
            *buf = &buf[1..];
            Ok(u64::from(b))
        }
        [b0, b1, ..] if b1 < 0x80 => {
            *buf = &buf[2..];
            Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7)
        }
        _ => Ok(decode_varint(buf)?),
    }
}

/// A cursor over `record[range]` that knows its absolute position.
struct Cursor<'a> {
    buf: &'a [u8],
    end: usize,
}

impl<'a> Cursor<'a> {
    fn new(record: &'a [u8], range: Range<usize>) -> Cursor<'a> {
        Cursor {
            buf: &record[range.clone()],
            end: range.end,
        }
    }

    fn pos(&self) -> usize {
        self.end - self.buf.len()
    }

    fn has_remaining(&self) -> bool {
        !self.buf.is_empty()
    }

    #[inline(always)]
    fn key(&mut self) -> Wire<(u32, WireType)> {
        // Tags below 16 with a valid wire type fit in one byte.
        if let Some(&b) = self.buf.first()
            && b < 0x80
            && let Ok(wire) = WireType::try_from(u64::from(b & 7))
            && b >> 3 != 0
        {
            self.buf = &self.buf[1..];
            return Ok((u32::from(b >> 3), wire));
        }
        Ok(decode_key(&mut self.buf)?)
    }

    /// A length-delimited field's byte range (absolute).
    #[inline(always)]
    fn delimited(&mut self) -> Wire<Range<usize>> {
        let len = varint(&mut self.buf)?;
        if len > self.buf.len() as u64 {
            return Err(Malformed);
        }
        let start = self.pos();
        self.buf.advance(len as usize);
        Ok(start..start + len as usize)
    }

    fn skip(&mut self, wire: WireType, tag: u32) -> Wire<()> {
        Ok(skip_field(
            wire,
            tag,
            &mut self.buf,
            DecodeContext::default(),
        )?)
    }
}

/// Walks Example -> Features -> map entries -> Feature, decoding each spec'd feature's lists
/// into its slot. A later entry for the same key replaces an earlier one (protobuf map
/// semantics); a list that does not decode marks its slot (reported in the spec's order).
fn walk(record: &Bytes, spec: &ParseSpec, slots: &mut [Slot]) -> Wire<()> {
    let mut example = Cursor::new(record, 0..record.len());
    while example.has_remaining() {
        let (tag, wire) = example.key()?;
        if tag != 1 {
            example.skip(wire, tag)?;
            continue;
        }
        expect_delimited(wire)?;
        let features = example.delimited()?;
        let mut features = Cursor::new(record, features);
        while features.has_remaining() {
            let (tag, wire) = features.key()?;
            if tag != 1 {
                features.skip(wire, tag)?;
                continue;
            }
            expect_delimited(wire)?;
            let entry = features.delimited()?;
            let mut entry = Cursor::new(record, entry);
            let mut key = 0..0;
            let mut value = None;
            while entry.has_remaining() {
                let (tag, wire) = entry.key()?;
                match tag {
                    1 => {
                        expect_delimited(wire)?;
                        key = entry.delimited()?;
                    }
                    2 => {
                        expect_delimited(wire)?;
                        value = Some(entry.delimited()?);
                    }
                    _ => entry.skip(wire, tag)?,
                }
            }
            let Some(index) = spec.find(&record[key]) else {
                continue;
            };
            let entry = &spec.inner[index];
            let slot = &mut slots[index];
            slot.reset(None);
            let Some(value) = value else {
                continue;
            };
            let mut feature = Cursor::new(record, value);
            while feature.has_remaining() {
                let (tag, wire) = feature.key()?;
                let kind = match tag {
                    1 => DType::String,
                    2 => DType::Float32,
                    3 => DType::Int64,
                    _ => {
                        feature.skip(wire, tag)?;
                        continue;
                    }
                };
                expect_delimited(wire)?;
                let list = feature.delimited()?;
                if slot.kind != Some(kind) {
                    // A different member of the oneof replaces the one set before.
                    slot.reset(Some(kind));
                }
                let dtype = entry.spec.dtype();
                if kind != dtype || slot.bad {
                    continue; // an error either way: nothing to decode
                }
                let values = slot.values.get_or_insert_with(|| {
                    let capacity = match entry.spec {
                        FeatureSpec::FixedLen { .. } => entry.stride,
                        _ => 0,
                    };
                    Values::with_capacity(dtype, capacity)
                });
                if decode_list(record, list, values).is_err() {
                    slot.bad = true;
                }
            }
        }
    }
    Ok(())
}

fn expect_delimited(wire: WireType) -> Wire<()> {
    if wire == WireType::LengthDelimited {
        Ok(())
    } else {
        Err(Malformed)
    }
}

/// Decodes one `BytesList` / `FloatList` / `Int64List` message, packed or not, appending to
/// `out` (whose type was checked against the list's).
fn decode_list(record: &Bytes, range: Range<usize>, out: &mut Values) -> Wire<()> {
    let mut list = Cursor::new(record, range);
    while list.has_remaining() {
        let (tag, wire) = list.key()?;
        if tag != 1 {
            list.skip(wire, tag)?;
            continue;
        }
        match (out as &mut Values, wire) {
            (Values::String(v), WireType::LengthDelimited) => {
                let r = list.delimited()?;
                v.push(record.slice(r));
            }
            (Values::Int64(v), WireType::LengthDelimited) => {
                let r = list.delimited()?;
                let mut packed = &record[r];
                while !packed.is_empty() {
                    v.push(varint(&mut packed)? as i64);
                }
            }
            (Values::Int64(v), WireType::Varint) => v.push(varint(&mut list.buf)? as i64),
            (Values::Float32(v), WireType::LengthDelimited) => {
                let r = list.delimited()?;
                let packed = &record[r];
                if packed.len() % 4 != 0 {
                    return Err(Malformed);
                }
                v.extend(
                    packed
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
            }
            (Values::Float32(v), WireType::ThirtyTwoBit) => {
                if list.buf.len() < 4 {
                    return Err(Malformed);
                }
                v.push(list.buf.get_f32_le());
            }
            _ => return Err(Malformed),
        }
    }
    Ok(())
}
