//! The types an HDF5 dataset's elements are read as ([`Element`]), and the LZF filter h5py
//! writes, which the reader does not have built in.

use hdf5_reader::error::{Error as H5Error, Result as H5Result};
use hdf5_reader::messages::datatype::{StringPadding, StringSize};
use hdf5_reader::{ByteOrder, Datatype, FilterRegistry, H5Type, SliceInfo};
use ndarray::ArrayD;

/// A type the elements of an HDF5 dataset (or of a compound dataset's field) are read as:
/// `i8` to `i64`, `u8` to `u64`, `half::f16`, `f32`, `f64` (each only from a dataset of that
/// class, width and signedness, in either byte order), and `String` (from fixed-length
/// strings, ASCII or UTF-8, their padding removed as h5py shows them, and from
/// variable-length strings, h5py's default for `str`; in a compound's field, fixed-length
/// only).
///
/// There is no conversion: a dataset of another type is an error naming its type, as
/// reading `int16` data as `f32` with h5py's `astype` would be a choice to make in a `map`.
pub trait Element: private::Read + Clone + Send + Sync + std::fmt::Debug + 'static {}

pub(crate) mod private {
    use super::*;

    /// How an [`Element`](super::Element) is read (sealed: implemented here only).
    pub trait Read: Sized + Send + 'static {
        /// What the type is called in errors.
        const NAME: &'static str;
        /// Whether data of `dtype` reads as this type.
        fn accepts(dtype: &Datatype) -> bool;
        /// The elements `selection` picks out of `dataset`.
        fn read(dataset: &hdf5_reader::Dataset, selection: &SliceInfo) -> H5Result<ArrayD<Self>>;
        /// One element from its bytes (a compound's field).
        fn decode(bytes: &[u8], dtype: &Datatype) -> H5Result<Self>;
        /// How whole elements of `dtype`, stored as bytes in its byte order, are appended to
        /// an array of this type (the fast path of `whole.rs`); `None` for a type not read
        /// from its bytes alone (strings).
        fn raw(dtype: &Datatype) -> Option<Raw<Self>> {
            let _ = dtype;
            None
        }
    }

    /// How elements stored as bytes are appended to an array.
    #[derive(Debug, Clone, Copy)]
    pub struct Raw<T> {
        /// Appends the elements stored one after the other as these bytes.
        pub plain: fn(&[u8], &mut Vec<T>),
        /// Appends the first `count` elements of a chunk whose bytes are shuffled (HDF5's
        /// shuffle filter: the first byte of every element, then the second, ...).
        pub shuffled: fn(&[u8], usize, &mut Vec<T>),
    }
}

/// A number made from its `N` bytes, in either byte order.
trait FromBytes<const N: usize>: Sized {
    fn from_le(bytes: [u8; N]) -> Self;
    fn from_be(bytes: [u8; N]) -> Self;
    /// From bytes in big-endian order if `BE`, else little-endian.
    #[inline(always)]
    fn from_order<const BE: bool>(bytes: [u8; N]) -> Self {
        if BE {
            Self::from_be(bytes)
        } else {
            Self::from_le(bytes)
        }
    }
}

/// [`Raw`](private::Raw) for the numbers of `dtype`'s byte order.
fn raw_numbers<T: FromBytes<N>, const N: usize>(dtype: &Datatype) -> Option<private::Raw<T>> {
    Some(match byte_order(dtype)? {
        ByteOrder::LittleEndian => private::Raw {
            plain: plain::<T, N, false>,
            shuffled: shuffled::<T, N, false>,
        },
        ByteOrder::BigEndian => private::Raw {
            plain: plain::<T, N, true>,
            shuffled: shuffled::<T, N, true>,
        },
    })
}

/// Appends the numbers stored one after the other as `bytes`.
fn plain<T: FromBytes<N>, const N: usize, const BE: bool>(bytes: &[u8], out: &mut Vec<T>) {
    out.extend(bytes.chunks_exact(N).map(|b| T::from_order::<BE>(array(b))));
}

/// Appends the first `count` numbers of `planes`, a chunk's bytes shuffled: its elements'
/// first bytes, then their second bytes, ... (`planes` holds `planes.len() / N` elements).
/// In blocks of 64 elements, each gathered on the stack from the `N` planes, then converted:
/// hdf5-reader's `unshuffle` writes one byte at a time, bounds-checked, into a buffer of its
/// own (16% of a core on W12 once the row copies were gone).
fn shuffled<T: FromBytes<N>, const N: usize, const BE: bool>(
    planes: &[u8],
    count: usize,
    out: &mut Vec<T>,
) {
    const BLOCK: usize = 64;
    let n = planes.len() / N;
    let count = count.min(n);
    let planes: [&[u8]; N] = std::array::from_fn(|b| &planes[b * n..b * n + count]);
    out.reserve(count);
    let mut block = [[0u8; N]; BLOCK];
    let mut start = 0;
    while start < count {
        let len = (count - start).min(BLOCK);
        for (b, plane) in planes.iter().enumerate() {
            for (element, &byte) in block[..len].iter_mut().zip(&plane[start..start + len]) {
                element[b] = byte;
            }
        }
        out.extend(block[..len].iter().map(|&bytes| T::from_order::<BE>(bytes)));
        start += len;
    }
}

/// The byte order of a number type.
fn byte_order(dtype: &Datatype) -> Option<ByteOrder> {
    match dtype {
        Datatype::FixedPoint { byte_order, .. } | Datatype::FloatingPoint { byte_order, .. } => {
            Some(*byte_order)
        }
        _ => None,
    }
}

/// The `N` bytes of one element (`bytes` is `N` long: a `chunks_exact(N)` item).
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut array = [0; N];
    array.copy_from_slice(bytes);
    array
}

macro_rules! numeric {
    ($($ty:ty => $name:literal, $pattern:pat),* $(,)?) => {$(
        impl Element for $ty {}
        impl private::Read for $ty {
            const NAME: &'static str = $name;
            fn accepts(dtype: &Datatype) -> bool {
                matches!(dtype, $pattern)
            }
            fn read(
                dataset: &hdf5_reader::Dataset,
                selection: &SliceInfo,
            ) -> H5Result<ArrayD<Self>> {
                dataset.read_slice::<$ty>(selection)
            }
            fn decode(bytes: &[u8], dtype: &Datatype) -> H5Result<Self> {
                <$ty as H5Type>::from_bytes(bytes, dtype)
            }
            fn raw(dtype: &Datatype) -> Option<private::Raw<Self>> {
                if !<Self as private::Read>::accepts(dtype) {
                    return None;
                }
                raw_numbers::<Self, { std::mem::size_of::<$ty>() }>(dtype)
            }
        }
        impl FromBytes<{ std::mem::size_of::<$ty>() }> for $ty {
            #[inline(always)]
            fn from_le(bytes: [u8; std::mem::size_of::<$ty>()]) -> Self {
                <$ty>::from_le_bytes(bytes)
            }
            #[inline(always)]
            fn from_be(bytes: [u8; std::mem::size_of::<$ty>()]) -> Self {
                <$ty>::from_be_bytes(bytes)
            }
        }
    )*};
}

numeric!(
    i8 => "i8", Datatype::FixedPoint { size: 1, signed: true, .. },
    i16 => "i16", Datatype::FixedPoint { size: 2, signed: true, .. },
    i32 => "i32", Datatype::FixedPoint { size: 4, signed: true, .. },
    i64 => "i64", Datatype::FixedPoint { size: 8, signed: true, .. },
    u8 => "u8", Datatype::FixedPoint { size: 1, signed: false, .. },
    u16 => "u16", Datatype::FixedPoint { size: 2, signed: false, .. },
    u32 => "u32", Datatype::FixedPoint { size: 4, signed: false, .. },
    u64 => "u64", Datatype::FixedPoint { size: 8, signed: false, .. },
    f32 => "f32", Datatype::FloatingPoint { size: 4, .. },
    f64 => "f64", Datatype::FloatingPoint { size: 8, .. },
);

/// A float16's bits, as the reader decodes them (it has no `f16` of its own).
#[derive(Debug, Clone, Copy)]
struct F16Bits(u16);

impl H5Type for F16Bits {
    fn hdf5_type() -> Datatype {
        Datatype::FloatingPoint {
            size: 2,
            byte_order: ByteOrder::LittleEndian,
        }
    }

    fn from_bytes(bytes: &[u8], dtype: &Datatype) -> H5Result<Self> {
        match (dtype, bytes) {
            (
                Datatype::FloatingPoint {
                    size: 2,
                    byte_order,
                },
                &[a, b, ..],
            ) => Ok(F16Bits(match byte_order {
                ByteOrder::LittleEndian => u16::from_le_bytes([a, b]),
                ByteOrder::BigEndian => u16::from_be_bytes([a, b]),
            })),
            _ => Err(H5Error::TypeMismatch {
                expected: "f16".into(),
                actual: format!("{dtype:?}"),
            }),
        }
    }

    fn element_size(_dtype: &Datatype) -> usize {
        2
    }
}

impl Element for half::f16 {}
impl private::Read for half::f16 {
    const NAME: &'static str = "f16";
    fn accepts(dtype: &Datatype) -> bool {
        matches!(dtype, Datatype::FloatingPoint { size: 2, .. })
    }
    fn read(dataset: &hdf5_reader::Dataset, selection: &SliceInfo) -> H5Result<ArrayD<Self>> {
        let bits = dataset.read_slice::<F16Bits>(selection)?;
        Ok(bits.mapv(|b| half::f16::from_bits(b.0)))
    }
    fn decode(bytes: &[u8], dtype: &Datatype) -> H5Result<Self> {
        F16Bits::from_bytes(bytes, dtype).map(|b| half::f16::from_bits(b.0))
    }
    fn raw(dtype: &Datatype) -> Option<private::Raw<Self>> {
        if !<Self as private::Read>::accepts(dtype) {
            return None;
        }
        raw_numbers::<Self, 2>(dtype)
    }
}

impl FromBytes<2> for half::f16 {
    #[inline(always)]
    fn from_le(bytes: [u8; 2]) -> Self {
        half::f16::from_bits(u16::from_le_bytes(bytes))
    }
    #[inline(always)]
    fn from_be(bytes: [u8; 2]) -> Self {
        half::f16::from_bits(u16::from_be_bytes(bytes))
    }
}

/// A fixed-length string, its padding removed.
#[derive(Debug, Clone)]
struct FixedString(String);

impl H5Type for FixedString {
    fn hdf5_type() -> Datatype {
        Datatype::String {
            size: StringSize::Fixed(1),
            encoding: hdf5_reader::messages::datatype::StringEncoding::Ascii,
            padding: StringPadding::NullPad,
        }
    }

    fn from_bytes(bytes: &[u8], dtype: &Datatype) -> H5Result<Self> {
        let Datatype::String {
            size: StringSize::Fixed(size),
            padding,
            ..
        } = dtype
        else {
            return Err(H5Error::TypeMismatch {
                expected: "a fixed-length string".into(),
                actual: format!("{dtype:?}"),
            });
        };
        let bytes = bytes.get(..*size as usize).unwrap_or(bytes);
        let text = match padding {
            // h5py shows null-padded and null-terminated strings up to the first NUL.
            StringPadding::NullPad | StringPadding::NullTerminate => {
                let end = memchr::memchr(0, bytes).unwrap_or(bytes.len());
                &bytes[..end]
            }
            StringPadding::SpacePad => {
                let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
                &bytes[..end]
            }
        };
        String::from_utf8(text.to_vec())
            .map(FixedString)
            .map_err(|e| H5Error::InvalidData(format!("a string that is not UTF-8: {e}")))
    }

    fn element_size(dtype: &Datatype) -> usize {
        match dtype {
            Datatype::String {
                size: StringSize::Fixed(size),
                ..
            } => *size as usize,
            _ => 0,
        }
    }
}

/// A variable-length string's reference into the file's global heap, as stored.
#[derive(Debug, Clone)]
struct VlenRef(Box<[u8]>);

impl H5Type for VlenRef {
    fn hdf5_type() -> Datatype {
        Datatype::String {
            size: StringSize::Variable,
            encoding: hdf5_reader::messages::datatype::StringEncoding::Utf8,
            padding: StringPadding::NullTerminate,
        }
    }

    fn from_bytes(bytes: &[u8], dtype: &Datatype) -> H5Result<Self> {
        if is_vlen_string(dtype) {
            Ok(VlenRef(bytes.into()))
        } else {
            Err(H5Error::TypeMismatch {
                expected: "a variable-length string".into(),
                actual: format!("{dtype:?}"),
            })
        }
    }

    fn element_size(_dtype: &Datatype) -> usize {
        // A reference: a length, a heap address (8 bytes in the files h5py writes), an index.
        16
    }
}

/// Whether `dtype` is a variable-length string (h5py's `str`).
fn is_vlen_string(dtype: &Datatype) -> bool {
    matches!(
        dtype,
        Datatype::String {
            size: StringSize::Variable,
            ..
        } | Datatype::VarLen {
            kind: hdf5_reader::messages::datatype::VarLenKind::String,
            ..
        }
    )
}

impl Element for String {}
impl private::Read for String {
    const NAME: &'static str = "String";
    fn accepts(dtype: &Datatype) -> bool {
        is_vlen_string(dtype)
            || matches!(
                dtype,
                Datatype::String {
                    size: StringSize::Fixed(_),
                    ..
                }
            )
    }
    fn read(dataset: &hdf5_reader::Dataset, selection: &SliceInfo) -> H5Result<ArrayD<Self>> {
        if !is_vlen_string(dataset.dtype()) {
            let strings = dataset.read_slice::<FixedString>(selection)?;
            return Ok(strings.mapv_into_any(|s| s.0));
        }
        // Each element a reference into the global heap, resolved one by one.
        let refs = dataset.read_slice::<VlenRef>(selection)?;
        let shape = refs.shape().to_vec();
        let strings = refs
            .iter()
            .map(|r| {
                let mut bytes = dataset.resolve_vlen_reference_bytes(&r.0, 1)?;
                if let Some(end) = memchr::memchr(0, &bytes) {
                    bytes.truncate(end);
                }
                String::from_utf8(bytes)
                    .map_err(|e| H5Error::InvalidData(format!("a string that is not UTF-8: {e}")))
            })
            .collect::<H5Result<Vec<String>>>()?;
        ArrayD::from_shape_vec(shape, strings).map_err(|e| H5Error::InvalidData(e.to_string()))
    }
    fn decode(bytes: &[u8], dtype: &Datatype) -> H5Result<Self> {
        FixedString::from_bytes(bytes, dtype).map(|s| s.0)
    }
}

/// A compound element's bytes, for its fields to be decoded from.
#[derive(Debug, Clone)]
pub(crate) struct Record(pub(crate) Box<[u8]>);

impl H5Type for Record {
    fn hdf5_type() -> Datatype {
        Datatype::Compound {
            size: 0,
            fields: Vec::new(),
        }
    }

    fn from_bytes(bytes: &[u8], dtype: &Datatype) -> H5Result<Self> {
        match dtype {
            Datatype::Compound { .. } => Ok(Record(bytes.into())),
            _ => Err(H5Error::TypeMismatch {
                expected: "a compound type".into(),
                actual: format!("{dtype:?}"),
            }),
        }
    }

    fn element_size(dtype: &Datatype) -> usize {
        match dtype {
            Datatype::Compound { size, .. } => *size as usize,
            _ => 0,
        }
    }
}

/// The size in bytes of an element of `dtype`, for the types a field can be read as.
pub(crate) fn size_of(dtype: &Datatype) -> Option<usize> {
    match dtype {
        Datatype::FixedPoint { size, .. } | Datatype::FloatingPoint { size, .. } => {
            Some(usize::from(*size))
        }
        Datatype::String {
            size: StringSize::Fixed(size),
            ..
        } => Some(*size as usize),
        Datatype::Compound { size, .. } => Some(*size as usize),
        _ => None,
    }
}

/// A short name for `dtype` in errors: `int16`, `float32`, `string(8)`, `compound {x, y}`.
pub(crate) fn describe(dtype: &Datatype) -> String {
    match dtype {
        Datatype::FixedPoint { size, signed, .. } => {
            format!(
                "{}int{}",
                if *signed { "" } else { "u" },
                u32::from(*size) * 8
            )
        }
        Datatype::FloatingPoint { size, .. } => format!("float{}", u32::from(*size) * 8),
        Datatype::String {
            size: StringSize::Fixed(size),
            ..
        } => format!("fixed-length string({size})"),
        Datatype::String { .. } => "variable-length string".into(),
        Datatype::Compound { fields, .. } => {
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            format!("compound {{{}}}", names.join(", "))
        }
        Datatype::VarLen { .. } => "variable-length".into(),
        other => format!("{other:?}"),
    }
}

/// h5py's LZF filter (id 32000): the reader's filters plus this one.
pub(crate) fn filters() -> FilterRegistry {
    let mut registry = FilterRegistry::new();
    registry.register(
        LZF,
        Box::new(|filter, data, _element_size| {
            // h5py's `lzf_filter.c` stores the chunk's size in bytes as the third value.
            let size = filter.client_data.get(2).copied().unwrap_or(0) as usize;
            let size = if size == 0 { data.len() * 4 } else { size };
            lzf::decompress(data, size)
                .map_err(|e| H5Error::InvalidData(format!("LZF filter: {e:?}")))
        }),
    );
    registry
}

/// The LZF filter's registered id.
const LZF: u16 = 32000;

#[cfg(test)]
mod tests {
    use super::private::Read;
    use super::*;

    /// `raw` appends the values `decode` reads one by one, in either byte order, from
    /// plain bytes and from the same bytes shuffled, all of them or the first few (compared
    /// as printed: a NaN is one too).
    fn same_as_decode<T: Read + std::fmt::Debug>(dtype: &Datatype, bytes: &[u8]) {
        let raw = T::raw(dtype).expect("read from bytes");
        let size = size_of(dtype).unwrap();
        let want: Vec<T> = bytes
            .chunks_exact(size)
            .map(|b| T::decode(b, dtype).unwrap())
            .collect();
        let want = format!("{want:?}");
        let mut got = vec![];
        (raw.plain)(bytes, &mut got);
        assert_eq!(format!("{got:?}"), want, "{dtype:?}");
        let n = bytes.len() / size;
        let planes: Vec<u8> = (0..size)
            .flat_map(|b| (0..n).map(move |e| bytes[e * size + b]))
            .collect();
        for count in [n, n - 1, 1, 0] {
            let mut got = vec![];
            (raw.shuffled)(&planes, count, &mut got);
            let mut plain = vec![];
            (raw.plain)(&bytes[..count * size], &mut plain);
            assert_eq!(
                format!("{got:?}"),
                format!("{plain:?}"),
                "{dtype:?}: {count}"
            );
        }
    }

    #[test]
    fn numbers_append_from_their_bytes_in_either_byte_order() {
        // 200 elements of one byte to 25 of eight: more than one block of 64 when shuffled.
        let bytes: Vec<u8> = (0u8..200).map(|b| b.wrapping_mul(37)).collect();
        for byte_order in [ByteOrder::LittleEndian, ByteOrder::BigEndian] {
            let int = |size, signed| Datatype::FixedPoint {
                size,
                signed,
                byte_order,
            };
            let float = |size| Datatype::FloatingPoint { size, byte_order };
            same_as_decode::<i8>(&int(1, true), &bytes);
            same_as_decode::<u16>(&int(2, false), &bytes);
            same_as_decode::<i32>(&int(4, true), &bytes);
            same_as_decode::<u64>(&int(8, false), &bytes);
            same_as_decode::<f32>(&float(4), &bytes);
            same_as_decode::<f64>(&float(8), &bytes);
            same_as_decode::<half::f16>(&float(2), &bytes);
        }
        // The value, not just the decode: 1.5 as big-endian float32, float16 1.0.
        let be = Datatype::FloatingPoint {
            size: 4,
            byte_order: ByteOrder::BigEndian,
        };
        let mut got = vec![];
        (f32::raw(&be).unwrap().plain)(&1.5f32.to_be_bytes(), &mut got);
        assert_eq!(got, [1.5]);
        let le16 = Datatype::FloatingPoint {
            size: 2,
            byte_order: ByteOrder::LittleEndian,
        };
        let mut got = vec![];
        (half::f16::raw(&le16).unwrap().plain)(&[0x00, 0x3c], &mut got);
        assert_eq!(got, [half::f16::ONE]);
        // Another type, or strings: not read this way.
        assert!(f32::raw(&le16).is_none());
        assert!(String::raw(&le16).is_none());
    }
}
