//! The bridge to libjpeg-turbo (`jpeg_turbo.c`, built by build.rs against the system's
//! library): DCT-scaled and cropped decoding into RGB, errors as `Result`s.
//!
//! The only `unsafe` is the two calls into C and setting the output's length after the C side
//! has filled it. Their contract: the C side reads `bytes` only
//! within its length (libjpeg's memory source), writes the output only within the length it is
//! given, and writes at most `ERR_LEN` bytes of message; a libjpeg error longjmps within the C
//! code (never across Rust frames) and comes back as -1.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_ulonglong};

use ndarray::Array3;

const ERR_LEN: usize = 200;

#[repr(C)]
#[derive(Default)]
struct Header {
    width: c_uint,
    height: c_uint,
    components: c_int,
    progressive: c_int,
}

unsafe extern "C" {
    fn sl_jpeg_header(data: *const u8, len: c_ulong, out: *mut Header, msg: *mut c_char) -> c_int;
    fn sl_jpeg_decode(
        data: *const u8,
        len: c_ulong,
        req: *const Request,
        msg: *mut c_char,
    ) -> c_int;
}

/// `struct sl_request` of jpeg_turbo.c.
#[repr(C)]
struct Request {
    scale_denom: c_uint,
    crop_x: c_uint,
    crop_y: c_uint,
    crop_w: c_uint,
    crop_h: c_uint,
    max_pixels: c_ulonglong,
    out: *mut u8,
    out_len: c_ulonglong,
}

/// What a JPEG's header says about its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JpegInfo {
    pub(crate) height: usize,
    pub(crate) width: usize,
}

fn message(buf: &[c_char; ERR_LEN]) -> String {
    // The C side always NUL-terminates (snprintf), and the buffer starts zeroed.
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if text.is_empty() {
        "unknown libjpeg error".to_owned()
    } else {
        text
    }
}

fn len(bytes: &[u8]) -> anyhow::Result<c_ulong> {
    c_ulong::try_from(bytes.len())
        .map_err(|_| anyhow::anyhow!("JPEG of {} bytes is too large", bytes.len()))
}

/// Reads the header only (no pixel is decoded, nothing sized by the header is allocated).
pub(crate) fn header(bytes: &[u8]) -> anyhow::Result<JpegInfo> {
    let mut out = Header::default();
    let mut msg = [0 as c_char; ERR_LEN];
    // SAFETY: `bytes` is a live slice of `len` bytes, `out` and `msg` are valid for writes;
    // the C function reads only within `len` (jpeg_mem_src) and writes at most ERR_LEN bytes.
    let rc = unsafe { sl_jpeg_header(bytes.as_ptr(), len(bytes)?, &mut out, msg.as_mut_ptr()) };
    anyhow::ensure!(rc == 0, "corrupt JPEG header: {}", message(&msg));
    Ok(JpegInfo {
        height: out.height as usize,
        width: out.width as usize,
    })
}

/// A window of the image at a DCT scale: `(y, x, height, width)` in scaled pixels.
pub(crate) type Window = (usize, usize, usize, usize);

/// Output size of one dimension at `1/denom` scale (libjpeg's `jdiv_round_up`, as tf.io's
/// `ratio`).
pub(crate) fn scaled(dim: usize, denom: usize) -> usize {
    dim.div_ceil(denom)
}

/// Decodes at scale `1/denom` (1, 2, 4 or 8), keeping `window` of the scaled image (all of it
/// if `None`); an image over [`MAX_PIXELS`](super::MAX_PIXELS) is refused from its header.
pub(crate) fn decode(
    bytes: &[u8],
    denom: usize,
    window: Option<Window>,
) -> anyhow::Result<Array3<u8>> {
    decode_known(bytes, header(bytes)?, denom, window)
}

/// [`decode`] when the header has already been read into `info`.
pub(crate) fn decode_known(
    bytes: &[u8],
    info: JpegInfo,
    denom: usize,
    window: Option<Window>,
) -> anyhow::Result<Array3<u8>> {
    anyhow::ensure!(
        matches!(denom, 1 | 2 | 4 | 8),
        "JPEG scale 1/{denom}: the ratio must be 1, 2, 4 or 8"
    );
    super::decode::check_pixels("JPEG", info.width, info.height)?;
    let (sh, sw) = (scaled(info.height, denom), scaled(info.width, denom));
    let (y, x, h, w) = window.unwrap_or((0, 0, sh, sw));
    anyhow::ensure!(
        h > 0
            && w > 0
            && y.checked_add(h).is_some_and(|end| end <= sh)
            && x.checked_add(w).is_some_and(|end| end <= sw),
        "crop window of {h}x{w} at (y {y}, x {x}) is not inside the {sh}x{sw} image (height x width)"
    );
    let c = |v: usize| c_uint::try_from(v).map_err(|_| anyhow::anyhow!("JPEG too large"));
    // Not zeroed (a full-size decode would write every byte twice): the C side fills all
    // `h * w * 3` bytes when it returns 0, and the length is set only then.
    let out_len = h * w * 3;
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut msg = [0 as c_char; ERR_LEN];
    // SAFETY: `bytes` is live for `len` bytes; `out` has capacity for `out_len` bytes, which
    // the C side checks against the window before writing (h * w * 3); `msg` takes ERR_LEN
    // bytes.
    let req = Request {
        scale_denom: c(denom)?,
        crop_x: c(x)?,
        crop_y: c(y)?,
        crop_w: c(w)?,
        crop_h: c(h)?,
        max_pixels: super::MAX_PIXELS,
        out: out.as_mut_ptr(),
        out_len: out_len as c_ulonglong,
    };
    let rc = unsafe { sl_jpeg_decode(bytes.as_ptr(), len(bytes)?, &req, msg.as_mut_ptr()) };
    anyhow::ensure!(rc == 0, "corrupt or truncated JPEG: {}", message(&msg));
    // SAFETY: on success sl_jpeg_decode has written all `crop_h` rows of `crop_w * 3` bytes
    // (every row of the window, or it returns -1), i.e. `out_len` initialised bytes.
    unsafe { out.set_len(out_len) };
    Ok(Array3::from_shape_vec((h, w, 3), out)?)
}
