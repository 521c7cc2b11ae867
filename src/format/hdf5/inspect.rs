//! What an HDF5 file holds: [`inspect`], its groups and datasets with their attributes (h5py's
//! `visititems` and `attrs`), to find the paths to read and the metadata stored beside them.

use std::collections::{BTreeMap, HashSet};

use hdf5_reader::group::Group;
use hdf5_reader::{Attribute, Datatype};

use super::{STAGE, element, open_hdf5};
use crate::runtime;
use crate::storage::{self, Location};

/// The groups and datasets of an HDF5 file, each with its attributes, by path (`/`, then
/// `/scenes`, `/scenes/points`, ...), in name order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Hdf5Contents {
    /// Every group, the root (`/`) first.
    pub groups: Vec<GroupInfo>,
    /// Every dataset.
    pub datasets: Vec<DatasetInfo>,
}

/// A group: its path and attributes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GroupInfo {
    /// Its path, `/` for the root.
    pub path: String,
    /// Its attributes by name.
    pub attributes: BTreeMap<String, AttributeValue>,
}

/// A dataset: its path, shape, element type, chunk shape and attributes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DatasetInfo {
    /// Its path, such as `/scenes/points`.
    pub path: String,
    /// Its shape (rows first).
    pub shape: Vec<u64>,
    /// Its element type, as errors name it: `int16`, `float32`, `fixed-length string(8)`,
    /// `compound {x, y}`, ...
    pub dtype: String,
    /// Its chunk shape, for a chunked dataset.
    pub chunks: Option<Vec<u64>>,
    /// Its attributes by name.
    pub attributes: BTreeMap<String, AttributeValue>,
}

/// An attribute's values, flattened (a scalar is one value).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AttributeValue {
    /// Signed integers of any width.
    Integers(Vec<i64>),
    /// Unsigned integers of any width.
    Unsigned(Vec<u64>),
    /// `float32` or `float64` values.
    Floats(Vec<f64>),
    /// Strings, fixed or variable length.
    Strings(Vec<String>),
    /// Another type (compound, enum, reference, ...), named as [`DatasetInfo::dtype`] names
    /// types.
    Unsupported(String),
}

/// The groups and datasets of the HDF5 file at `file` (a local path or a URL), with their
/// attributes: its superblock, object headers and group indexes are read, none of the data.
///
/// ```
/// use streamload::format::hdf5::{AttributeValue, inspect};
///
/// # tokio_test::block_on(async {
/// let contents = inspect("tests/data/hdf5/scenes-0.h5").await?;
/// let points = contents.datasets.iter().find(|d| d.path == "/scenes/points").unwrap();
/// assert_eq!(points.shape, [50, 16, 3]);
/// assert_eq!(points.dtype, "float32");
/// assert_eq!(points.chunks, Some(vec![8, 16, 3]));
/// let scenes = contents.groups.iter().find(|g| g.path == "/scenes").unwrap();
/// assert_eq!(scenes.attributes["source"], AttributeValue::Strings(vec!["run 0".into()]));
/// # anyhow::Ok(()) }).unwrap();
/// ```
///
/// # Errors
///
/// A file that cannot be read or is not HDF5, or whose groups are damaged, naming it.
pub async fn inspect(file: impl Into<Location>) -> anyhow::Result<Hdf5Contents> {
    let location = file.into();
    let identity = storage::identity(&location).await?;
    let handle = tokio::runtime::Handle::current();
    let task = runtime::spawn_blocking(STAGE, move || {
        let file = open_hdf5(&location, identity, handle)?;
        let root = file
            .root_group()
            .map_err(|e| anyhow::anyhow!("{location}: its root group cannot be read: {e}"))?;
        let mut contents = Hdf5Contents {
            groups: Vec::new(),
            datasets: Vec::new(),
        };
        let mut seen = HashSet::new();
        walk(&root, "/", &mut contents, &mut seen)
            .map_err(|e| anyhow::anyhow!("{location}: {e}"))?;
        Ok(contents)
    })?;
    task.await.map_err(|e| runtime::join_error(STAGE, e))?
}

/// Groups deeper than this are not listed (a damaged file's links could go on forever).
const MAX_DEPTH: usize = 64;

fn walk(
    group: &Group,
    path: &str,
    contents: &mut Hdf5Contents,
    seen: &mut HashSet<u64>,
) -> Result<(), String> {
    if !seen.insert(group.address()) || path.matches('/').count() > MAX_DEPTH {
        return Ok(());
    }
    let attributes = group
        .attributes()
        .map_err(|e| format!("group `{path}`: its attributes cannot be read: {e}"))?;
    contents.groups.push(GroupInfo {
        path: path.to_string(),
        attributes: values(&attributes),
    });
    let (mut groups, mut datasets) = group
        .member_names()
        .map_err(|e| format!("group `{path}`: its members cannot be read: {e}"))?;
    groups.sort();
    datasets.sort();
    let child = |name: &str| match path {
        "/" => format!("/{name}"),
        _ => format!("{path}/{name}"),
    };
    for name in datasets {
        let at = child(&name);
        let dataset = group
            .dataset(&name)
            .map_err(|e| format!("dataset `{at}` cannot be read: {e}"))?;
        contents.datasets.push(DatasetInfo {
            shape: dataset.shape().to_vec(),
            dtype: element::describe(dataset.dtype()),
            chunks: dataset
                .chunks()
                .map(|c| c.into_iter().map(u64::from).collect()),
            attributes: values(&dataset.attributes()),
            path: at,
        });
    }
    for name in groups {
        let at = child(&name);
        let sub = group
            .group(&name)
            .map_err(|e| format!("group `{at}` cannot be read: {e}"))?;
        walk(&sub, &at, contents, seen)?;
    }
    Ok(())
}

fn values(attributes: &[Attribute]) -> BTreeMap<String, AttributeValue> {
    attributes
        .iter()
        .map(|a| (a.name.clone(), value(a)))
        .collect()
}

fn value(attribute: &Attribute) -> AttributeValue {
    let unsupported = || AttributeValue::Unsupported(element::describe(&attribute.datatype));
    macro_rules! widen {
        ($ty:ty, $variant:ident, $wide:ty) => {
            attribute
                .read_1d::<$ty>()
                .map(|v| AttributeValue::$variant(v.into_iter().map(<$wide>::from).collect()))
                .unwrap_or_else(|_| unsupported())
        };
    }
    match &attribute.datatype {
        Datatype::FixedPoint { size, signed, .. } => match (size, signed) {
            (1, true) => widen!(i8, Integers, i64),
            (2, true) => widen!(i16, Integers, i64),
            (4, true) => widen!(i32, Integers, i64),
            (8, true) => widen!(i64, Integers, i64),
            (1, false) => widen!(u8, Unsigned, u64),
            (2, false) => widen!(u16, Unsigned, u64),
            (4, false) => widen!(u32, Unsigned, u64),
            (8, false) => widen!(u64, Unsigned, u64),
            _ => unsupported(),
        },
        Datatype::FloatingPoint { size: 4, .. } => widen!(f32, Floats, f64),
        Datatype::FloatingPoint { size: 8, .. } => widen!(f64, Floats, f64),
        Datatype::String { .. } | Datatype::VarLen { .. } => attribute
            .read_strings()
            .map(AttributeValue::Strings)
            .unwrap_or_else(|_| unsupported()),
        _ => unsupported(),
    }
}
