//! The types a Zarr array's elements are read as ([`Element`]).

use zarrs::array::DataType;

/// A type the elements of a Zarr array are read as: `i8` to `i64`, `u8` to `u64`,
/// `half::f16`, `f32`, `f64` and `bool`, each only from an array of that data type (in
/// either byte order: Zarr v2's `>i4`, v3's `bytes` codec with `endian: big`).
///
/// There is no conversion: an array of another type is an error naming its type, as
/// reading `int16` data as `f32` with zarr-python's `astype` would be a choice to make in a
/// `map`.
pub trait Element: private::Read + Clone + Send + Sync + std::fmt::Debug + 'static {}

pub(crate) mod private {
    use super::DataType;

    /// How an [`Element`](super::Element) is read (sealed: implemented here only).
    pub trait Read: zarrs::array::ElementOwned + Sized + Send + Sync + 'static {
        /// What the type is called in errors.
        const NAME: &'static str;
        /// Whether data of `dtype` reads as this type.
        fn accepts(dtype: &DataType) -> bool;
        /// `n` zeros, for a type of which any bytes are a value (not `bool`), asked of the
        /// allocator zeroed (fresh pages are not written again).
        fn zeroed(n: usize) -> Option<Vec<Self>>;
        /// The bytes of `values` (of a type [`zeroed`](Self::zeroed) makes).
        fn as_bytes_mut(values: &mut [Self]) -> &mut [u8];
    }
}

macro_rules! elements {
    ($($ty:ty => $name:literal, $variant:ident),* $(,)?) => {$(
        impl Element for $ty {}
        impl private::Read for $ty {
            const NAME: &'static str = $name;
            fn accepts(dtype: &DataType) -> bool {
                matches!(dtype, DataType::$variant)
            }
            fn zeroed(n: usize) -> Option<Vec<Self>> {
                Some(bytemuck::zeroed_vec(n))
            }
            fn as_bytes_mut(values: &mut [Self]) -> &mut [u8] {
                bytemuck::cast_slice_mut(values)
            }
        }
    )*};
}

elements!(
    i8 => "i8", Int8,
    i16 => "i16", Int16,
    i32 => "i32", Int32,
    i64 => "i64", Int64,
    u8 => "u8", UInt8,
    u16 => "u16", UInt16,
    u32 => "u32", UInt32,
    u64 => "u64", UInt64,
    half::f16 => "f16", Float16,
    f32 => "f32", Float32,
    f64 => "f64", Float64,
);

impl Element for bool {}
impl private::Read for bool {
    const NAME: &'static str = "bool";
    fn accepts(dtype: &DataType) -> bool {
        matches!(dtype, DataType::Bool)
    }
    /// None: a byte that is not 0 or 1 is no `bool` (zarrs checks each).
    fn zeroed(_: usize) -> Option<Vec<Self>> {
        None
    }
    fn as_bytes_mut(_: &mut [Self]) -> &mut [u8] {
        &mut []
    }
}
