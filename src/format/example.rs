//! `tf.train.Example`: the protocol buffer most TFRecord files hold, and
//! `tf.train.SequenceExample`.
//!
//! The messages are derived by hand with `prost` from TensorFlow's `example.proto` and
//! `feature.proto` (no `protoc` needed). The feature map is a `BTreeMap`, so encoding is
//! deterministic (keys in byte order; TensorFlow's Python serializer orders a key after its
//! longer extensions, e.g. `ids` before `id`: both are valid, and TensorFlow reads either).
//! Repeated numbers are written packed and read packed or unpacked, as protobuf requires.

use std::collections::BTreeMap;

use bytes::Bytes;
use prost::Message;

use crate::Error;
use crate::tensor::{DType, Element, Values};

/// A training example: named features (`tf.train.Example`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Example {
    /// The features (`features = 1`).
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// A map from feature name to feature (`tf.train.Features`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Features {
    /// The features by name (`map<string, Feature> feature = 1`).
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature: BTreeMap<String, Feature>,
}

/// One feature: a list of bytes, floats or 64-bit integers (`tf.train.Feature`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Feature {
    /// Which list, if any is set (`oneof kind`).
    #[prost(oneof = "Kind", tags = "1, 2, 3")]
    pub kind: Option<Kind>,
}

/// The list a [`Feature`] holds.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Kind {
    /// `bytes_list = 1`.
    #[prost(message, tag = "1")]
    BytesList(BytesList),
    /// `float_list = 2`.
    #[prost(message, tag = "2")]
    FloatList(FloatList),
    /// `int64_list = 3`.
    #[prost(message, tag = "3")]
    Int64List(Int64List),
}

/// A sequence of steps with context (`tf.train.SequenceExample`): features of the whole
/// sequence, and named lists of one [`Feature`] per step (tokens, frames, labels).
///
/// Decoding and encoding only: `parse_example`'s specs read `Example`s.
///
/// ```
/// use streamload::format::{Feature, FeatureList, Int64List, Kind, SequenceExample};
/// let step = |v: i64| Feature { kind: Some(Kind::Int64List(Int64List { value: vec![v] })) };
/// let mut example = SequenceExample::default();
/// example
///     .feature_lists
///     .get_or_insert_with(Default::default)
///     .feature_list
///     .insert("labels".into(), FeatureList { feature: vec![step(3), step(1)] });
/// let decoded = SequenceExample::decode_bytes(&example.encode_to_bytes())?;
/// assert_eq!(decoded.feature_list("labels").map(<[Feature]>::len), Some(2));
/// assert_eq!(decoded, example);
/// # anyhow::Ok(())
/// ```
#[derive(Clone, PartialEq, prost::Message)]
pub struct SequenceExample {
    /// Features of the whole sequence (`Features context = 1`).
    #[prost(message, optional, tag = "1")]
    pub context: Option<Features>,
    /// Per-step features by name (`FeatureLists feature_lists = 2`).
    #[prost(message, optional, tag = "2")]
    pub feature_lists: Option<FeatureLists>,
}

/// The features of one name, one per step (`tf.train.FeatureList`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureList {
    /// One feature per step (`repeated Feature feature = 1`).
    #[prost(message, repeated, tag = "1")]
    pub feature: Vec<Feature>,
}

/// A map from name to feature list (`tf.train.FeatureLists`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureLists {
    /// The lists by name (`map<string, FeatureList> feature_list = 1`).
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature_list: BTreeMap<String, FeatureList>,
}

impl SequenceExample {
    /// Decodes a serialized `tf.train.SequenceExample` (a TFRecord payload).
    ///
    /// # Errors
    ///
    /// When the bytes are not a valid protocol buffer of this shape.
    pub fn decode_bytes(bytes: &[u8]) -> anyhow::Result<SequenceExample> {
        decode(bytes, "tf.train.SequenceExample")
    }

    /// Decodes a serialized `tf.train.SequenceExample` held in `Bytes` (a TFRecord record)
    /// without copying its byte features: they are slices of `record`.
    ///
    /// # Errors
    ///
    /// When the bytes are not a valid protocol buffer of this shape.
    pub fn decode_record(record: Bytes) -> anyhow::Result<SequenceExample> {
        decode(record, "tf.train.SequenceExample")
    }

    /// Serializes the sequence example (keys in byte order).
    pub fn encode_to_bytes(&self) -> Bytes {
        Bytes::from(self.encode_to_vec())
    }

    /// The context feature called `name`, if present.
    pub fn context_feature(&self, name: &str) -> Option<&Feature> {
        self.context.as_ref()?.feature.get(name)
    }

    /// The steps of the feature list called `name`, if present.
    pub fn feature_list(&self, name: &str) -> Option<&[Feature]> {
        Some(&self.feature_lists.as_ref()?.feature_list.get(name)?.feature)
    }
}

/// `tf.train.BytesList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    /// `repeated bytes value = 1`.
    #[prost(bytes = "bytes", repeated, tag = "1")]
    pub value: Vec<Bytes>,
}

/// `tf.train.FloatList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FloatList {
    /// `repeated float value = 1 [packed = true]`.
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

/// `tf.train.Int64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64List {
    /// `repeated int64 value = 1 [packed = true]`.
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

impl Example {
    /// Decodes a serialized `tf.train.Example` (a TFRecord payload).
    ///
    /// # Errors
    ///
    /// When the bytes are not a valid protocol buffer of this shape.
    ///
    /// ```
    /// use streamload::format::Example;
    /// let example = Example::new()
    ///     .with_int64("label", [7])
    ///     .with_floats("weights", [0.5, 1.5])
    ///     .with_bytes("image", [&b"\x89PNG"[..]]);
    /// let decoded = Example::decode_bytes(&example.encode_to_bytes())?;
    /// assert_eq!(decoded.int64("label"), Some(&[7][..]));
    /// assert_eq!(decoded.floats("weights"), Some(&[0.5, 1.5][..]));
    /// assert_eq!(decoded.bytes("image").map(|b| &b[0][..]), Some(&b"\x89PNG"[..]));
    /// # anyhow::Ok(())
    /// ```
    pub fn decode_bytes(bytes: &[u8]) -> anyhow::Result<Example> {
        decode(bytes, "tf.train.Example")
    }

    /// Decodes a serialized `tf.train.Example` held in `Bytes` (a TFRecord record) without
    /// copying its byte features: they are slices of `record`.
    ///
    /// # Errors
    ///
    /// When the bytes are not a valid protocol buffer of this shape.
    pub fn decode_record(record: Bytes) -> anyhow::Result<Example> {
        decode(record, "tf.train.Example")
    }

    /// Serializes the example (keys in byte order).
    pub fn encode_to_bytes(&self) -> Bytes {
        Bytes::from(self.encode_to_vec())
    }

    /// An example with no features.
    pub fn new() -> Example {
        Example {
            features: Some(Features::default()),
        }
    }

    fn insert(mut self, name: &str, kind: Kind) -> Example {
        self.features
            .get_or_insert_with(Features::default)
            .feature
            .insert(name.to_string(), Feature { kind: Some(kind) });
        self
    }

    /// Adds an int64 feature.
    pub fn with_int64(self, name: &str, values: impl IntoIterator<Item = i64>) -> Example {
        self.insert(
            name,
            Kind::Int64List(Int64List {
                value: values.into_iter().collect(),
            }),
        )
    }

    /// Adds a float feature.
    pub fn with_floats(self, name: &str, values: impl IntoIterator<Item = f32>) -> Example {
        self.insert(
            name,
            Kind::FloatList(FloatList {
                value: values.into_iter().collect(),
            }),
        )
    }

    /// Adds a bytes feature.
    pub fn with_bytes<B: AsRef<[u8]>>(
        self,
        name: &str,
        values: impl IntoIterator<Item = B>,
    ) -> Example {
        let value = values
            .into_iter()
            .map(|b| Bytes::copy_from_slice(b.as_ref()))
            .collect();
        self.insert(name, Kind::BytesList(BytesList { value }))
    }

    /// The feature called `name`, if present.
    pub fn feature(&self, name: &str) -> Option<&Feature> {
        self.features.as_ref()?.feature.get(name)
    }

    /// The int64 values of feature `name`, if it is an int64 list.
    pub fn int64(&self, name: &str) -> Option<&[i64]> {
        match &self.feature(name)?.kind {
            Some(Kind::Int64List(l)) => Some(&l.value),
            _ => None,
        }
    }

    /// The float values of feature `name`, if it is a float list.
    pub fn floats(&self, name: &str) -> Option<&[f32]> {
        match &self.feature(name)?.kind {
            Some(Kind::FloatList(l)) => Some(&l.value),
            _ => None,
        }
    }

    /// The byte strings of feature `name`, if it is a bytes list.
    pub fn bytes(&self, name: &str) -> Option<&[Bytes]> {
        match &self.feature(name)?.kind {
            Some(Kind::BytesList(l)) => Some(&l.value),
            _ => None,
        }
    }

    /// The one value of feature `name`, as `i64`, `f32` or [`Bytes`]: the way to read a
    /// label or an id in one call (see [`int64`](Example::int64), [`floats`](Example::floats)
    /// and [`bytes`](Example::bytes) for lists).
    ///
    /// ```
    /// use streamload::format::Example;
    /// let example = Example::new().with_int64("label", [7]).with_floats("xy", [0.5, 2.0]);
    /// let example = Example::decode_record(example.encode_to_bytes())?;
    /// assert_eq!(example.scalar::<i64>("label")?, 7);
    /// let err = example.scalar::<f32>("xy").unwrap_err();
    /// assert_eq!(err.to_string(), "feature xy holds 2 values, not one");
    /// let err = example.scalar::<f32>("label").unwrap_err();
    /// assert_eq!(err.to_string(), "feature label holds int64 values, not float");
    /// # anyhow::Ok(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error) naming the feature: when the example has no
    /// such feature, it holds another data type (or no list), or other than one value.
    pub fn scalar<T: Element + Clone>(&self, name: &str) -> anyhow::Result<T> {
        let invalid = |message: String| anyhow::Error::from(Error::InvalidArgument(message));
        let feature = self
            .feature(name)
            .ok_or_else(|| invalid(format!("no feature {name} in the example")))?;
        let (dtype, len) = match &feature.kind {
            Some(Kind::Int64List(l)) => (DType::Int64, l.value.len()),
            Some(Kind::FloatList(l)) => (DType::Float32, l.value.len()),
            Some(Kind::BytesList(l)) => (DType::String, l.value.len()),
            None => return Err(invalid(format!("feature {name} holds no list"))),
        };
        if dtype != T::DTYPE {
            return Err(invalid(format!(
                "feature {name} holds {dtype} values, not {}",
                T::DTYPE
            )));
        }
        if len != 1 {
            return Err(invalid(format!(
                "feature {name} holds {len} values, not one"
            )));
        }
        let one = match &feature.kind {
            Some(Kind::Int64List(l)) => Values::Int64(l.value.clone()),
            Some(Kind::FloatList(l)) => Values::Float32(l.value.clone()),
            Some(Kind::BytesList(l)) => Values::String(l.value.clone()),
            None => Values::empty(dtype),
        };
        T::slice(&one)
            .and_then(<[T]>::first)
            .cloned()
            .ok_or_else(|| invalid(format!("feature {name} holds no value")))
    }
}

/// Decodes a message of type `M`, an error naming `what` when the bytes are not one.
fn decode<M: Message + Default>(bytes: impl bytes::Buf, what: &str) -> anyhow::Result<M> {
    M::decode(bytes).map_err(|e| anyhow::anyhow!("not a {what}: {e}"))
}
