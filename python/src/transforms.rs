//! The built-in transforms (`streamload.image`, `streamload.text`): Rust functions that
//! `Dataset.map` runs on its threads without the GIL, where a Python function would hold it.
//!
//! A [`Transform`] applies to one component of an element (`key`: a dict key or a tuple
//! index; the whole element when `None`) and to one item or a batch of them: a decoder
//! takes a string (0-d) or a batch of strings (1-d, the results stacked), an image op an
//! image (3-d, HWC) or a batch of images (4-d). Random transforms draw from the per-element
//! generator of `random_map` (so results do not depend on the parallelism) seeded by their
//! `seed` (or the pipeline's `Options.seed`).

use std::sync::Arc;

use bytes::Bytes;
use ndarray::{Array3, ArrayD, Ix3};
use pyo3::prelude::*;
use rand_chacha::ChaCha8Rng;
use streamload::image::{self, CenterCrop, Layout, Normalize, RandomResizedCrop, ResizeMethod};
use streamload::text::{Tokenizer, Vocabulary};
use streamload::{Dataset, Parallelism};

use crate::errors;
use crate::value::{Array, Value, invalid};

type Apply = dyn Fn(Value, &mut ChaCha8Rng) -> anyhow::Result<Value> + Send + Sync;

/// Which component of an element a transform applies to.
#[derive(Clone, Debug)]
enum Component {
    Whole,
    Key(String),
    Index(usize),
}

/// A transform run in Rust by `Dataset.map` (made by the functions of `streamload.image`
/// and `streamload.text`).
#[pyclass(name = "Transform", module = "streamload._native", frozen)]
pub(crate) struct Transform {
    name: String,
    apply: Arc<Apply>,
    random: bool,
    seed: Option<u64>,
    component: Component,
}

impl Transform {
    fn new(
        name: String,
        key: Option<&Bound<'_, PyAny>>,
        apply: impl Fn(Value, &mut ChaCha8Rng) -> anyhow::Result<Value> + Send + Sync + 'static,
    ) -> PyResult<Transform> {
        let component = match key {
            None => Component::Whole,
            Some(k) if k.is_none() => Component::Whole,
            Some(k) => match k.extract::<String>() {
                Ok(s) => Component::Key(s),
                Err(_) => Component::Index(k.extract::<usize>()?),
            },
        };
        Ok(Transform {
            name,
            apply: Arc::new(apply),
            random: false,
            seed: None,
            component,
        })
    }

    fn random(mut self, seed: Option<u64>) -> Transform {
        self.random = true;
        self.seed = seed;
        self
    }

    /// The dataset of `input`'s elements transformed, `n` at once.
    pub(crate) fn map(&self, input: &Dataset<Value>, n: Parallelism) -> Dataset<Value> {
        let apply = Arc::clone(&self.apply);
        let component = self.component.clone();
        let name = self.name.clone();
        let run = move |v: Value, rng: &mut ChaCha8Rng| -> anyhow::Result<Value> {
            // Packed strings (made for the hand-over) reach a transform as string tensors.
            let v = if v.has_packed() {
                v.unpack_strings()?
            } else {
                v
            };
            on_component(v, &component, &mut |x| apply(x, rng)).map_err(|e| e.context(name.clone()))
        };
        if self.random {
            input.try_random_map(n, self.seed, run)
        } else {
            use rand::SeedableRng;
            input.try_map_parallel(n, move |v| run(v, &mut ChaCha8Rng::seed_from_u64(0)))
        }
    }
}

#[pymethods]
impl Transform {
    /// Applies the transform to one element here, in the calling thread (for trying it out;
    /// in a pipeline, pass it to `Dataset.map`).
    fn __call__(&self, py: Python<'_>, element: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        use rand::SeedableRng;
        let value = Value::from_py(element)?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed.unwrap_or(0));
        let out = py
            .detach(|| on_component(value, &self.component, &mut |x| (self.apply)(x, &mut rng)))
            .map_err(|e| errors::to_py(py, e.context(self.name.clone())))?;
        Ok(out.into_py(py)?.unbind())
    }

    fn __repr__(&self) -> String {
        format!("<streamload transform {}>", self.name)
    }
}

/// `f` applied to the component of `v`.
fn on_component(
    v: Value,
    component: &Component,
    f: &mut dyn FnMut(Value) -> anyhow::Result<Value>,
) -> anyhow::Result<Value> {
    match (component, v) {
        (Component::Whole, v) => f(v),
        (Component::Key(k), Value::Dict(mut d)) => {
            let x = d
                .remove(k)
                .ok_or_else(|| invalid(format!("the element has no key {k:?}")))?;
            d.insert(k.clone(), f(x)?);
            Ok(Value::Dict(d))
        }
        (Component::Index(i), Value::Tuple(mut t)) if *i < t.len() => {
            let x = std::mem::replace(&mut t[*i], Value::Tuple(Vec::new()));
            t[*i] = f(x)?;
            Ok(Value::Tuple(t))
        }
        (c, v) => Err(invalid(format!(
            "cannot select component {c:?} of a {}",
            v.describe()
        ))),
    }
}

/// `f` on one item of rank `rank`, or on each item of a batch of them (rank + 1), the
/// results stacked.
fn per_item(
    v: Value,
    rank: usize,
    f: &mut dyn FnMut(Value) -> anyhow::Result<Value>,
) -> anyhow::Result<Value> {
    let ndim = match &v {
        Value::Array(a) => a.shape().len(),
        Value::String(_) => 0,
        Value::Strings(a) => a.ndim(),
        _ => usize::MAX,
    };
    if ndim == rank {
        return f(v);
    }
    if ndim == rank + 1 {
        let rows = v.rows().map_err(invalid)?;
        let items = (0..rows)
            .map(|i| f(v.row(i)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if items.is_empty() {
            return Err(invalid("an empty batch".into()));
        }
        return Value::stack(&items);
    }
    Err(invalid(format!(
        "expected a tensor of rank {rank} (or a batch of them, rank {}), got a {}",
        rank + 1,
        v.describe()
    )))
}

fn bytes_of(v: &Value) -> anyhow::Result<&Bytes> {
    v.as_string()
        .ok_or_else(|| invalid(format!("expected a string, got a {}", v.describe())))
}

fn image_u8(v: Value) -> anyhow::Result<Array3<u8>> {
    match v {
        Value::Array(a) if matches!(*a, Array::UInt8(_)) => match *a {
            Array::UInt8(a) => Ok(a.into_dimensionality::<Ix3>()?),
            _ => unreachable!("a uint8 array, matched above"),
        },
        other => Err(invalid(format!(
            "expected a uint8 image (height, width, 3), got a {}",
            other.describe()
        ))),
    }
}

/// An image as floats: float32 as it is, uint8 as its values (0..255, as `tf.image`'s ops
/// take integer images).
fn image_f32(v: Value) -> anyhow::Result<Array3<f32>> {
    match v {
        Value::Array(a) if matches!(*a, Array::Float32(_) | Array::UInt8(_)) => match *a {
            Array::Float32(a) => Ok(a.into_dimensionality::<Ix3>()?),
            Array::UInt8(a) => Ok(a.into_dimensionality::<Ix3>()?.mapv(f32::from)),
            _ => unreachable!("a float32 or uint8 array, matched above"),
        },
        other => Err(invalid(format!(
            "expected a float32 or uint8 image (height, width, 3), got a {}",
            other.describe()
        ))),
    }
}

fn from_u8(a: Array3<u8>) -> Value {
    Value::array(a.into_dyn())
}

fn from_f32(a: ArrayD<f32>) -> Value {
    Value::array(a)
}

fn channels_3(py: Python<'_>, op: &str, channels: i64) -> PyResult<()> {
    if channels == 3 {
        return Ok(());
    }
    Err(errors::invalid(
        py,
        format!(
            "{op}: channels={channels} is not supported: images are decoded to RGB \
             (channels=3; grey and CMYK images come out as RGB, alpha is dropped)"
        ),
    ))
}

/// `tf.io.decode_jpeg` / `decode_png` / `decode_image`, `channels=3`.
#[pyfunction]
#[pyo3(signature = (op, channels=3, key=None))]
pub(crate) fn decode(
    py: Python<'_>,
    op: &str,
    channels: i64,
    key: Option<&Bound<'_, PyAny>>,
) -> PyResult<Transform> {
    channels_3(py, op, channels)?;
    let decoder: fn(&[u8]) -> anyhow::Result<Array3<u8>> = match op {
        "decode_jpeg" => image::decode_jpeg,
        "decode_png" => image::decode_png,
        "decode_image" => image::decode_image,
        other => return Err(errors::invalid(py, format!("no decoder {other}"))),
    };
    Transform::new(op.to_owned(), key, move |v, _| {
        per_item(v, 0, &mut |x| Ok(from_u8(decoder(bytes_of(&x)?)?)))
    })
}

/// `tf.io.read_file(filename)`: the bytes of a file (a local path or an object-storage
/// URL, one GET).
#[pyfunction]
#[pyo3(signature = (key=None))]
pub(crate) fn read_file(key: Option<&Bound<'_, PyAny>>) -> PyResult<Transform> {
    Transform::new("read_file".into(), key, |v, _| {
        per_item(v, 0, &mut |x| {
            let name = String::from_utf8_lossy(bytes_of(&x)?).into_owned();
            let location = streamload::storage::Location::parse(&name);
            let bytes = match location.as_path() {
                Some(path) => Bytes::from(
                    std::fs::read(path)
                        .map_err(|e| anyhow::Error::new(e).context(format!("reading {name}")))?,
                ),
                None => crate::runtime::runtime()?
                    .block_on(streamload::storage::read_range(location, 0..u64::MAX))?,
            };
            Ok(Value::string(bytes))
        })
    })
}

/// `tf.image.convert_image_dtype(image, tf.float32)`: uint8 to float32 in [0, 1].
#[pyfunction]
#[pyo3(signature = (key=None))]
pub(crate) fn convert_image_dtype(key: Option<&Bound<'_, PyAny>>) -> PyResult<Transform> {
    Transform::new("convert_image_dtype".into(), key, |v, _| {
        per_item(v, 3, &mut |x| {
            Ok(from_f32(
                image::convert_image_dtype(&image_u8(x)?).into_dyn(),
            ))
        })
    })
}

/// `tf.image.resize(image, size, method)`: bilinear or area; float32 out.
#[pyfunction]
#[pyo3(signature = (size, method="bilinear", key=None))]
pub(crate) fn resize(
    py: Python<'_>,
    size: (usize, usize),
    method: &str,
    key: Option<&Bound<'_, PyAny>>,
) -> PyResult<Transform> {
    let method = match method {
        "bilinear" => ResizeMethod::Bilinear,
        "area" => ResizeMethod::Area,
        other => {
            return Err(errors::invalid(
                py,
                format!("resize: method must be \"bilinear\" or \"area\", not {other:?}"),
            ));
        }
    };
    if size.0 == 0 || size.1 == 0 {
        return Err(errors::invalid(py, "resize: sizes must be positive"));
    }
    Transform::new(
        format!("resize({}, {})", size.0, size.1),
        key,
        move |v, _| {
            per_item(v, 3, &mut |x| {
                let out = image::resize_with(image_f32(x)?, size.0, size.1, method)?;
                Ok(from_f32(out.into_dyn()))
            })
        },
    )
}

/// The float image ops: flips, brightness, saturation, clip, fixed or random.
#[pyfunction]
#[pyo3(signature = (op, a=0.0, b=0.0, seed=None, key=None))]
pub(crate) fn image_op(
    py: Python<'_>,
    op: &str,
    a: f32,
    b: f32,
    seed: Option<u64>,
    key: Option<&Bound<'_, PyAny>>,
) -> PyResult<Transform> {
    type Op = Box<dyn Fn(Array3<f32>, &mut ChaCha8Rng) -> Array3<f32> + Send + Sync>;
    let (f, random): (Op, bool) = match op {
        "flip_left_right" => (Box::new(|x, _| image::flip_left_right(x)), false),
        "random_flip_left_right" => (Box::new(image::random_flip_left_right), true),
        "adjust_brightness" => (Box::new(move |x, _| image::adjust_brightness(x, a)), false),
        "random_brightness" => {
            if a < 0.0 {
                return Err(errors::invalid(py, "max_delta must be non-negative."));
            }
            (
                Box::new(move |x, rng| image::random_brightness(x, a, rng)),
                true,
            )
        }
        "adjust_saturation" => (Box::new(move |x, _| image::adjust_saturation(x, a)), false),
        "random_saturation" => {
            if !(0.0 <= a && a < b) {
                return Err(errors::invalid(
                    py,
                    "random_saturation: 0 <= lower < upper is required",
                ));
            }
            (
                Box::new(move |x, rng| image::random_saturation(x, a, b, rng)),
                true,
            )
        }
        "clip_by_value" => {
            if a > b {
                return Err(errors::invalid(
                    py,
                    "clip_by_value: clip_value_min must not exceed clip_value_max",
                ));
            }
            (Box::new(move |x, _| image::clip_by_value(x, a, b)), false)
        }
        other => return Err(errors::invalid(py, format!("no image op {other}"))),
    };
    let t = Transform::new(op.to_owned(), key, move |v, rng| {
        per_item(v, 3, &mut |x| {
            Ok(from_f32(f(image_f32(x)?, rng).into_dyn()))
        })
    })?;
    Ok(if random { t.random(seed) } else { t })
}

fn normalize(mean: Option<[f32; 3]>, std: Option<[f32; 3]>) -> Normalize {
    match (mean, std) {
        (None, None) => Normalize::IMAGENET,
        (m, s) => Normalize {
            mean: m.unwrap_or([0.0; 3]),
            std: s.unwrap_or([1.0; 3]),
        },
    }
}

fn layout(py: Python<'_>, name: &str) -> PyResult<Layout> {
    match name {
        "HWC" => Ok(Layout::Hwc),
        "CHW" => Ok(Layout::Chw),
        other => Err(errors::invalid(
            py,
            format!("layout must be \"HWC\" or \"CHW\", not {other:?}"),
        )),
    }
}

/// ImageNet training's transform, encoded bytes to a normalized float image.
#[pyfunction]
#[pyo3(signature = (size, scale=(0.08, 1.0), ratio=(0.75, 4.0 / 3.0), flip=true, mean=None, std=None, layout="HWC", dct_scaling=true, seed=None, key=None))]
#[allow(clippy::too_many_arguments)] // the transform's keyword arguments
pub(crate) fn random_resized_crop(
    py: Python<'_>,
    size: (usize, usize),
    scale: (f32, f32),
    ratio: (f32, f32),
    flip: bool,
    mean: Option<[f32; 3]>,
    std: Option<[f32; 3]>,
    layout: &str,
    dct_scaling: bool,
    seed: Option<u64>,
    key: Option<&Bound<'_, PyAny>>,
) -> PyResult<Transform> {
    if size.0 == 0 || size.1 == 0 {
        return Err(errors::invalid(
            py,
            "RandomResizedCrop: sizes must be positive",
        ));
    }
    if !(0.0 < scale.0 && scale.0 <= scale.1 && scale.1 <= 1.0) {
        return Err(errors::invalid(
            py,
            "RandomResizedCrop: scale must be (min, max) with 0 < min <= max <= 1",
        ));
    }
    if !(0.0 < ratio.0 && ratio.0 <= ratio.1) {
        return Err(errors::invalid(
            py,
            "RandomResizedCrop: ratio must be (min, max) with 0 < min <= max",
        ));
    }
    let mut crop = RandomResizedCrop::new(size.0, size.1);
    crop.crop.area_range = scale;
    crop.crop.aspect_ratio_range = ratio;
    crop.flip = flip;
    crop.normalize = normalize(mean, std);
    crop.layout = self::layout(py, layout)?;
    crop.dct_scaling = dct_scaling;
    let t = Transform::new(
        format!("RandomResizedCrop({}, {})", size.0, size.1),
        key,
        move |v, rng| {
            per_item(v, 0, &mut |x| {
                Ok(from_f32(crop.apply(bytes_of(&x)?, rng)?.into_dyn()))
            })
        },
    )?;
    Ok(t.random(seed))
}

/// ImageNet evaluation's transform: resize the shorter side, take the centre.
#[pyfunction]
#[pyo3(signature = (size, resize_shorter, mean=None, std=None, layout="HWC", key=None))]
pub(crate) fn center_crop(
    py: Python<'_>,
    size: (usize, usize),
    resize_shorter: usize,
    mean: Option<[f32; 3]>,
    std: Option<[f32; 3]>,
    layout: &str,
    key: Option<&Bound<'_, PyAny>>,
) -> PyResult<Transform> {
    if size.0 == 0 || size.1 == 0 || resize_shorter == 0 {
        return Err(errors::invalid(py, "CenterCrop: sizes must be positive"));
    }
    let mut crop = CenterCrop::new(size.0, size.1, resize_shorter);
    crop.normalize = normalize(mean, std);
    crop.layout = self::layout(py, layout)?;
    Transform::new(
        format!("CenterCrop({}, {})", size.0, size.1),
        key,
        move |v, _| {
            per_item(v, 0, &mut |x| {
                Ok(from_f32(crop.apply(bytes_of(&x)?)?.into_dyn()))
            })
        },
    )
}

/// A vocabulary (`tf.lookup.StaticVocabularyTable`): text to ids without the GIL.
#[pyclass(name = "Vocabulary", module = "streamload._native", frozen)]
pub(crate) struct PyVocabulary {
    vocab: Arc<Vocabulary>,
}

#[pymethods]
impl PyVocabulary {
    #[new]
    #[pyo3(signature = (tokens=None, vocabulary_file=None, num_oov_buckets=1, reserve_padding_id=false))]
    fn new(
        py: Python<'_>,
        tokens: Option<Vec<Bound<'_, PyAny>>>,
        vocabulary_file: Option<String>,
        num_oov_buckets: u64,
        reserve_padding_id: bool,
    ) -> PyResult<PyVocabulary> {
        let vocab = match (tokens, vocabulary_file) {
            (Some(t), None) => {
                let tokens = t
                    .iter()
                    .map(|t| match t.extract::<String>() {
                        Ok(s) => Ok(s.into_bytes()),
                        Err(_) => t.extract::<Vec<u8>>(),
                    })
                    .collect::<PyResult<Vec<_>>>()?;
                Vocabulary::from_tokens(tokens)
            }
            (None, Some(f)) => py.detach(|| {
                crate::runtime::runtime()?.block_on(Vocabulary::from_file(
                    streamload::storage::Location::parse(&f),
                ))
            }),
            _ => {
                return Err(errors::invalid(
                    py,
                    "Vocabulary: give either tokens or vocabulary_file",
                ));
            }
        }
        .map_err(|e| errors::to_py(py, e))?;
        if num_oov_buckets == 0 {
            return Err(errors::invalid(py, "num_oov_buckets must be at least 1"));
        }
        Ok(PyVocabulary {
            vocab: Arc::new(
                vocab
                    .num_oov_buckets(num_oov_buckets)
                    .reserve_padding_id(reserve_padding_id),
            ),
        })
    }

    /// The number of ids: tokens, OOV buckets and the padding id.
    fn size(&self) -> usize {
        self.vocab.vocabulary_size()
    }

    fn __len__(&self) -> usize {
        self.vocab.len()
    }

    /// The id of one token.
    fn lookup(&self, token: &[u8]) -> i64 {
        self.vocab.lookup(token)
    }

    /// The transform from a text (a string, or a batch of them of equal word counts) to the
    /// ids of its whitespace-separated words (`tf.strings.split` then `lookup`), as int64.
    #[pyo3(signature = (key=None))]
    fn tokenize(&self, key: Option<&Bound<'_, PyAny>>) -> PyResult<Transform> {
        let vocab = Arc::clone(&self.vocab);
        Transform::new("tokenize".into(), key, move |v, _| {
            per_item(v, 0, &mut |x| {
                Ok(Value::vector(vocab.tokenize(bytes_of(&x)?)))
            })
        })
    }
}

/// A Hugging Face tokenizer (a `tokenizer.json`): documents to token ids without the GIL, the
/// ids of the `tokenizers` package.
#[pyclass(name = "Tokenizer", module = "streamload._native", frozen)]
pub(crate) struct PyTokenizer {
    tokenizer: Tokenizer,
}

#[pymethods]
impl PyTokenizer {
    #[new]
    #[pyo3(signature = (tokenizer_file, end_token=None, truncate=None, max_ids=None))]
    fn new(
        py: Python<'_>,
        tokenizer_file: String,
        end_token: Option<String>,
        truncate: Option<usize>,
        max_ids: Option<usize>,
    ) -> PyResult<PyTokenizer> {
        if truncate.is_some() && max_ids.is_some() {
            return Err(errors::invalid(
                py,
                "Tokenizer: give truncate (cut long documents) or max_ids (refuse them), not both",
            ));
        }
        let tokenizer = py
            .detach(|| {
                let location = streamload::storage::Location::parse(&tokenizer_file);
                let mut tokenizer =
                    crate::runtime::runtime()?.block_on(Tokenizer::open(location))?;
                if let Some(token) = &end_token {
                    tokenizer = tokenizer.end_token(token)?;
                }
                if let Some(n) = truncate {
                    tokenizer = tokenizer.truncate(n);
                }
                if let Some(n) = max_ids {
                    tokenizer = tokenizer.max_ids(n);
                }
                anyhow::Ok(tokenizer)
            })
            .map_err(|e| errors::to_py(py, e))?;
        Ok(PyTokenizer { tokenizer })
    }

    /// How many ids the vocabulary has, its added tokens included.
    fn vocab_size(&self) -> usize {
        self.tokenizer.vocab_size()
    }

    /// The id of `token`, or None.
    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// The text of some ids (special tokens left out).
    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        self.tokenizer
            .decode(&ids)
            .map_err(|e| errors::to_py(py, e))
    }

    /// The transform from a text (a string) to its ids, as uint32 (then the end id).
    #[pyo3(signature = (key=None))]
    fn encode(&self, key: Option<&Bound<'_, PyAny>>) -> PyResult<Transform> {
        let tokenizer = self.tokenizer.clone();
        Transform::new("tokenize".into(), key, move |v, _| {
            per_item(v, 0, &mut |x| {
                let text = std::str::from_utf8(bytes_of(&x)?)
                    .map_err(|e| invalid(format!("a text that is not UTF-8: {e}")))?;
                Ok(Value::vector(tokenizer.encode(text)?))
            })
        })
    }
}
