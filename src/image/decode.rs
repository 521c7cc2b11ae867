//! Decoding JPEG and PNG into RGB arrays (`tf.io.decode_jpeg` / `decode_png` / `decode_image`
//! with `channels=3`).

use std::path::Path;

use anyhow::Context as _;
use ndarray::Array3;

pub(crate) const JPEG_MAGIC: &[u8] = &[0xFF, 0xD8, 0xFF];
pub(crate) const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Decodes a JPEG into an RGB image of shape `(height, width, 3)` (`tf.io.decode_jpeg(bytes,
/// channels=3)`); a grayscale JPEG is repeated into the three channels, a CMYK one converted
/// as TensorFlow converts it.
///
/// Decoded by libjpeg-turbo, TensorFlow's own decoder, with TensorFlow's settings (the fast
/// integer IDCT, fancy upsampling), so the pixels are TensorFlow's. Decoding is strict: a
/// truncated or corrupt file is an error (as in `tf.io.decode_jpeg` without
/// `try_recover_truncated`), never a partly grey image. The header is read first: an image
/// over [`MAX_PIXELS`](super::MAX_PIXELS) is refused before any pixel memory is allocated.
/// [`decode_jpeg_scaled`](super::decode_jpeg_scaled) and
/// [`decode_and_crop_jpeg`](super::decode_and_crop_jpeg) decode less.
///
/// # Errors
///
/// If `bytes` is not a JPEG the decoder can read, or declares more than
/// [`MAX_PIXELS`](super::MAX_PIXELS) pixels. The message names no file: use
/// [`read_image`], or add the name as context.
pub fn decode_jpeg(bytes: &[u8]) -> anyhow::Result<Array3<u8>> {
    ensure_jpeg(bytes)?;
    super::jpeg_turbo::decode(bytes, 1, None)
}

/// An error unless `bytes` starts as a JPEG does (`FF D8 FF`).
pub(crate) fn ensure_jpeg(bytes: &[u8]) -> anyhow::Result<()> {
    if bytes.starts_with(JPEG_MAGIC) {
        Ok(())
    } else if bytes.starts_with(PNG_MAGIC) {
        anyhow::bail!(
            "not a JPEG but a PNG ({}): use decode_image",
            describe(bytes)
        )
    } else {
        anyhow::bail!("not a JPEG ({})", describe(bytes))
    }
}

/// An error if a `width` × `height` image is over [`MAX_PIXELS`](super::MAX_PIXELS).
pub(crate) fn check_pixels(format: &str, width: usize, height: usize) -> anyhow::Result<()> {
    let pixels = width as u64 * height as u64;
    anyhow::ensure!(
        pixels <= super::MAX_PIXELS,
        "{format} of {width}x{height} pixels (width x height) is over the limit of {} pixels \
         (streamload::image::MAX_PIXELS; a decompression bomb?)",
        super::MAX_PIXELS
    );
    Ok(())
}

/// Decodes a PNG into an RGB image of shape `(height, width, 3)` (`tf.io.decode_png(bytes,
/// channels=3)`): grey is repeated into the three channels, alpha dropped, and 16-bit samples
/// cut to their high byte (`v >> 8`, as TensorFlow's libpng `png_set_strip_16` does; not
/// rounded, so the result is TensorFlow's exactly).
///
/// # Errors
///
/// If `bytes` is not a PNG the decoder can read (a truncated file, a bad checksum).
pub fn decode_png(bytes: &[u8]) -> anyhow::Result<Array3<u8>> {
    anyhow::ensure!(
        bytes.starts_with(PNG_MAGIC),
        "not a PNG ({})",
        describe(bytes)
    );
    guard("PNG", || {
        let corrupt = |e| anyhow::anyhow!("corrupt or truncated PNG: {e}");
        let header =
            image::ImageReader::with_format(std::io::Cursor::new(bytes), image::ImageFormat::Png);
        let (w, h) = header.into_dimensions().map_err(corrupt)?;
        check_pixels("PNG", w as usize, h as usize)?;
        let mut reader =
            image::ImageReader::with_format(std::io::Cursor::new(bytes), image::ImageFormat::Png);
        reader.no_limits(); // the pixel count is checked above, against streamload's limit
        let decoded = reader.decode().map_err(corrupt)?;
        let sixteen_bit = matches!(
            decoded.color(),
            image::ColorType::L16
                | image::ColorType::La16
                | image::ColorType::Rgb16
                | image::ColorType::Rgba16
        );
        let (width, height, pixels) = if sixteen_bit {
            let rgb = decoded.into_rgb16();
            let (w, h) = rgb.dimensions();
            (
                w,
                h,
                rgb.into_raw().into_iter().map(|v| (v >> 8) as u8).collect(),
            )
        } else {
            let rgb = decoded.into_rgb8();
            let (w, h) = rgb.dimensions();
            (w, h, rgb.into_raw())
        };
        let shape = (height as usize, width as usize, 3);
        Array3::from_shape_vec(shape, pixels)
            .map_err(|e| anyhow::anyhow!("corrupt PNG: {e} for {shape:?} pixels"))
    })
}

/// Decodes a JPEG or a PNG, told apart by their first bytes (`tf.io.decode_image(bytes,
/// channels=3)`, for these two formats).
///
/// # Errors
///
/// If `bytes` is neither, or is a corrupt or truncated one.
///
/// ```
/// let err = streamload::image::decode_image(b"hello").unwrap_err();
/// assert!(err.to_string().contains("neither a JPEG nor a PNG"));
/// ```
pub fn decode_image(bytes: &[u8]) -> anyhow::Result<Array3<u8>> {
    if bytes.starts_with(JPEG_MAGIC) {
        decode_jpeg(bytes)
    } else if bytes.starts_with(PNG_MAGIC) {
        decode_png(bytes)
    } else {
        anyhow::bail!("neither a JPEG nor a PNG ({})", describe(bytes))
    }
}

/// Reads a JPEG or PNG file and decodes it ([`decode_image`]); errors name the file.
///
/// This is blocking file I/O plus CPU work: call it in
/// [`map_parallel`](crate::Dataset::map_parallel), whose workers are blocking threads.
///
/// # Errors
///
/// If the file cannot be read, or is not a JPEG or PNG the decoders can read: the message
/// names the file, e.g. `decoding image data/3.jpg: corrupt or truncated JPEG: ...`.
pub fn read_image(path: impl AsRef<Path>) -> anyhow::Result<Array3<u8>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).with_context(|| format!("reading image {}", path.display()))?;
    decode_image(&bytes).with_context(|| format!("decoding image {}", path.display()))
}

/// Runs a decoder, turning a panic inside it (malformed input it did not expect) into an error.
fn guard<R>(format: &str, f: impl FnOnce() -> anyhow::Result<R>) -> anyhow::Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(anyhow::anyhow!(
            "the {format} decoder failed on malformed data"
        ))
    })
}

/// A short description of data that is not what it should be: its size and first bytes.
fn describe(bytes: &[u8]) -> String {
    let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{} bytes, starting {}", bytes.len(), head.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(width: u32, height: u32) -> image::RgbImage {
        image::RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x * 255 / width) as u8, (y * 255 / height) as u8, 100])
        })
    }

    fn encode(img: &image::RgbImage, format: image::ImageFormat) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, format).expect("encoded");
        out.into_inner()
    }

    #[test]
    fn jpeg_and_png_decode_to_rgb_hwc() -> anyhow::Result<()> {
        let img = gradient(40, 30);
        let png = decode_image(&encode(&img, image::ImageFormat::Png))?;
        assert_eq!(png.shape(), &[30, 40, 3]);
        assert_eq!(png[[10, 20, 0]], img.get_pixel(20, 10)[0]);
        assert_eq!(png[[10, 20, 1]], img.get_pixel(20, 10)[1]);
        let jpeg = decode_image(&encode(&img, image::ImageFormat::Jpeg))?;
        assert_eq!(jpeg.shape(), &[30, 40, 3]);
        // Lossy, but close on a smooth gradient.
        let diff = (i32::from(jpeg[[10, 20, 0]]) - i32::from(img.get_pixel(20, 10)[0])).abs();
        assert!(diff < 12, "jpeg pixel off by {diff}");
        Ok(())
    }

    #[test]
    fn grey_png_is_repeated_into_three_channels() -> anyhow::Result<()> {
        let grey = image::GrayImage::from_fn(4, 2, |x, _| image::Luma([x as u8 * 50]));
        let mut out = std::io::Cursor::new(Vec::new());
        grey.write_to(&mut out, image::ImageFormat::Png)?;
        let rgb = decode_png(&out.into_inner())?;
        assert_eq!(rgb.shape(), &[2, 4, 3]);
        assert_eq!(rgb.slice(ndarray::s![1, 3, ..]).to_vec(), [150, 150, 150]);
        Ok(())
    }

    #[test]
    fn grey_jpeg_is_repeated_into_three_channels() -> anyhow::Result<()> {
        let grey = image::GrayImage::from_fn(16, 8, |x, _| image::Luma([x as u8 * 16]));
        let mut out = std::io::Cursor::new(Vec::new());
        grey.write_to(&mut out, image::ImageFormat::Jpeg)?;
        let rgb = decode_jpeg(&out.into_inner())?;
        assert_eq!(rgb.shape(), &[8, 16, 3]);
        let px = rgb.slice(ndarray::s![4, 10, ..]).to_vec();
        assert!(px[0] == px[1] && px[1] == px[2], "{px:?}");
        assert!((i32::from(px[0]) - 160).abs() < 8, "{px:?}");
        Ok(())
    }

    #[test]
    fn truncated_and_foreign_data_are_errors() {
        let jpeg = encode(&gradient(64, 64), image::ImageFormat::Jpeg);
        let png = encode(&gradient(64, 64), image::ImageFormat::Png);
        for cut in [jpeg.len() / 2, 20, 3] {
            let err = decode_jpeg(&jpeg[..cut]).expect_err("truncated JPEG");
            assert!(err.to_string().contains("JPEG"), "{err:#}");
        }
        let err = decode_png(&png[..png.len() / 2]).expect_err("truncated PNG");
        assert!(format!("{err:#}").contains("PNG"), "{err:#}");
        assert!(decode_jpeg(&png).is_err());
        let err = decode_image(b"GIF89a....").expect_err("not an image");
        assert!(err.to_string().contains("6 bytes") || err.to_string().contains("10 bytes"));
    }
}
