//! The protobuf wire format of a `tf.train.Example`, read as TensorFlow's fast parser reads
//! it: the walk over the feature map and the decoding of one list.

use std::ops::Range;

use bytes::Bytes;

use super::{Found, Mode, ParseSpec};
use crate::format::FeatureSpec;
use crate::tensor::{DType, Values};

/// The record is not a well-formed `Example` as TensorFlow's fast parser reads one.
pub(super) struct Malformed;

pub(super) type Wire<T> = Result<T, Malformed>;

/// A cursor over `record[..limit]`, as protobuf's `CodedInputStream` over an array: a nested
/// message's length only narrows the limit (a length running past the enclosing message is
/// cut to it, as protobuf's `PushLimit` does), and reads past the limit fail.
#[derive(Clone, Debug)]
pub(super) struct Stream<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    limit: usize,
}

impl<'a> Stream<'a> {
    pub(super) fn new(buf: &'a [u8], range: Range<usize>) -> Stream<'a> {
        Stream {
            buf,
            pos: range.start,
            limit: range.end,
        }
    }

    /// Restores a limit [`Stream::push_limit`] returned.
    #[inline(always)]
    pub(super) fn pop_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    #[inline(always)]
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.limit
    }

    #[inline(always)]
    pub(super) fn left(&self) -> usize {
        self.limit - self.pos
    }

    #[inline(always)]
    pub(super) fn peek(&self) -> Option<u8> {
        (self.pos < self.limit).then(|| self.buf[self.pos])
    }

    /// `ExpectTag` for a one-byte tag.
    #[inline(always)]
    pub(super) fn expect(&mut self, byte: u8) -> bool {
        let yes = self.peek() == Some(byte);
        self.pos += usize::from(yes);
        yes
    }

    /// `ReadVarint64`: at most 10 bytes, within the limit.
    #[inline(always)]
    pub(super) fn varint64(&mut self) -> Wire<u64> {
        if let Some(b) = self.peek()
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        let mut value = 0u64;
        for i in 0..10 {
            let b = self.peek().ok_or(Malformed)?;
            self.pos += 1;
            value |= u64::from(b & 0x7f).wrapping_shl(7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(Malformed)
    }

    /// `ReadVarint32`: a varint cut to its low 32 bits.
    #[inline(always)]
    pub(super) fn varint32(&mut self) -> Wire<usize> {
        Ok(self.varint64()? as u32 as usize)
    }

    /// `PushLimit`: narrows the limit to `len` more bytes, unless that runs past it.
    #[inline(always)]
    pub(super) fn push_limit(&mut self, len: usize) -> usize {
        let old = self.limit;
        if len <= self.left() {
            self.limit = self.pos + len;
        }
        old
    }

    /// `len` bytes, as an absolute range.
    #[inline(always)]
    pub(super) fn take(&mut self, len: usize) -> Wire<Range<usize>> {
        if len > self.left() {
            return Err(Malformed);
        }
        self.pos += len;
        Ok(self.pos - len..self.pos)
    }

    /// A length-delimited string (`ParseString`).
    #[inline(always)]
    pub(super) fn string(&mut self) -> Wire<Range<usize>> {
        let len = self.varint32()?;
        self.take(len)
    }

    /// `SkipExtraneousTag`: steps over a field the parser does not know. A length running
    /// past the end stops at it (TensorFlow ignores `Skip`'s failure).
    fn skip_field(&mut self) -> Wire<()> {
        let tag = self.varint32()?;
        match tag & 7 {
            0 => {
                self.varint32()?;
            }
            1 => {
                self.take(8)?;
            }
            2 => {
                let len = self.varint32()?;
                self.pos += len.min(self.left());
            }
            5 => {
                self.take(4)?;
            }
            _ => return Err(Malformed),
        }
        Ok(())
    }
}

/// Walks Example -> Features -> map entries (TensorFlow's `ParseExample`), recording in
/// `found` the entry that counts for each spec'd feature. Returns the last entry for a
/// spec'd key whose `Feature` starts with a tag that is not a list ("Unsupported datatype.").
pub(super) fn walk(
    record: &Bytes,
    spec: &ParseSpec,
    mode: Mode<'_>,
    found: &mut [Found],
) -> Wire<Option<usize>> {
    let mut unsupported = None;
    let mut s = Stream::new(record, 0..record.len());
    let mut entry_index = 0;
    while !s.at_end() {
        if !s.expect(0x0a) {
            s.skip_field()?;
            continue;
        }
        // Features.
        let len = s.varint32()?;
        let outer = s.push_limit(len);
        while !s.at_end() {
            if !s.expect(0x0a) {
                return Err(Malformed);
            }
            // One map entry: exactly a key and a value, in either order.
            let len = s.varint32()?;
            let features = s.push_limit(len);
            let (mut key, mut value) = (0..0, 0..0);
            for _ in 0..2 {
                match s.varint32()? {
                    0x0a => key = s.string()?,
                    0x12 => value = s.string()?,
                    _ => return Err(Malformed),
                }
            }
            if !s.at_end() {
                return Err(Malformed);
            }
            s.pop_limit(features);
            let entry = entry_index;
            entry_index += 1;
            let Some(index) = spec.find_in(record, key) else {
                continue;
            };
            let Some(&first) = record.get(value.start).filter(|_| !value.is_empty()) else {
                if let (
                    Mode::Batch { .. },
                    FeatureSpec::VarLen { .. } | FeatureSpec::Ragged { .. },
                ) = (mode, &spec.inner[index].spec)
                {
                    found[index] = Found::Kindless { entry };
                }
                continue;
            };
            let kind = match first {
                0x0a => DType::String,
                0x12 => DType::Float32,
                0x1a => DType::Int64,
                _ => {
                    unsupported = Some(entry);
                    continue;
                }
            };
            found[index] = Found::List {
                entry,
                kind,
                list: value.start + 1..value.end,
            };
        }
        s.pop_limit(outer);
    }
    Ok(unsupported)
}

/// Where a list's values go: into a [`Values`], or nowhere (`()`: only counted).
pub(super) trait ListOut {
    fn string(&mut self, record: &Bytes, range: Range<usize>);
    fn int64(&mut self, value: i64);
    fn float(&mut self, value: f32);
    fn floats(&mut self, bytes: &[u8]);
}

impl ListOut for () {
    #[inline(always)]
    fn string(&mut self, _: &Bytes, _: Range<usize>) {}
    #[inline(always)]
    fn int64(&mut self, _: i64) {}
    #[inline(always)]
    fn float(&mut self, _: f32) {}
    #[inline(always)]
    fn floats(&mut self, _: &[u8]) {}
}

impl ListOut for Values {
    #[inline(always)]
    fn string(&mut self, record: &Bytes, range: Range<usize>) {
        if let Values::String(v) = self {
            v.push(record.slice(range));
        }
    }
    #[inline(always)]
    fn int64(&mut self, value: i64) {
        if let Values::Int64(v) = self {
            v.push(value);
        }
    }
    #[inline(always)]
    fn float(&mut self, value: f32) {
        if let Values::Float32(v) = self {
            v.push(value);
        }
    }
    #[inline(always)]
    fn floats(&mut self, bytes: &[u8]) {
        if let Values::Float32(v) = self {
            v.extend(bytes.chunks_exact(4).map(le_f32));
        }
    }
}

/// Decodes the list message at the start of `feature` (a `Feature`'s bytes after its
/// first tag, a list of `dtype`) into `out` (`()` only counts), as TensorFlow's
/// `ParseBytesList` / `ParseFloatList` / `ParseInt64List` do: numbers packed or not, only the
/// first packed run, the rest of the `Feature` unread. Returns the number of values
/// TensorFlow counts. With a `capacity` (a fixed-length feature), a string past it is a
/// failure, and numbers past it are counted but not kept.
pub(super) fn decode_list(
    record: &Bytes,
    feature: Range<usize>,
    dtype: DType,
    capacity: Option<usize>,
    out: &mut impl ListOut,
) -> Wire<usize> {
    let mut s = Stream::new(record, feature);
    let len = s.varint32()?;
    s.push_limit(len);
    let room = capacity.unwrap_or(usize::MAX);
    let mut count = 0;
    match dtype {
        DType::String => {
            while !s.at_end() {
                if !s.expect(0x0a) || count >= room {
                    return Err(Malformed);
                }
                let r = s.string()?;
                out.string(record, r);
                count += 1;
            }
        }
        DType::Int64 => match s.peek() {
            None => {}
            Some(0x0a) => {
                s.pos += 1;
                let len = s.varint32()?;
                s.push_limit(len);
                while !s.at_end() {
                    let x = s.varint64()? as i64;
                    if count < room {
                        out.int64(x);
                    }
                    count += 1;
                }
            }
            Some(0x08) => {
                while !s.at_end() {
                    if !s.expect(0x08) {
                        return Err(Malformed);
                    }
                    let x = s.varint64()? as i64;
                    if count < room {
                        out.int64(x);
                    }
                    count += 1;
                }
            }
            Some(_) => return Err(Malformed),
        },
        DType::Float32 => match s.peek() {
            None => {}
            Some(0x0a) => {
                s.pos += 1;
                let len = s.varint32()?;
                s.push_limit(len);
                // TensorFlow sizes the list by the declared length, reads the whole floats
                // it keeps, and leaves any bytes after them unread.
                count = len / 4;
                let bytes = s.take(count.min(room) * 4)?;
                out.floats(&record[bytes]);
            }
            Some(0x0d) => {
                while !s.at_end() {
                    if !s.expect(0x0d) {
                        return Err(Malformed);
                    }
                    let r = s.take(4)?;
                    if count < room {
                        out.float(le_f32(&record[r]));
                    }
                    count += 1;
                }
            }
            Some(_) => return Err(Malformed),
        },
    }
    Ok(count)
}

/// A little-endian `f32` from the first four of `b`'s bytes (`b` holds at least four).
#[inline(always)]
pub(super) fn le_f32(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}
