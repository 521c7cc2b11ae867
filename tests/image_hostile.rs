//! Hostile and unusual images through every decoder: truncated and corrupt JPEGs, CMYK,
//! grayscale and progressive JPEGs (tests/data/images, written by
//! scripts/make_hostile_images.py with Pillow), a PNG handed to the JPEG decoders, and
//! decompression bombs (a few hundred bytes declaring 30,000 x 30,000 pixels). Each gives a
//! correct image or an error that says what is wrong (naming the file where a file was read),
//! never a panic, an abort or an allocation sized by the header.
#![cfg(feature = "image")]

use std::path::PathBuf;
use std::time::Instant;

use ndarray::s;
use rand::SeedableRng;
use streamload::image::{self, CenterCrop, RandomResizedCrop};

fn data(name: &str) -> Vec<u8> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/images")).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let img = ::image::RgbImage::from_fn(width, height, |x, y| ::image::Rgb([x as u8, y as u8, 7]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, ::image::ImageFormat::Png)
        .expect("encoded");
    out.into_inner()
}

/// Every JPEG decoder of the crate on `bytes`: the results, named.
fn all_decoders(bytes: &[u8]) -> Vec<(&'static str, anyhow::Result<Vec<usize>>)> {
    let shape = |r: anyhow::Result<ndarray::Array3<u8>>| r.map(|a| a.shape().to_vec());
    let shape_f = |r: anyhow::Result<ndarray::Array3<f32>>| r.map(|a| a.shape().to_vec());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    vec![
        ("decode_jpeg", shape(image::decode_jpeg(bytes))),
        ("decode_image", shape(image::decode_image(bytes))),
        (
            "decode_jpeg_scaled/1",
            shape(image::decode_jpeg_scaled(bytes, 1)),
        ),
        (
            "decode_jpeg_scaled/4",
            shape(image::decode_jpeg_scaled(bytes, 4)),
        ),
        (
            "decode_and_crop_jpeg",
            shape(image::decode_and_crop_jpeg(bytes, [1, 1, 4, 4])),
        ),
        (
            "decode_and_resize",
            shape(image::decode_and_resize(bytes, 8, 8)),
        ),
        (
            "RandomResizedCrop",
            shape_f(RandomResizedCrop::new(8, 8).apply(bytes, &mut rng)),
        ),
        (
            "CenterCrop",
            shape_f(CenterCrop::new(8, 8, 10).apply(bytes)),
        ),
    ]
}

fn assert_all_fail(bytes: &[u8], needle: &str) {
    for (name, result) in all_decoders(bytes) {
        match result {
            Ok(shape) => panic!("{name}: decoded {shape:?}, expected an error with {needle:?}"),
            Err(e) => assert!(format!("{e:#}").contains(needle), "{name}: {e:#}"),
        }
    }
}

/// A JPEG whose frame header (SOF) claims `height` x `width`; the data stays small.
fn jpeg_claiming(height: u16, width: u16) -> Vec<u8> {
    let mut bytes = data("baseline.jpg");
    let sof = bytes
        .windows(2)
        .position(|w| w[0] == 0xFF && matches!(w[1], 0xC0..=0xC2))
        .expect("a frame header");
    // FF Cx, length (2), precision (1), height (2), width (2).
    bytes[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    bytes[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
    bytes
}

#[test]
fn decompression_bombs_are_refused_from_the_header() {
    let bomb = jpeg_claiming(30_000, 30_000);
    assert!(bomb.len() < 2_000);
    assert_eq!(
        image::extract_jpeg_shape(&bomb).expect("header"),
        (30_000, 30_000)
    );
    let start = Instant::now();
    assert_all_fail(&bomb, "limit");
    // Refused before decoding: no 2.7 GB buffer, no decoding of a 900-megapixel image (this
    // bound is generous; the refusals take microseconds).
    assert!(start.elapsed().as_secs() < 10);

    // A PNG whose header says 30,000 x 30,000 (its checksum made right).
    let mut bomb = png(8, 8);
    bomb[16..20].copy_from_slice(&30_000u32.to_be_bytes());
    bomb[20..24].copy_from_slice(&30_000u32.to_be_bytes());
    let crc = crc32(&bomb[12..29]);
    bomb[29..33].copy_from_slice(&crc.to_be_bytes());
    for result in [
        image::decode_png(&bomb).map(|_| ()),
        image::decode_image(&bomb).map(|_| ()),
        CenterCrop::new(8, 8, 10).apply(&bomb).map(|_| ()),
    ] {
        let err = result.expect_err("a 900-megapixel PNG");
        assert!(format!("{err:#}").contains("limit"), "{err:#}");
    }
    // Just under the limit is allowed through to the decoder (which then finds the data
    // missing).
    let side = (image::MAX_PIXELS as f64).sqrt() as u16;
    let err = image::decode_jpeg_scaled(&jpeg_claiming(side.min(9_000), side.min(9_000)), 8)
        .expect_err("data missing");
    assert!(!format!("{err:#}").contains("limit"), "{err:#}");
}

/// CRC-32 (PNG's), bit by bit.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in bytes {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_png_given_to_the_jpeg_decoders_is_named_as_such() {
    let bytes = png(16, 16);
    for result in [
        image::decode_jpeg(&bytes).map(|_| ()),
        image::decode_jpeg_scaled(&bytes, 2).map(|_| ()),
        image::decode_and_crop_jpeg(&bytes, [0, 0, 2, 2]).map(|_| ()),
        image::decode_and_resize(&bytes, 4, 4).map(|_| ()),
    ] {
        let err = result.expect_err("a PNG");
        assert!(err.to_string().contains("not a JPEG but a PNG"), "{err:#}");
    }
    // decode_image and the transforms take it.
    assert_eq!(
        image::decode_image(&bytes).expect("png").shape(),
        &[16, 16, 3]
    );
}

#[test]
fn truncated_and_corrupt_jpegs_are_errors() {
    for name in ["baseline.jpg", "progressive.jpg"] {
        let bytes = data(name);
        for cut in [
            bytes.len() - 2,
            bytes.len() * 2 / 3,
            bytes.len() / 2,
            200,
            10,
            3,
            0,
        ] {
            for (decoder, result) in all_decoders(&bytes[..cut]) {
                // A window above the cut may legitimately decode; a whole image may not.
                let partial = decoder.contains("crop") || decoder.contains("Crop");
                if result.is_ok() && !partial && cut < bytes.len() - 2 {
                    panic!("{name} cut at {cut}: {decoder} decoded a truncated file");
                }
                if let Err(e) = result {
                    assert!(format!("{e:#}").contains("JPEG"), "{decoder}: {e:#}");
                }
            }
        }
    }
    // Garbage after a valid start of image.
    let mut garbage = vec![0xFF, 0xD8, 0xFF];
    garbage.extend((0..500u32).map(|i| (i * 7919 % 251) as u8));
    assert_all_fail(&garbage, "JPEG");
}

#[test]
fn cmyk_jpegs_come_out_as_rgb() -> anyhow::Result<()> {
    // Adobe (inverted) CMYK blocks: red, cyan, white, and K = 128 (grey 127).
    let bytes = data("cmyk.jpg");
    let want = [
        ((8, 8), [255, 0, 0]),
        ((8, 24), [0, 255, 255]),
        ((24, 8), [255, 255, 255]),
        ((24, 24), [127, 127, 127]),
    ];
    for (name, img) in [
        ("decode_jpeg", image::decode_jpeg(&bytes)?),
        ("decode_jpeg_scaled", image::decode_jpeg_scaled(&bytes, 1)?),
    ] {
        assert_eq!(img.shape(), &[32, 32, 3], "{name}");
        for ((y, x), rgb) in want {
            let got = img.slice(s![y, x, ..]).to_vec();
            for c in 0..3 {
                let diff = (i32::from(got[c]) - rgb[c]).abs();
                assert!(diff <= 6, "{name} at ({y}, {x}): {got:?} vs {rgb:?}");
            }
        }
    }
    let crop = image::decode_and_crop_jpeg(&bytes, [20, 20, 8, 8])?;
    assert_eq!(
        crop,
        image::decode_jpeg_scaled(&bytes, 1)?.slice(s![20..28, 20..28, ..])
    );
    Ok(())
}

#[test]
fn grayscale_jpegs_repeat_into_three_channels() -> anyhow::Result<()> {
    let bytes = data("grey.jpg");
    for img in [
        image::decode_jpeg(&bytes)?,
        image::decode_jpeg_scaled(&bytes, 2)?,
    ] {
        for px in img.rows() {
            assert!(px[0] == px[1] && px[1] == px[2], "{px:?}");
        }
    }
    let full = image::decode_jpeg_scaled(&bytes, 1)?;
    // The ramp: x * 4.
    assert!(
        (i32::from(full[[8, 40, 0]]) - 160).abs() <= 4,
        "{}",
        full[[8, 40, 0]]
    );
    Ok(())
}

#[test]
fn progressive_jpegs_decode_scale_and_crop_like_baseline_ones() -> anyhow::Result<()> {
    let progressive = data("progressive.jpg");
    let baseline = data("baseline.jpg");
    let p = image::decode_jpeg_scaled(&progressive, 1)?;
    let b = image::decode_jpeg_scaled(&baseline, 1)?;
    assert_eq!(p.shape(), &[60, 80, 3]);
    let diff = p
        .iter()
        .zip(b.iter())
        .map(|(x, y)| (i32::from(*x) - i32::from(*y)).abs())
        .max()
        .unwrap_or(0);
    assert!(diff <= 8, "progressive vs baseline: {diff}");
    assert_eq!(
        image::decode_and_crop_jpeg(&progressive, [13, 21, 30, 40])?,
        p.slice(s![13..43, 21..61, ..])
    );
    assert_eq!(
        image::decode_jpeg_scaled(&progressive, 8)?.shape(),
        &[8, 10, 3]
    );
    assert_eq!(image::decode_jpeg(&progressive)?.shape(), &[60, 80, 3]);
    Ok(())
}

#[test]
fn read_image_names_the_file_of_a_bomb() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bomb.jpg");
    std::fs::write(&path, jpeg_claiming(30_000, 30_000))?;
    let err = image::read_image(&path).expect_err("bomb");
    let text = format!("{err:#}");
    assert!(
        text.contains("bomb.jpg") && text.contains("30000x30000"),
        "{text}"
    );
    Ok(())
}

/// TensorFlow 2.21's `decode_jpeg(ratio=r)` and `decode_and_crop_jpeg` of the sample images
/// (tests/data/tensorflow/jpeg_scaled.json, written by scripts/tf_jpeg_scaled.py). Both are
/// libjpeg-turbo with INTEGER_FAST IDCT and fancy upsampling (CMYK converted by TensorFlow's
/// formula): the bytes are TensorFlow's exactly.
#[test]
fn scaled_and_cropped_decoding_matches_tensorflow() -> anyhow::Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow/jpeg_scaled.json"
    );
    let cases: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let mut report = Vec::new();
    for name in ["baseline.jpg", "progressive.jpg", "cmyk.jpg", "grey.jpg"] {
        let bytes = data(name);
        for (key, ours) in [
            ("ratio1", image::decode_jpeg_scaled(&bytes, 1)?),
            ("ratio2", image::decode_jpeg_scaled(&bytes, 2)?),
            ("ratio4", image::decode_jpeg_scaled(&bytes, 4)?),
            ("ratio8", image::decode_jpeg_scaled(&bytes, 8)?),
            ("crop", image::decode_and_crop_jpeg(&bytes, [5, 3, 10, 9])?),
        ] {
            let case = &cases[format!("{name}/{key}")];
            let shape: Vec<usize> = serde_json::from_value(case["shape"].clone())?;
            let want: Vec<u8> = serde_json::from_value(case["pixels"].clone())?;
            assert_eq!(ours.shape(), &shape[..], "{name}/{key}");
            let diffs: Vec<i32> = ours
                .iter()
                .zip(&want)
                .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
                .collect();
            let max = diffs.iter().copied().max().unwrap_or(0);
            let off = diffs.iter().filter(|d| **d > 0).count();
            report.push(format!(
                "{name}/{key}: max {max}, {off} of {} differ",
                diffs.len()
            ));
            assert_eq!(max, 0, "{name}/{key}: {off} values differ, by up to {max}");
        }
    }
    println!("{}", report.join("\n"));
    Ok(())
}
