//! Images (feature `image`, on by default): decode, resize, convert to float, and the random
//! augmentations of `tf.image`, on `ndarray` arrays in HWC layout (height, width, channels).
//!
//! | tf.image | streamload::image | on |
//! |---|---|---|
//! | `tf.io.decode_jpeg`, `decode_png`, `decode_image` (`channels=3`) | [`decode_jpeg`], [`decode_png`], [`decode_image`]; [`read_image`] reads a file and names it in errors | bytes → `Array3<u8>` |
//! | `tf.io.decode_jpeg(ratio=r)`, `decode_and_crop_jpeg`, `extract_jpeg_shape` | [`decode_jpeg_scaled`], [`decode_and_crop_jpeg`], [`extract_jpeg_shape`] (TensorFlow's bytes exactly); [`decode_and_resize`] (DCT scale, then resize: PIL's `draft`) | bytes → `Array3<u8>` |
//! | `tf.image.sample_distorted_bounding_box` (whole image as the box) | [`sample_distorted_bounding_box`], [`DistortedBoxOptions`] | (height, width) → `[y, x, h, w]` |
//! | ResNet's train / eval preprocessing; torchvision's `RandomResizedCrop`, `Resize`+`CenterCrop`, `ToTensor`, `Normalize` | [`RandomResizedCrop`], [`CenterCrop`]; [`convert_and_normalize`] ([`Normalize`], [`Layout`] HWC/CHW) | bytes → `Array3<f32>` |
//! | `tf.image.convert_image_dtype(image, tf.float32)` | [`convert_image_dtype`] (÷ 255) | `Array3<u8>` → `Array3<f32>` |
//! | `tf.image.resize(tf.image.convert_image_dtype(image, tf.float32), size)` | [`convert_and_resize`] (fused: bytes in, floats out) | `Array3<u8>` → `Array3<f32>` |
//! | `tf.image.resize(image, size)` (bilinear, no antialias, half-pixel centres; `method="area"`) | [`resize`] (and [`resize_u8`], rounding to bytes); [`resize_with`], [`resize_u8_with`] with [`ResizeMethod`] | `Array3<f32>` |
//! | `tf.image.flip_left_right`, `random_flip_left_right` | [`flip_left_right`], [`random_flip_left_right`] | `Array3<f32>` |
//! | `tf.image.adjust_brightness`, `random_brightness` | [`adjust_brightness`], [`random_brightness`] | `Array3<f32>` |
//! | `tf.image.adjust_saturation`, `random_saturation` (in HSV) | [`adjust_saturation`], [`random_saturation`] | `Array3<f32>` |
//! | `tf.clip_by_value` | [`clip_by_value`] | `Array3<f32>` |
//! | the four above in sequence (W5's augmentation) | [`random_flip_brightness_saturation_clip`] (one pass, the same draws and values) | `Array3<f32>` |
//!
//! JPEG decoding is the system's libjpeg-turbo, TensorFlow's own decoder with TensorFlow's
//! settings, so full-size decodes are TensorFlow's pixels exactly (strict: a truncated file is
//! an error, as in `tf.io.decode_jpeg`); it also decodes at a DCT scale and crops. It is called
//! through a small C bridge whose errors come back as `Result`s (libjpeg's default handler
//! would call `exit()`). [`image`](https://docs.rs/image) decodes PNG. Every
//! decoder reads the header first and refuses an image of more than [`MAX_PIXELS`] pixels
//! before allocating anything (a decompression bomb); grayscale and CMYK JPEGs come out as RGB;
//! progressive JPEGs decode like baseline ones. Resizing is
//! [`fast_image_resize`](https://docs.rs/fast_image_resize) (SIMD), or, from bytes to floats,
//! [`convert_and_resize`] (TensorFlow's arithmetic, fused with the conversion). The transforms take the
//! image by value and work in place, so they chain without copies. The random ones take any
//! [`rand::Rng`]; inside a pipeline use [`Dataset::random_map`](crate::Dataset::random_map),
//! whose per-element generator makes the augmentations reproducible whatever the parallelism.
//!
//! # Examples
//!
//! The augmentation of W5 (WORKLOADS.md): decode, convert, resize, then random flip,
//! brightness and saturation, and clip.
//!
//! ```
//! use streamload::{AUTOTUNE, Dataset, image};
//! # tokio_test::block_on(async {
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("cat.png");
//! # ::image::RgbImage::from_fn(32, 24, |x, y| ::image::Rgb([x as u8 * 8, y as u8 * 10, 128])).save(&path)?;
//! let files = Dataset::from_vec(vec![(path.clone(), 0i64), (path, 1)]);
//! let images = files
//!     .try_map_parallel(AUTOTUNE, |(path, label)| {
//!         let pixels = image::read_image(&path)?; // names the file if it is not an image
//!         Ok((image::convert_and_resize(&pixels, 16, 16)?, label)) // u8 in, f32 out
//!     })
//!     .random_map(AUTOTUNE, Some(42), |(img, label), rng| {
//!         let img = image::random_flip_left_right(img, rng);
//!         let img = image::random_brightness(img, 32.0 / 255.0, rng);
//!         let img = image::random_saturation(img, 0.5, 1.5, rng);
//!         (image::clip_by_value(img, 0.0, 1.0), label)
//!     })
//!     .batch(32);
//! let batch = &images.collect().await?[0];
//! assert_eq!(batch[0].0.shape(), &[16, 16, 3]);
//! assert!(batch.iter().all(|(img, _)| img.iter().all(|v| (0.0..=1.0).contains(v))));
//! # anyhow::Ok(()) }).unwrap();
//! ```

mod brightness;
mod clip;
mod color;
mod convert;
mod convert_resize;
mod crop;
mod decode;
mod flip;
mod jpeg;
mod jpeg_turbo;
mod normalize;
mod resize;
mod saturation;
mod transform;

pub use brightness::{adjust_brightness, random_brightness};
pub use clip::clip_by_value;
pub use color::random_flip_brightness_saturation_clip;
pub use convert::convert_image_dtype;
pub use convert_resize::convert_and_resize;
pub use crop::{DistortedBoxOptions, sample_distorted_bounding_box};
pub use decode::{decode_image, decode_jpeg, decode_png, read_image};
pub use flip::{flip_left_right, random_flip_left_right};
pub use jpeg::{
    MAX_PIXELS, decode_and_crop_jpeg, decode_and_resize, decode_jpeg_scaled, extract_jpeg_shape,
};
pub use normalize::{Layout, Normalize, convert_and_normalize};
pub use resize::{ResizeMethod, resize, resize_u8, resize_u8_with, resize_with};
pub use saturation::{adjust_saturation, random_saturation};
pub use transform::{CenterCrop, RandomResizedCrop};

/// The image in standard (row-major, contiguous) layout, copied only if it is not.
pub(crate) fn standard<T: Clone>(image: ndarray::Array3<T>) -> ndarray::Array3<T> {
    if image.is_standard_layout() {
        image
    } else {
        image.as_standard_layout().into_owned()
    }
}

/// A smooth test JPEG of `width` × `height` (for the documentation's examples).
#[doc(hidden)]
pub fn __doc_jpeg(width: u32, height: u32) -> Vec<u8> {
    let img = ::image::RgbImage::from_fn(width, height, |x, y| {
        ::image::Rgb([
            (x * 255 / width) as u8,
            (y * 255 / height) as u8,
            ((x + y) % 256) as u8,
        ])
    });
    let mut out = Vec::new();
    // Encoding into a Vec cannot fail for an RGB image of positive size.
    let _ = ::image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90).encode_image(&img);
    out
}
