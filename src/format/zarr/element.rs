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
    bool => "bool", Bool,
);
