//! A small, strict, streaming tar reader (and the header writer [`ShardWriter`] uses).
//!
//! Written here rather than taken from the async tar crates, which had four advisories in eight
//! months (CVE-2025-62518 "TARmageddon" in `tokio-tar`, unpatched there, and fixes in
//! `astral-tokio-tar` 0.5.6, 0.6.0, 0.6.1 and 0.6.2), most of them about where one member ends
//! and the next header starts. This reader only reads: it never touches the file system, so
//! the path-traversal and link classes of bug cannot arise, and it has a single rule for where
//! the next header is (after the member's data, padded to 512 bytes, with its size taken from
//! the header, or from a PAX `size` that must agree with it).
//!
//! What it reads (the formats Python's `tarfile`, GNU tar and bsdtar write): ustar headers (the
//! `prefix` field joined to the name), PAX extended headers (`x`: `path` and `size`; global
//! `g` headers are checked and otherwise ignored), GNU long names (`L`, `././@LongLink`) and
//! long link names (`K`, ignored). Regular files (`0`, `\0`, `7`) are the members; directories,
//! links, devices and FIFOs (`1`-`6`, and a `\0` member whose name ends with `/`, as old tars
//! write directories) are skipped, as the `webdataset` package does, and must have no data; a
//! volume label (`V`) is skipped with its data. GNU sparse files (`S`), multi-volume
//! continuations (`M`) and unknown types are refused: their data cannot be read as a file's.
//! The archive ends at its first all-zero block (as Python's `tarfile`) or at the end of the
//! stream at a header boundary.
//!
//! Every header's checksum is checked (the unsigned sum, or the signed one old tars wrote).
//! Sizes are octal or GNU base-256; a member's data is never allocated by its declared size: it
//! is gathered as it arrives (see [`BlockCursor`]), and a size over the reader's limit is
//! refused before any byte is read.

use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use futures::stream::Stream;

use crate::storage::blocks::BlockCursor;

/// Tar's block size: headers are one block, data is padded to a multiple of it.
pub(crate) const BLOCK: usize = 512;
/// The default limit on a member's size (2 GiB): a larger member is refused as damage, never
/// allocated.
pub(crate) const DEFAULT_MAX_MEMBER: u64 = 1 << 31;
/// The limit on a PAX header's or a GNU long name's size (1 MiB).
const MAX_META: u64 = 1 << 20;

/// One regular file of an archive.
#[derive(Debug)]
pub(crate) struct Member {
    /// Its name (a PAX `path` or GNU long name, else the ustar prefix and name).
    pub(crate) name: String,
    pub(crate) data: Bytes,
    /// Where its first header starts (the PAX or GNU long-name header before it, if any).
    pub(crate) start: u64,
}

/// Damage found by the reader.
#[derive(Debug)]
pub(crate) struct TarError {
    /// Where: the offset of the header of the member concerned.
    pub(crate) offset: u64,
    /// Where that member's first header (a PAX or long-name header before it) starts.
    pub(crate) start: u64,
    pub(crate) message: String,
    /// The member concerned, when its header was read.
    pub(crate) member: Option<String>,
    /// The first header failed its checksum and the stream starts as a GZIP one.
    pub(crate) looks_gzip: bool,
}

/// An error reading the stream: damage, or the source's own error.
#[derive(Debug)]
pub(crate) enum ReadError {
    Tar(TarError),
    Io(std::io::Error),
}

/// What the reader is in the middle of.
#[derive(Debug)]
enum Step {
    /// A header (the first of a member's, or after a PAX / long-name header).
    Header,
    /// The data of a PAX header (`x`, or global `g`), or a GNU long name (`L`) or link
    /// name (`K`), `size` bytes, all read.
    Meta {
        kind: u8,
        size: usize,
    },
    /// A regular member's data.
    Data {
        size: usize,
        name: String,
    },
    /// Bytes to drop: a skipped member's data and padding, or padding.
    Skip {
        left: u64,
    },
    End,
}

/// The overrides a PAX header or a GNU long name gives the next member.
#[derive(Debug, Default)]
struct Pending {
    /// Where the member's first header started.
    start: Option<u64>,
    path: Option<String>,
    size: Option<u64>,
    long_name: Option<String>,
}

/// The regular files of a tar stream read as blocks.
pub(crate) struct TarMembers<S> {
    pub(crate) cursor: BlockCursor<S>,
    step: Step,
    pending: Pending,
    max_member: u64,
    /// The bytes are the file's own (not decompressed): a damaged first header that looks like
    /// GZIP's magic is reported as such.
    raw: bool,
    /// The header being read (the start of a member's header chain at `pending.start`).
    header_at: u64,
}

/// The end of a whole block of `size` bytes of data.
fn padding(size: u64) -> u64 {
    (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64
}

/// Bytes up to the first NUL (tar's `nts`).
fn nts(field: &[u8]) -> &[u8] {
    match memchr::memchr(0, field) {
        Some(n) => &field[..n],
        None => field,
    }
}

/// A numeric field: octal digits (NUL- or space-terminated, blank is 0), or GNU base-256
/// (first byte `0x80`; `0xff`, a negative number, is refused).
fn number(field: &[u8]) -> Result<u64, String> {
    match field.first() {
        Some(0x80) => {
            let mut n: u64 = 0;
            for &b in &field[1..] {
                n = n
                    .checked_mul(256)
                    .and_then(|n| n.checked_add(u64::from(b)))
                    .ok_or("a base-256 number that overflows 64 bits")?;
            }
            Ok(n)
        }
        Some(0xff) => Err("a negative base-256 number".into()),
        _ => {
            let text = nts(field);
            let text = text.trim_ascii();
            let mut n: u64 = 0;
            for &b in text {
                if !(b'0'..=b'7').contains(&b) {
                    return Err(format!(
                        "a numeric field that is not octal ({:?})",
                        String::from_utf8_lossy(field)
                    ));
                }
                n = n * 8 + u64::from(b - b'0');
            }
            Ok(n)
        }
    }
}

/// Whether the checksum field of `header` matches its bytes (unsigned sum, or signed as some
/// old tars computed it).
fn checksum_ok(header: &[u8]) -> Result<bool, String> {
    let stored = number(&header[148..156])?;
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, &b) in header.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += u64::from(b);
        signed += i64::from(b as i8);
    }
    Ok(stored == unsigned || i64::try_from(stored).is_ok_and(|s| s == signed))
}

fn utf8(bytes: &[u8], what: &str) -> Result<String, String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| format!("{what} is not UTF-8 ({:?})", String::from_utf8_lossy(bytes)))
}

/// The `path` and `size` of a PAX extended header's records (`LEN KEY=VALUE\n`, LEN counting
/// the whole record). Sparse files are refused.
fn pax_records(data: &[u8]) -> Result<(Option<String>, Option<u64>), String> {
    let (mut path, mut size) = (None, None);
    let mut rest = data;
    while !rest.is_empty() {
        // Padding NULs after the last record (some writers) end the header.
        if rest.iter().all(|&b| b == 0) {
            break;
        }
        let space = memchr::memchr(b' ', rest).ok_or("a PAX record without a length")?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse().ok())
            .ok_or("a PAX record with a bad length")?;
        if len <= space + 1 || len > rest.len() || rest[len - 1] != b'\n' {
            return Err(format!("a PAX record of length {len} that does not fit"));
        }
        let record = &rest[space + 1..len - 1];
        let eq = memchr::memchr(b'=', record).ok_or("a PAX record without '='")?;
        let (key, value) = (&record[..eq], &record[eq + 1..]);
        match key {
            b"path" => path = Some(utf8(value, "a PAX path")?),
            b"size" => {
                let text = std::str::from_utf8(value).unwrap_or("");
                if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!(
                        "a PAX size that is not a number ({:?})",
                        String::from_utf8_lossy(value)
                    ));
                }
                size = Some(
                    text.parse()
                        .map_err(|_| format!("a PAX size too large ({text})"))?,
                );
            }
            k if k.starts_with(b"GNU.sparse.") => {
                return Err("a GNU sparse file (PAX GNU.sparse.*), not supported".into());
            }
            _ => {}
        }
        rest = &rest[len..];
    }
    Ok((path, size))
}

/// What [`TarMembers::poll_exact`] read: `n` bytes, or the end of the stream after `got`.
enum Exact {
    Bytes(Bytes),
    Eof(usize),
}

impl<S> TarMembers<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    pub(crate) fn new(cursor: BlockCursor<S>, max_member: u64, raw: bool) -> Self {
        TarMembers {
            cursor,
            step: Step::Header,
            pending: Pending::default(),
            max_member,
            raw,
            header_at: 0,
        }
    }

    /// The offset of the next unread byte.
    pub(crate) fn offset(&self) -> u64 {
        self.cursor.offset
    }

    fn damage(&self, message: impl Into<String>, member: Option<String>) -> ReadError {
        ReadError::Tar(TarError {
            offset: self.header_at,
            start: self.pending.start.unwrap_or(self.header_at),
            message: message.into(),
            member,
            looks_gzip: false,
        })
    }

    /// Exactly `n` bytes, gathered across blocks as they arrive.
    fn poll_exact(&mut self, cx: &mut Context<'_>, n: usize) -> Poll<std::io::Result<Exact>> {
        loop {
            if self.cursor.carry.is_empty() && self.cursor.block.len() >= n {
                return Poll::Ready(Ok(Exact::Bytes(self.cursor.take_from_block(n))));
            }
            if self.cursor.block.is_empty() {
                if !ready!(self.cursor.poll_block(cx))? {
                    return Poll::Ready(Ok(Exact::Eof(self.cursor.carry.len())));
                }
                continue;
            }
            let need = n - self.cursor.carry.len();
            self.cursor.carry_from_block(need);
            if self.cursor.carry.len() == n {
                return Poll::Ready(Ok(Exact::Bytes(self.cursor.take_carry())));
            }
        }
    }

    /// Drops `left` bytes: `Ok(true)` when done, `Ok(false)` at the end of the stream first.
    fn poll_skip(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<bool>> {
        loop {
            let Step::Skip { left } = &mut self.step else {
                return Poll::Ready(Ok(true));
            };
            if *left == 0 {
                return Poll::Ready(Ok(true));
            }
            if self.cursor.block.is_empty() {
                if !ready!(self.cursor.poll_block(cx))? {
                    return Poll::Ready(Ok(false));
                }
                continue;
            }
            let n = (self.cursor.block.len() as u64).min(*left);
            *left -= n;
            self.cursor.block.advance(n as usize);
            self.cursor.offset += n;
        }
    }

    /// The next regular file, `None` at the end of the archive. After an error the reader
    /// must not be polled again.
    pub(crate) fn poll_member(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Member>, ReadError>> {
        loop {
            match &self.step {
                Step::End => return Poll::Ready(Ok(None)),
                Step::Skip { .. } => {
                    if !ready!(self.poll_skip(cx)).map_err(ReadError::Io)? {
                        return Poll::Ready(Err(self.damage(
                            "truncated tar archive (a member's data or padding is cut short)",
                            None,
                        )));
                    }
                    self.step = Step::Header;
                }
                Step::Header => {
                    self.header_at = self.cursor.offset;
                    let mut header = [0u8; BLOCK];
                    if self.cursor.carry.is_empty() && self.cursor.block.len() >= BLOCK {
                        // Read in place: no allocation per header.
                        header.copy_from_slice(&self.cursor.block[..BLOCK]);
                        self.cursor.block.advance(BLOCK);
                        self.cursor.offset += BLOCK as u64;
                    } else {
                        match ready!(self.poll_exact(cx, BLOCK)).map_err(ReadError::Io)? {
                            Exact::Bytes(bytes) => header.copy_from_slice(&bytes),
                            Exact::Eof(0) if self.pending.start.is_none() => {
                                self.step = Step::End;
                                continue;
                            }
                            Exact::Eof(got) => {
                                let what = if got == 0 {
                                    "truncated tar archive (an extended header without its member)"
                                        .to_string()
                                } else {
                                    format!("truncated tar header ({got} of 512 bytes)")
                                };
                                return Poll::Ready(Err(self.damage(what, None)));
                            }
                        }
                    }
                    if header.iter().all(|&b| b == 0) {
                        if self.pending.start.is_some() {
                            return Poll::Ready(Err(self.damage(
                                "an extended header without its member (end of archive)",
                                None,
                            )));
                        }
                        // The end of the archive (the second zero block, and anything after,
                        // is not read, as in Python's tarfile).
                        self.step = Step::End;
                        continue;
                    }
                    self.header(&header)?;
                }
                Step::Meta { kind, size } => {
                    let (kind, size) = (*kind, *size);
                    let data = match ready!(self.poll_exact(cx, size)).map_err(ReadError::Io)? {
                        Exact::Bytes(data) => data,
                        Exact::Eof(_) => {
                            return Poll::Ready(Err(
                                self.damage("truncated tar archive (an extended header)", None)
                            ));
                        }
                    };
                    match kind {
                        b'x' | b'g' => {
                            let (path, size) =
                                pax_records(&data).map_err(|m| self.damage(m, None))?;
                            if kind == b'x' {
                                self.pending.path = path.or(self.pending.path.take());
                                self.pending.size = size.or(self.pending.size);
                            }
                        }
                        b'L' => {
                            let name = utf8(nts(&data), "a GNU long name")
                                .map_err(|m| self.damage(m, None))?;
                            self.pending.long_name = Some(name);
                        }
                        _ => {}
                    }
                    self.step = Step::Skip {
                        left: padding(size as u64),
                    };
                }
                Step::Data { size, .. } => {
                    let size = *size;
                    let data = match ready!(self.poll_exact(cx, size)).map_err(ReadError::Io)? {
                        Exact::Bytes(data) => data,
                        Exact::Eof(got) => {
                            let Step::Data { name, .. } =
                                std::mem::replace(&mut self.step, Step::End)
                            else {
                                unreachable!("in Step::Data")
                            };
                            return Poll::Ready(Err(self.damage(
                                format!("truncated tar member ({got} of {size} bytes)"),
                                Some(name),
                            )));
                        }
                    };
                    let Step::Data { name, .. } = std::mem::replace(
                        &mut self.step,
                        Step::Skip {
                            left: padding(size as u64),
                        },
                    ) else {
                        unreachable!("in Step::Data")
                    };
                    let start = self.pending.start.take().unwrap_or(self.header_at);
                    self.pending = Pending::default();
                    return Poll::Ready(Ok(Some(Member { name, data, start })));
                }
            }
        }
    }

    /// Reads one header: sets the next step.
    fn header(&mut self, h: &[u8]) -> Result<(), ReadError> {
        match checksum_ok(h) {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                let mut e = self.damage("bad tar header checksum", None);
                if let ReadError::Tar(t) = &mut e {
                    t.looks_gzip = self.raw && self.header_at == 0 && h.starts_with(&[0x1f, 0x8b]);
                }
                return Err(e);
            }
        }
        self.pending.start.get_or_insert(self.header_at);
        let kind = h[156];
        let raw_name = nts(&h[..100]);
        let size = number(&h[124..136]).map_err(|m| self.damage(m, None))?;
        match kind {
            b'x' | b'g' | b'L' | b'K' => {
                if size > MAX_META {
                    return Err(self.damage(
                        format!(
                            "an extended header of {size} bytes, larger than the limit of {MAX_META}"
                        ),
                        None,
                    ));
                }
                self.step = Step::Meta {
                    kind,
                    size: size as usize,
                };
                return Ok(());
            }
            _ => {}
        }
        // The member's name: a PAX path, else a GNU long name, else prefix/name.
        let name = match (self.pending.path.take(), self.pending.long_name.take()) {
            (Some(path), _) => path,
            (None, Some(long)) => long,
            (None, None) => {
                let name = utf8(raw_name, "a member name").map_err(|m| self.damage(m, None))?;
                let prefix =
                    utf8(nts(&h[345..500]), "a member name").map_err(|m| self.damage(m, None))?;
                if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                }
            }
        };
        let directory = kind == 0 && raw_name.ends_with(b"/");
        match kind {
            b'0' | 0 | b'7' if !directory => {}
            b'1'..=b'6' | 0 => {
                if size != 0 || self.pending.size.is_some_and(|s| s != 0) {
                    return Err(self.damage(
                        format!(
                            "a {} member with {size} bytes of data",
                            kind_name(kind, directory)
                        ),
                        Some(name),
                    ));
                }
                // Skipped, as the webdataset package does.
                self.pending = Pending::default();
                self.step = Step::Header;
                return Ok(());
            }
            b'V' => {
                self.pending = Pending::default();
                self.step = Step::Skip {
                    left: size.saturating_add(padding(size)),
                };
                return Ok(());
            }
            other => {
                return Err(self.damage(
                    format!("unsupported tar member type {}", kind_name(other, false)),
                    Some(name),
                ));
            }
        }
        if let Some(pax) = self.pending.size
            && pax != size
        {
            if pax > self.max_member {
                return Err(self.damage(
                    format!(
                        "a member of {pax} bytes (PAX size), larger than the limit of {}",
                        self.max_member
                    ),
                    Some(name),
                ));
            }
            return Err(self.damage(
                format!("PAX size {pax} disagrees with the header's size {size}"),
                Some(name),
            ));
        }
        if size > self.max_member {
            return Err(self.damage(
                format!(
                    "a member of {size} bytes, larger than the limit of {}",
                    self.max_member
                ),
                Some(name),
            ));
        }
        self.step = Step::Data {
            size: usize::try_from(size).map_err(|_| {
                self.damage(
                    format!("a member of {size} bytes, larger than memory"),
                    Some(name.clone()),
                )
            })?,
            name,
        };
        Ok(())
    }

    /// Drops what is buffered (after an error).
    pub(crate) fn clear(&mut self) {
        self.cursor.clear();
        self.step = Step::End;
    }
}

fn kind_name(kind: u8, directory: bool) -> String {
    match kind {
        _ if directory => "directory".into(),
        b'1' => "hard link".into(),
        b'2' => "symbolic link".into(),
        b'3' => "character device".into(),
        b'4' => "block device".into(),
        b'5' => "directory".into(),
        b'6' => "FIFO".into(),
        b'S' => "'S' (GNU sparse file)".into(),
        b'M' => "'M' (GNU multi-volume continuation)".into(),
        k if k.is_ascii_graphic() => format!("'{}'", k as char),
        k => format!("{k:#04x}"),
    }
}

/// Writes a ustar header for a regular file of `size` bytes named `name` (which must fit in
/// 100 bytes; longer names go in a PAX header first, see [`pax_path`]).
pub(crate) fn ustar_header(name: &[u8], size: u64, kind: u8, mtime: u64) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name[..n]);
    octal(&mut h[100..108], 0o444);
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], mtime);
    h[156] = kind;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[265..272].copy_from_slice(b"bigdata");
    h[297..304].copy_from_slice(b"bigdata");
    h[148..156].fill(b' ');
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    h
}

/// `value` in octal, zero-padded, NUL-terminated, filling `field`.
fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    let text = format!("{value:0width$o}");
    field[..width].copy_from_slice(&text.as_bytes()[text.len() - width..]);
    field[width] = 0;
}

/// A PAX `path` record: `LEN path=NAME\n`, LEN counting itself.
pub(crate) fn pax_path(name: &str) -> Vec<u8> {
    let body = name.len() + " path=\n".len();
    let mut len = body + 1;
    while len != body + len.to_string().len() {
        len = body + len.to_string().len();
    }
    format!("{len} path={name}\n").into_bytes()
}

/// Zero bytes padding `size` bytes of data to a whole block.
pub(crate) fn padding_len(size: u64) -> usize {
    padding(size) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_path_length_counts_itself() {
        for n in [1, 5, 90, 91, 92, 93, 95, 96, 990, 994, 995, 996, 9990] {
            let name = "a".repeat(n);
            let record = pax_path(&name);
            let (len, _) = std::str::from_utf8(&record)
                .unwrap()
                .split_once(' ')
                .unwrap();
            assert_eq!(len.parse::<usize>().unwrap(), record.len(), "{n}");
            assert_eq!(pax_records(&record).unwrap().0.as_deref(), Some(&name[..]));
        }
    }

    #[test]
    fn numbers_octal_and_base256() {
        assert_eq!(number(b"0000644\0").unwrap(), 0o644);
        assert_eq!(number(b"  17 \0\0\0").unwrap(), 0o17);
        assert_eq!(number(b"\0\0\0\0").unwrap(), 0);
        assert_eq!(number(&[0x80, 0, 0, 1, 0]).unwrap(), 256);
        assert!(number(&[0xff, 0xff]).is_err());
        assert!(number(b"0009\0").is_err());
        assert!(number(&[0x80, 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn written_headers_check() {
        let h = ustar_header(b"a.txt", 5, b'0', 1_700_000_000);
        assert!(checksum_ok(&h).unwrap());
        assert_eq!(number(&h[124..136]).unwrap(), 5);
    }
}
