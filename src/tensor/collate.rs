//! Stacking a batch of elements into contiguous arrays: [`Collate`] (same shapes, tf.data's
//! `batch`), [`PaddedCollate`] (`padded_batch`) and [`RaggedCollate`] (`ragged_batch`).
//!
//! Elements are scalars (a 0-d tensor), `Vec<A>` of scalars (a 1-D tensor), `ndarray` arrays
//! of any dimension, and tuples of up to four of these. Tuple fields are tf.data's
//! *components*, numbered from 0 in order (nested tuples are flattened, as tf.data flattens
//! nested structures), so errors name the component like TensorFlow's messages do.
//!
//! Each element's data is copied exactly once, into the batch's buffer.

use bytes::Bytes;
use ndarray::{
    Array, Array1, Array2, ArrayD, ArrayView, ArrayView1, Axis, Dimension, Ix1, Ix2, IxDyn, Slice,
};

use super::{RaggedTensor, Tensor, Values};
use crate::Error;

/// A type batched as a 0-d tensor: numbers, `bool`, strings. A batch of them is an
/// [`Array1`]; a `Vec` of them is a 1-D tensor.
pub trait Scalar: Clone + Send + Sync + 'static {}

/// Element types that stack into a batch tensor with one more (leading) dimension, as
/// tf.data's `batch` does: `i64` -> `Array1<i64>`, `Vec<f32>` -> `Array2<f32>`,
/// `Array3<f32>` -> `Array4<f32>`, `(Array3<f32>, i64)` -> `(Array4<f32>, Array1<i64>)`.
///
/// Also [`Tensor`] (parsed features) -> `Tensor`. `Vec<A>` is a 1-D tensor when `A` is a
/// [`Scalar`]; a `Vec` of arrays or tuples is not a tensor (its length is data, not shape):
/// stack those with `collate` on the inner values, or pad them. Structs have no derive:
/// map them to tuples first.
///
/// Used by [`Dataset::collate`](crate::Dataset::collate); call [`Collate::collate`] directly
/// to stack a slice, e.g. inside `map_parallel` for very large batches.
///
/// ```
/// use ndarray::{Array3, Array4, array};
/// use streamload::tensor::Collate;
///
/// let items = vec![(Array3::<f32>::zeros((2, 2, 3)), 7i64), (Array3::ones((2, 2, 3)), 9)];
/// let (images, labels): (Array4<f32>, _) = Collate::collate(&items)?;
/// assert_eq!(images.shape(), [2, 2, 2, 3]);
/// assert_eq!(images[[1, 0, 0, 0]], 1.0);
/// assert_eq!(labels, array![7, 9]);
/// # anyhow::Ok(())
/// ```
///
/// Elements that differ in shape fail with tf.data's `batch` message word for word, shapes
/// printed as TensorFlow prints them (`Cannot batch tensors with different shapes in
/// component 0. First element had shape [2,3] and element 1 had shape [3,3].`); as a stage,
/// [`Dataset::collate`](crate::Dataset::collate) puts `collate: batch N: ` before it (where
/// TensorFlow puts its op after it, ` [Op:IteratorGetNext]`). The other messages of
/// `Collate`, [`PaddedCollate`] and [`RaggedCollate`] are the crate's own, for what
/// TensorFlow rules out before a batch is made (its element types and ranks are fixed by the
/// dataset's `element_spec`, and its batches are never empty): two [`Tensor`]s of different
/// types, elements of different ranks in `padded_batch`, an empty batch, and the shapes
/// `ragged_batch` cannot join.
///
/// ```
/// use ndarray::Array2;
/// use streamload::tensor::Collate;
///
/// // Shapes must agree; the error names the component, the element and both shapes.
/// let err = <Vec<i64>>::collate(&[vec![1, 2], vec![1, 2, 3]]).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "Cannot batch tensors with different shapes in component 0. \
///      First element had shape [2] and element 1 had shape [3]."
/// );
/// let err = <(i64, Array2<f32>)>::collate(&[(0, Array2::zeros((2, 3))), (1, Array2::zeros((3, 3)))])
///     .unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "Cannot batch tensors with different shapes in component 1. \
///      First element had shape [2,3] and element 1 had shape [3,3]."
/// );
/// ```
pub trait Collate: Sized {
    /// The stacked batch.
    type Batch;

    /// How many tensor components this type has (1, or the sum of a tuple's fields').
    const COMPONENTS: usize = 1;

    /// Stacks `items`, whose first component is numbered `component` in error messages.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when two elements of one component differ in shape, or
    /// `items` is empty for an array component (an empty batch has no shape).
    fn collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Self::Batch>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
        Self: 'a;

    /// Stacks a batch.
    ///
    /// # Errors
    ///
    /// As [`collate_components`](Collate::collate_components).
    fn collate(items: &[Self]) -> anyhow::Result<Self::Batch> {
        Self::collate_components(items.iter(), 0)
    }
}

/// A padded shape for one array component: one entry per dimension, `Some(n)` to pad that
/// dimension to `n`, `None` to pad it to the longest in the batch (tf.data's `padded_shapes`
/// entry, with `None` for its `None` / `-1`).
pub type PaddedShape = Vec<Option<usize>>;

/// Element types [`Dataset::padded_batch`](crate::Dataset::padded_batch) and
/// [`Dataset::bucket_by_sequence_length`](crate::Dataset::bucket_by_sequence_length) pad and
/// stack: every component is padded at the end of each dimension to a common shape.
///
/// ```
/// use ndarray::array;
/// use streamload::tensor::PaddedCollate;
///
/// let items = vec![(vec![1i64], 0i64), (vec![2, 2, 2], 1)];
/// let (ids, labels) = PaddedCollate::padded_collate(&items, None, Some(&(-1, 0)))?;
/// assert_eq!(ids, array![[1, -1, -1], [2, 2, 2]]);
/// assert_eq!(labels, array![0, 1]);
/// let (ids, _) = PaddedCollate::padded_collate(&items, Some(&(vec![Some(4)], ())), None)?;
/// assert_eq!(ids, array![[1, 0, 0, 0], [2, 2, 2, 0]]);
/// # anyhow::Ok(())
/// ```
pub trait PaddedCollate: Collate {
    /// The padded shapes: a [`PaddedShape`] per array or `Vec` component, `()` per scalar,
    /// tuples of these for tuples.
    type PaddedShapes: Clone + Send + Sync + 'static;
    /// The padding values: one value of the element type per component (tuples for tuples).
    type PaddingValues: Clone + Send + Sync + 'static;

    /// tf.data's default padding: `0`, `false`, the empty string (`Default::default()`).
    fn default_padding_values() -> Self::PaddingValues;

    /// Checks `shapes` against the rank every element of this type has (a `Vec` is 1-D, an
    /// array of a fixed dimension `D` has `D::NDIM` dimensions), as tf.data checks padded
    /// shapes against the element spec when the dataset is made. `padded_batch` and
    /// `bucket_by_sequence_length` call it when they are built. Types whose rank is known only
    /// per element (`ArrayD`) pass here and are checked batch by batch.
    ///
    /// ```
    /// use streamload::tensor::PaddedCollate;
    ///
    /// assert!(<Vec<i64>>::check_padded_shapes(&vec![Some(4)]).is_ok());
    /// assert_eq!(
    ///     <Vec<i64>>::check_padded_shapes(&vec![Some(3), Some(3)]).unwrap_err(),
    ///     "The padded shape (3, 3) is not compatible with the shape (None,) of the \
    ///      corresponding input component."
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// TensorFlow's message, when a padded shape has another rank than its component.
    fn check_padded_shapes(shapes: &Self::PaddedShapes) -> Result<(), String> {
        let _ = shapes;
        Ok(())
    }

    /// Pads and stacks `items`, whose first component is numbered `component`.
    ///
    /// Without `shapes`, every dimension is padded to the longest in the batch; `unknown`,
    /// when given, is the size of the dimensions left unknown instead (each `None` of
    /// `shapes`, or without `shapes` the first dimension: the sequence), which is how
    /// `bucket_by_sequence_length(pad_to_bucket_boundary)` pads to its bucket's boundary.
    ///
    /// # Errors
    ///
    /// [`Error::PaddingTooSmall`] when an element is longer than its padded shape;
    /// [`Error::InvalidArgument`] when ranks differ (between elements, or with `shapes`).
    fn padded_collate_components<'a, I>(
        items: I,
        shapes: Option<&Self::PaddedShapes>,
        values: &Self::PaddingValues,
        unknown: Option<usize>,
        component: usize,
    ) -> anyhow::Result<Self::Batch>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
        Self: 'a;

    /// Pads and stacks a batch, with `values` or the default padding values.
    ///
    /// # Errors
    ///
    /// As [`padded_collate_components`](PaddedCollate::padded_collate_components).
    fn padded_collate(
        items: &[Self],
        shapes: Option<&Self::PaddedShapes>,
        values: Option<&Self::PaddingValues>,
    ) -> anyhow::Result<Self::Batch> {
        let default;
        let values = match values {
            Some(v) => v,
            None => {
                default = Self::default_padding_values();
                &default
            }
        };
        Self::padded_collate_components(items.iter(), shapes, values, None, 0)
    }
}

/// Element types [`Dataset::ragged_batch`](crate::Dataset::ragged_batch) batches: `Vec`s and
/// arrays become a [`RaggedTensor`] (their first dimension may differ), scalars an [`Array1`].
///
/// ```
/// use streamload::tensor::RaggedCollate;
///
/// let batch = <Vec<i64>>::ragged_collate(&[vec![1], vec![3, 3, 3]])?;
/// assert_eq!(batch.row_splits(), [0, 1, 4]);
/// assert_eq!(batch.row(1).to_vec(), [3, 3, 3]);
/// # anyhow::Ok(())
/// ```
pub trait RaggedCollate: Collate {
    /// The batch: a [`RaggedTensor`] per `Vec` or array component, an [`Array1`] per scalar.
    type Ragged;

    /// Batches `items`, whose first component is numbered `component`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when elements differ in rank or in a dimension after the
    /// first, or are 0-d arrays.
    fn ragged_collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Self::Ragged>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
        Self: 'a;

    /// Batches a slice.
    ///
    /// # Errors
    ///
    /// As [`ragged_collate_components`](RaggedCollate::ragged_collate_components).
    fn ragged_collate(items: &[Self]) -> anyhow::Result<Self::Ragged> {
        Self::ragged_collate_components(items.iter(), 0)
    }
}

// ---------------------------------------------------------------------------------------------
// Scalars.
// ---------------------------------------------------------------------------------------------

macro_rules! scalars {
    ($($t:ty),* $(,)?) => {$(
        impl Scalar for $t {}

        impl Collate for $t {
            type Batch = Array1<$t>;

            fn collate_components<'a, I>(items: I, _component: usize) -> anyhow::Result<Array1<$t>>
            where
                I: ExactSizeIterator<Item = &'a Self> + Clone,
            {
                Ok(items.cloned().collect())
            }
        }

        impl PaddedCollate for $t {
            type PaddedShapes = ();
            type PaddingValues = $t;

            fn default_padding_values() -> $t {
                <$t>::default()
            }

            fn padded_collate_components<'a, I>(
                items: I,
                _shapes: Option<&()>,
                _values: &$t,
                _unknown: Option<usize>,
                component: usize,
            ) -> anyhow::Result<Array1<$t>>
            where
                I: ExactSizeIterator<Item = &'a Self> + Clone,
            {
                Self::collate_components(items, component)
            }
        }

        impl RaggedCollate for $t {
            type Ragged = Array1<$t>;

            fn ragged_collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Array1<$t>>
            where
                I: ExactSizeIterator<Item = &'a Self> + Clone,
            {
                Self::collate_components(items, component)
            }
        }
    )*};
}

scalars!(
    bool, u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, String, Bytes
);

// ---------------------------------------------------------------------------------------------
// Vec<A>: a 1-D tensor.
// ---------------------------------------------------------------------------------------------

fn vec_views<'a, A: 'a>(
    items: impl ExactSizeIterator<Item = &'a Vec<A>> + Clone,
) -> impl ExactSizeIterator<Item = ArrayView1<'a, A>> + Clone {
    items.map(|v| ArrayView1::from(v.as_slice()))
}

impl<A: Scalar> Collate for Vec<A> {
    type Batch = Array2<A>;

    fn collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Array2<A>>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
    {
        stack::<A, Ix1, Ix2>(vec_views(items), component)
    }
}

impl<A: Scalar + Default> PaddedCollate for Vec<A> {
    type PaddedShapes = PaddedShape;
    type PaddingValues = A;

    fn default_padding_values() -> A {
        A::default()
    }

    fn check_padded_shapes(shapes: &PaddedShape) -> Result<(), String> {
        check_rank(shapes, 1)
    }

    fn padded_collate_components<'a, I>(
        items: I,
        shapes: Option<&PaddedShape>,
        values: &A,
        unknown: Option<usize>,
        component: usize,
    ) -> anyhow::Result<Array2<A>>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
    {
        pad::<A, Ix1, Ix2>(vec_views(items), shapes, values, unknown, component)
    }
}

impl<A: Scalar> RaggedCollate for Vec<A> {
    type Ragged = RaggedTensor<A, Ix1>;

    fn ragged_collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Self::Ragged>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
    {
        ragged(vec_views(items), component)
    }
}

// ---------------------------------------------------------------------------------------------
// ndarray arrays of any dimension.
// ---------------------------------------------------------------------------------------------

impl<A: Clone, D: Dimension> Collate for Array<A, D> {
    type Batch = Array<A, D::Larger>;

    fn collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Self::Batch>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
        Self: 'a,
    {
        stack::<A, D, D::Larger>(items.map(|a| a.view()), component)
    }
}

impl<A, D> PaddedCollate for Array<A, D>
where
    A: Clone + Default + Send + Sync + 'static,
    D: Dimension,
{
    type PaddedShapes = PaddedShape;
    type PaddingValues = A;

    fn default_padding_values() -> A {
        A::default()
    }

    fn check_padded_shapes(shapes: &PaddedShape) -> Result<(), String> {
        D::NDIM.map_or(Ok(()), |rank| check_rank(shapes, rank))
    }

    fn padded_collate_components<'a, I>(
        items: I,
        shapes: Option<&PaddedShape>,
        values: &A,
        unknown: Option<usize>,
        component: usize,
    ) -> anyhow::Result<Self::Batch>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
        Self: 'a,
    {
        pad::<A, D, D::Larger>(items.map(|a| a.view()), shapes, values, unknown, component)
    }
}

impl<A: Clone, D: Dimension> RaggedCollate for Array<A, D> {
    type Ragged = RaggedTensor<A, D>;

    fn ragged_collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Self::Ragged>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
        Self: 'a,
    {
        ragged(items.map(|a| a.view()), component)
    }
}

// ---------------------------------------------------------------------------------------------
// The dynamic tensors parsers yield.
// ---------------------------------------------------------------------------------------------

/// A [`Tensor`] (as `parse_single_example` yields) stacks into a `Tensor` of one more
/// dimension; the elements must agree in data type and shape.
impl Collate for Tensor {
    type Batch = Tensor;

    fn collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Tensor>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
    {
        let n = items.len();
        let mut rest = items.clone().enumerate();
        let Some((_, first)) = rest.next() else {
            return Err(empty_batch(component));
        };
        for (i, t) in rest {
            if t.dtype() != first.dtype() {
                return Err(Error::InvalidArgument(format!(
                    "Cannot batch tensors of different types in component {component}. \
                     First element had type {} and element {i} had type {}.",
                    first.dtype(),
                    t.dtype()
                ))
                .into());
            }
            if t.shape() != first.shape() {
                return Err(different_shapes(component, first.shape(), i, t.shape()));
            }
        }
        let mut values = Values::with_capacity(first.dtype(), n * first.values().len());
        for t in items {
            values.extend_from(t.values());
        }
        Tensor::new(batch_shape(n, first.shape()), values)
    }
}

// ---------------------------------------------------------------------------------------------
// Tuples: one component per field.
// ---------------------------------------------------------------------------------------------

macro_rules! tuples {
    ($( ($($name:ident . $idx:tt),+) )*) => {$(
        impl<$($name: Collate),+> Collate for ($($name,)+) {
            type Batch = ($($name::Batch,)+);
            const COMPONENTS: usize = 0 $(+ $name::COMPONENTS)+;

            #[allow(unused_assignments)] // the last field's offset is not read again
            fn collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Self::Batch>
            where
                I: ExactSizeIterator<Item = &'a Self> + Clone,
                Self: 'a,
            {
                let mut next = component;
                Ok(($({
                    let c = next;
                    next += $name::COMPONENTS;
                    $name::collate_components(items.clone().map(|t| &t.$idx), c)?
                },)+))
            }
        }

        impl<$($name: PaddedCollate),+> PaddedCollate for ($($name,)+) {
            type PaddedShapes = ($($name::PaddedShapes,)+);
            type PaddingValues = ($($name::PaddingValues,)+);

            fn default_padding_values() -> Self::PaddingValues {
                ($($name::default_padding_values(),)+)
            }

            fn check_padded_shapes(shapes: &Self::PaddedShapes) -> Result<(), String> {
                $($name::check_padded_shapes(&shapes.$idx)?;)+
                Ok(())
            }

            #[allow(unused_assignments)] // the last field's offset is not read again
            fn padded_collate_components<'a, I>(
                items: I,
                shapes: Option<&Self::PaddedShapes>,
                values: &Self::PaddingValues,
                unknown: Option<usize>,
                component: usize,
            ) -> anyhow::Result<Self::Batch>
            where
                I: ExactSizeIterator<Item = &'a Self> + Clone,
                Self: 'a,
            {
                let mut next = component;
                Ok(($({
                    let c = next;
                    next += $name::COMPONENTS;
                    $name::padded_collate_components(
                        items.clone().map(|t| &t.$idx),
                        shapes.map(|s| &s.$idx),
                        &values.$idx,
                        unknown,
                        c,
                    )?
                },)+))
            }
        }

        impl<$($name: RaggedCollate),+> RaggedCollate for ($($name,)+) {
            type Ragged = ($($name::Ragged,)+);

            #[allow(unused_assignments)] // the last field's offset is not read again
            fn ragged_collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<Self::Ragged>
            where
                I: ExactSizeIterator<Item = &'a Self> + Clone,
                Self: 'a,
            {
                let mut next = component;
                Ok(($({
                    let c = next;
                    next += $name::COMPONENTS;
                    $name::ragged_collate_components(items.clone().map(|t| &t.$idx), c)?
                },)+))
            }
        }
    )*};
}

tuples! {
    (T0.0)
    (T0.0, T1.1)
    (T0.0, T1.1, T2.2)
    (T0.0, T1.1, T2.2, T3.3)
}

// ---------------------------------------------------------------------------------------------
// The copies.
// ---------------------------------------------------------------------------------------------

/// tf.data's `batch` error for elements that differ in shape, word for word, with shapes as
/// TensorFlow's `TensorShape::DebugString` prints them: `[2,3]`, `[]` for a scalar.
fn different_shapes(component: usize, first: &[usize], i: usize, shape: &[usize]) -> anyhow::Error {
    Error::InvalidArgument(format!(
        "Cannot batch tensors with different shapes in component {component}. \
         First element had shape {} and element {i} had shape {}.",
        tf_shape(first),
        tf_shape(shape)
    ))
    .into()
}

/// A shape as TensorFlow's `TensorShape::DebugString`: `[2,3]` (no spaces).
fn tf_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    format!("[{}]", dims.join(","))
}

fn empty_batch(component: usize) -> anyhow::Error {
    Error::InvalidArgument(format!(
        "cannot batch an empty list of tensors (component {component}): an empty batch has no shape"
    ))
    .into()
}

/// `[n, shape...]`.
fn batch_shape(n: usize, shape: &[usize]) -> Vec<usize> {
    let mut full = Vec::with_capacity(shape.len() + 1);
    full.push(n);
    full.extend_from_slice(shape);
    full
}

fn into_dim<A, E: Dimension>(array: ArrayD<A>) -> anyhow::Result<Array<A, E>> {
    Ok(array.into_dimensionality::<E>()?)
}

/// Appends a view's elements in logical (row-major) order.
fn extend_from_view<A: Clone, D: Dimension>(data: &mut Vec<A>, view: &ArrayView<'_, A, D>) {
    match view.as_slice() {
        Some(s) => data.extend_from_slice(s),
        None => data.extend(view.iter().cloned()),
    }
}

/// Stacks equally shaped views into one array with a leading batch dimension.
fn stack<'a, A, D, E>(
    views: impl ExactSizeIterator<Item = ArrayView<'a, A, D>> + Clone,
    component: usize,
) -> anyhow::Result<Array<A, E>>
where
    A: Clone + 'a,
    D: Dimension,
    E: Dimension,
{
    let n = views.len();
    let mut rest = views.clone().enumerate();
    let Some((_, first)) = rest.next() else {
        return Err(empty_batch(component));
    };
    for (i, v) in rest {
        if v.shape() != first.shape() {
            return Err(different_shapes(component, first.shape(), i, v.shape()));
        }
    }
    let mut data = Vec::with_capacity(n * first.len());
    for v in views {
        extend_from_view(&mut data, &v);
    }
    into_dim(ArrayD::from_shape_vec(
        IxDyn(&batch_shape(n, first.shape())),
        data,
    )?)
}

/// Pads views at the end of each dimension to a common shape and stacks them.
fn pad<'a, A, D, E>(
    views: impl ExactSizeIterator<Item = ArrayView<'a, A, D>> + Clone,
    shape: Option<&PaddedShape>,
    value: &A,
    unknown: Option<usize>,
    component: usize,
) -> anyhow::Result<Array<A, E>>
where
    A: Clone + 'a,
    D: Dimension,
    E: Dimension,
{
    let n = views.len();
    let Some(first) = views.clone().next() else {
        return Err(empty_batch(component));
    };
    let rank = first.ndim();
    let mut longest = vec![0usize; rank];
    for (i, v) in views.clone().enumerate() {
        if v.ndim() != rank {
            return Err(Error::InvalidArgument(format!(
                "cannot pad tensors of different ranks in component {component}: \
                 element 0 has shape {:?} and element {i} has shape {:?}",
                first.shape(),
                v.shape()
            ))
            .into());
        }
        for (l, &d) in longest.iter_mut().zip(v.shape()) {
            *l = (*l).max(d);
        }
    }
    if let Some(s) = shape
        && s.len() != rank
    {
        return Err(Error::InvalidArgument(format!(
            "the padded shape {} of component {component} has {} dimensions, but its \
             elements have {rank} (shape {:?})",
            show_padded(s),
            s.len(),
            first.shape()
        ))
        .into());
    }
    let target: Vec<usize> = (0..rank)
        .map(|d| match shape {
            Some(s) => s[d].or(unknown).unwrap_or(longest[d]),
            None if d == 0 => unknown.unwrap_or(longest[0]),
            None => longest[d],
        })
        .collect();
    for (i, v) in views.clone().enumerate() {
        if v.shape().iter().zip(&target).any(|(d, t)| d > t) {
            return Err(Error::PaddingTooSmall {
                component,
                element: i,
                shape: v.shape().to_vec(),
                padded: target,
            }
            .into());
        }
    }
    let full = batch_shape(n, &target);
    if rank == 1 {
        // The common case (token ids): one pass, each value written once.
        let width = target[0];
        let mut data = Vec::with_capacity(n * width);
        for v in views {
            extend_from_view(&mut data, &v);
            data.extend(std::iter::repeat_n(value.clone(), width - v.len()));
        }
        return into_dim(ArrayD::from_shape_vec(IxDyn(&full), data)?);
    }
    let mut out = ArrayD::from_elem(IxDyn(&full), value.clone());
    for (i, v) in views.enumerate() {
        let mut row = out.index_axis_mut(Axis(0), i);
        let mut region = row.slice_each_axis_mut(|ax| Slice::from(0..v.shape()[ax.axis.index()]));
        region.assign(&v.into_dyn());
    }
    into_dim(out)
}

/// `[3, None]`, as TensorFlow shows a partially known shape.
/// TensorFlow's construction-time check of a padded shape's rank, with its message (shapes
/// printed as Python tuples).
fn check_rank(shape: &[Option<usize>], rank: usize) -> Result<(), String> {
    if shape.len() == rank {
        return Ok(());
    }
    let tuple = |dims: Vec<String>| match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let padded = tuple(
        shape
            .iter()
            .map(|d| d.map_or_else(|| "None".to_string(), |d| d.to_string()))
            .collect(),
    );
    let element = tuple(vec!["None".to_string(); rank]);
    Err(format!(
        "The padded shape {padded} is not compatible with the shape {element} of the \
         corresponding input component."
    ))
}

fn show_padded(s: &[Option<usize>]) -> String {
    let dims: Vec<String> = s
        .iter()
        .map(|d| d.map_or_else(|| "None".to_string(), |d| d.to_string()))
        .collect();
    format!("[{}]", dims.join(", "))
}

/// Concatenates views along their first dimension, recording where each starts.
fn ragged<'a, A, D>(
    views: impl ExactSizeIterator<Item = ArrayView<'a, A, D>> + Clone,
    component: usize,
) -> anyhow::Result<RaggedTensor<A, D>>
where
    A: Clone + 'a,
    D: Dimension,
{
    let Some(first) = views.clone().next() else {
        return Err(empty_batch(component));
    };
    if first.ndim() == 0 {
        return Err(Error::InvalidArgument(format!(
            "ragged_batch: component {component} holds 0-d arrays, which have no dimension to be ragged in"
        ))
        .into());
    }
    let inner = &first.shape()[1..];
    let mut row_splits = Vec::with_capacity(views.len() + 1);
    row_splits.push(0i64);
    let mut rows = 0usize;
    for (i, v) in views.clone().enumerate() {
        if v.ndim() != first.ndim() || &v.shape()[1..] != inner {
            return Err(Error::InvalidArgument(format!(
                "ragged_batch: only the first dimension may differ in component {component}: \
                 element 0 has shape {:?} and element {i} has shape {:?}",
                first.shape(),
                v.shape()
            ))
            .into());
        }
        rows += v.shape()[0];
        row_splits.push(rows as i64);
    }
    let mut data = Vec::with_capacity(rows * inner.iter().product::<usize>());
    for v in views {
        extend_from_view(&mut data, &v);
    }
    let values = into_dim(ArrayD::from_shape_vec(
        IxDyn(&batch_shape(rows, inner)),
        data,
    )?)?;
    RaggedTensor::new(values, row_splits)
}
