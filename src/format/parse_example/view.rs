//! `parse_single_example_view`: a `tf.train.Example` checked under a feature spec exactly as
//! `parse_single_example` checks it, whose values are then read in place, one feature at a
//! time, into whatever types the caller keeps: no tensor, no value list, no allocation.

use std::ops::Range;
use std::slice;

use bytes::Bytes;

use super::wire::{self, Stream, le_f32};
use super::{Entry, Found, Mode, ParseSpec, Parsed, PerFeature, invalid, single_output};
use crate::format::FeatureSpec;
use crate::tensor::{DType, Values};

/// [`parse_single_example`](super::parse_single_example) without building tensors: one
/// serialized `tf.train.Example` checked under `spec` (every check, every error, with
/// TensorFlow's messages, as `parse_single_example`), whose features are then read straight
/// out of the record by name as typed iterators.
///
/// For a pipeline that turns each record into its own struct, this skips what
/// `parse_single_example` builds only to be taken apart: a tensor with its shape and a value
/// list per feature. Parsing allocates nothing; byte strings are slices of `serialized`.
/// A missing feature reads as its default (`FixedLen`) or as no values (`VarLen`,
/// `FixedLenSequence`), as in `parse_single_example`'s outputs; a `FixedLen` feature always
/// has `product(shape)` values, a `FixedLenSequence` feature a whole number of rows.
///
/// ```
/// use streamload::format::{Example, FeatureSpec, ParseSpec, parse_single_example_view};
/// use streamload::tensor::DType;
///
/// let spec = ParseSpec::new([
///     ("image", FeatureSpec::fixed_len([], DType::String)),
///     ("label", FeatureSpec::fixed_len([], DType::Int64).with_default(-1)),
///     ("weights", FeatureSpec::fixed_len([2], DType::Float32)),
/// ])?;
/// let record = Example::new()
///     .with_bytes("image", [b"\xff\xd8".as_slice()])
///     .with_floats("weights", [0.5, 2.0])
///     .encode_to_bytes();
///
/// let example = parse_single_example_view(&record, &spec)?;
/// let image = example.bytes("image")?.next(); // a slice of `record`
/// let label = example.int64("label")?.next(); // missing: the default
/// let weights: Vec<f32> = example.floats("weights")?.collect();
/// assert_eq!(image.as_deref(), Some(&b"\xff\xd8"[..]));
/// assert_eq!(label, Some(-1));
/// assert_eq!(weights, [0.5, 2.0]);
///
/// // The same checks as parse_single_example: two weights are required.
/// let short = Example::new().with_bytes("image", [b"x"]).with_floats("weights", [1.0]);
/// let error = parse_single_example_view(&short.encode_to_bytes(), &spec).unwrap_err();
/// assert!(error.to_string().contains("Some float_list slice was not parsed."));
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// Those of [`parse_single_example`](super::parse_single_example), with the same messages.
pub fn parse_single_example_view<'a>(
    serialized: &'a Bytes,
    spec: &'a ParseSpec,
) -> anyhow::Result<ExampleView<'a>> {
    let mut view = ExampleView {
        record: serialized,
        spec,
        sources: PerFeature::new(),
    };
    super::validate(
        serialized,
        spec,
        Mode::Single,
        &mut view.sources,
        |f, entry, found| {
            Ok(match found {
                Found::Missing => None,
                Found::Kindless { .. } => Some(Source::Empty),
                Found::List { kind, list, .. } => {
                    let count = super::check(
                        serialized,
                        entry,
                        f,
                        *kind,
                        list.clone(),
                        Mode::Single,
                        &mut (),
                    )?;
                    Some(Source::List {
                        list: list.clone(),
                        count,
                    })
                }
            })
        },
    )?;
    Ok(view)
}

/// Where a checked feature's values are.
#[derive(Clone, Debug)]
enum Source {
    /// `count` values in the list at the start of `list` (a `Feature`'s bytes after its
    /// first tag).
    List { list: Range<usize>, count: usize },
    /// A `Feature` with no list: no values.
    Empty,
}

/// A `tf.train.Example` checked under a [`ParseSpec`]; see [`parse_single_example_view`].
#[derive(Clone, Debug)]
pub struct ExampleView<'a> {
    record: &'a Bytes,
    spec: &'a ParseSpec,
    /// In the spec's order; `None` when missing from the record.
    sources: PerFeature<Option<Source>>,
}

/// What one feature reads from: its list in the record, its default, or nothing.
enum Read<'a> {
    List(Stream<'a>, usize),
    Default(&'a Values),
    Nothing,
}

impl<'a> ExampleView<'a> {
    /// The index and the entry of the spec's feature `name`.
    fn feature(&self, name: &str) -> anyhow::Result<(usize, &'a Entry)> {
        match self.spec.find(name.as_bytes()) {
            Some(f) => Ok((f, &self.spec.inner[f])),
            None => Err(invalid(format!("no feature {name} in the spec"))),
        }
    }

    /// The spec's feature `name` with its values' place, checked to be of `dtype`.
    fn read(&self, name: &str, dtype: DType) -> anyhow::Result<Read<'a>> {
        let (f, entry) = self.feature(name)?;
        if entry.spec.dtype() != dtype {
            return Err(invalid(format!(
                "feature {name} is {}, not {dtype}",
                entry.spec.dtype()
            )));
        }
        Ok(match &self.sources[f] {
            Some(Source::List { list, count }) => {
                let mut s = Stream::new(self.record, list.clone());
                // Checked: the list's length is there.
                let len = s.varint32().unwrap_or(0);
                s.push_limit(len);
                Read::List(s, *count)
            }
            Some(Source::Empty) => Read::Nothing,
            None => match &entry.spec {
                FeatureSpec::FixedLen {
                    default: Some(default),
                    ..
                } => Read::Default(default),
                _ => Read::Nothing,
            },
        })
    }

    /// The values of the `int64` feature `name`, in order.
    ///
    /// # Errors
    ///
    /// When the spec has no such feature or it is not `int64`.
    pub fn int64(&self, name: &str) -> anyhow::Result<ViewInt64s<'a>> {
        Ok(match self.read(name, DType::Int64)? {
            Read::List(mut s, count) => {
                let packed = s.expect(0x0a);
                if packed {
                    let len = s.varint32().unwrap_or(0);
                    s.push_limit(len);
                }
                ViewInt64s(Ints::List {
                    s,
                    packed,
                    left: count,
                })
            }
            Read::Default(Values::Int64(v)) => ViewInt64s(Ints::Default(v.iter())),
            Read::Default(_) | Read::Nothing => ViewInt64s(Ints::Default([].iter())),
        })
    }

    /// The values of the `float` feature `name`, in order.
    ///
    /// # Errors
    ///
    /// When the spec has no such feature or it is not `float`.
    pub fn floats(&self, name: &str) -> anyhow::Result<ViewFloats<'a>> {
        Ok(match self.read(name, DType::Float32)? {
            Read::List(mut s, count) => {
                if s.expect(0x0a) {
                    // Packed: the checked count of whole floats (`check` saw them all).
                    let _len = s.varint32();
                    let bytes = s.take(count * 4).unwrap_or(0..0);
                    ViewFloats(Floats::Packed(&s.buf[bytes]))
                } else {
                    ViewFloats(Floats::Tagged { s, left: count })
                }
            }
            Read::Default(Values::Float32(v)) => ViewFloats(Floats::Default(v.iter())),
            Read::Default(_) | Read::Nothing => ViewFloats(Floats::Default([].iter())),
        })
    }

    /// The values of the `string` feature `name`, in order, as slices of the record (no
    /// copy).
    ///
    /// # Errors
    ///
    /// When the spec has no such feature or it is not `string`.
    pub fn bytes(&self, name: &str) -> anyhow::Result<ViewBytes<'a>> {
        Ok(match self.read(name, DType::String)? {
            Read::List(s, count) => ViewBytes(Strings::List {
                record: self.record,
                s,
                left: count,
            }),
            Read::Default(Values::String(v)) => ViewBytes(Strings::Default(v.iter())),
            Read::Default(_) | Read::Nothing => ViewBytes(Strings::Default([].iter())),
        })
    }

    /// The feature `name` as [`parse_single_example`](super::parse_single_example) outputs
    /// it (a tensor, or a sparse tensor for a `VarLen` feature).
    ///
    /// # Errors
    ///
    /// When the spec has no such feature.
    pub fn parsed(&self, name: &str) -> anyhow::Result<Parsed> {
        let (f, entry) = self.feature(name)?;
        let dtype = entry.spec.dtype();
        let values = match &self.sources[f] {
            None => None,
            Some(Source::Empty) => Some(Values::empty(dtype)),
            Some(Source::List { list, count }) => {
                let mut values = Values::with_capacity(dtype, *count);
                // Checked when the view was made: it decodes as it counted.
                let _ = wire::decode_list(
                    self.record,
                    list.clone(),
                    dtype,
                    entry.capacity(),
                    &mut values,
                );
                Some(values)
            }
        };
        Ok(single_output(entry, values))
    }
}

/// The values of an `int64` feature of an [`ExampleView`].
#[derive(Clone, Debug)]
pub struct ViewInt64s<'a>(Ints<'a>);

#[derive(Clone, Debug)]
enum Ints<'a> {
    List {
        s: Stream<'a>,
        packed: bool,
        left: usize,
    },
    Default(slice::Iter<'a, i64>),
}

impl Iterator for ViewInt64s<'_> {
    type Item = i64;

    #[inline]
    fn next(&mut self) -> Option<i64> {
        match &mut self.0 {
            Ints::List { s, packed, left } => {
                if *left == 0 {
                    return None;
                }
                *left -= 1;
                if !*packed {
                    s.pos += 1; // the 0x08 tag, checked
                }
                s.varint64().ok().map(|x| x as i64)
            }
            Ints::Default(v) => v.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            Ints::List { left, .. } => *left,
            Ints::Default(v) => v.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for ViewInt64s<'_> {}

/// The values of a `float` feature of an [`ExampleView`].
#[derive(Clone, Debug)]
pub struct ViewFloats<'a>(Floats<'a>);

#[derive(Clone, Debug)]
enum Floats<'a> {
    /// Little-endian floats, four bytes each.
    Packed(&'a [u8]),
    Tagged {
        s: Stream<'a>,
        left: usize,
    },
    Default(slice::Iter<'a, f32>),
}

impl Iterator for ViewFloats<'_> {
    type Item = f32;

    #[inline]
    fn next(&mut self) -> Option<f32> {
        match &mut self.0 {
            Floats::Packed(bytes) => {
                let (float, rest) = bytes.split_first_chunk::<4>()?;
                *bytes = rest;
                Some(f32::from_le_bytes(*float))
            }
            Floats::Tagged { s, left } => {
                if *left == 0 {
                    return None;
                }
                *left -= 1;
                s.pos += 1; // the 0x0d tag, checked
                s.take(4).ok().map(|r| le_f32(&s.buf[r]))
            }
            Floats::Default(v) => v.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            Floats::Packed(bytes) => bytes.len() / 4,
            Floats::Tagged { left, .. } => *left,
            Floats::Default(v) => v.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for ViewFloats<'_> {}

/// The values of a `string` feature of an [`ExampleView`], as slices of the record.
#[derive(Clone, Debug)]
pub struct ViewBytes<'a>(Strings<'a>);

#[derive(Clone, Debug)]
enum Strings<'a> {
    List {
        record: &'a Bytes,
        s: Stream<'a>,
        left: usize,
    },
    Default(slice::Iter<'a, Bytes>),
}

impl Iterator for ViewBytes<'_> {
    type Item = Bytes;

    #[inline]
    fn next(&mut self) -> Option<Bytes> {
        match &mut self.0 {
            Strings::List { record, s, left } => {
                if *left == 0 {
                    return None;
                }
                *left -= 1;
                s.pos += 1; // the 0x0a tag, checked
                s.string().ok().map(|r| record.slice(r))
            }
            Strings::Default(v) => v.next().cloned(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            Strings::List { left, .. } => *left,
            Strings::Default(v) => v.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for ViewBytes<'_> {}
