//! Splitting a batch into its rows: [`Unbatch`], what
//! [`Dataset::unbatch`](crate::Dataset::unbatch) and [`Dataset::rebatch`](crate::Dataset::rebatch)
//! do to each element. The inverse of [`Collate`](super::Collate) and of the padded and ragged
//! batches: a row is the batch's slice along its first dimension, as in tf.data.

use bytes::Bytes;
use ndarray::{Array, Array1, ArrayD, Dimension, Ix2, Ix3, Ix4, Ix5, Ix6};

use super::{RaggedTensor, Tensor, Values};
use crate::Error;

/// Batches that split into rows along their first dimension (tf.data's `unbatch`): what
/// [`Dataset::unbatch`](crate::Dataset::unbatch) and [`Dataset::rebatch`](crate::Dataset::rebatch)
/// take.
///
/// - `Vec<T>` and `[T; N]` (what [`batch`](crate::Dataset::batch) makes): their items.
/// - `ndarray` arrays (what [`collate`](crate::Dataset::collate) and
///   [`padded_batch`](crate::Dataset::padded_batch) make): `Array1<A>` splits into `A`s,
///   `Array2<A>` into `Array1<A>`s, ... up to `Array6`; `ArrayD<A>` into `ArrayD<A>`s of one
///   dimension less.
/// - [`Tensor`]: tensors of one dimension less; [`RaggedTensor`] (what
///   [`ragged_batch`](crate::Dataset::ragged_batch) makes): its rows, as arrays.
/// - Tuples of up to four of these: rows of each component, zipped. Every component must
///   have the same number of rows.
///
/// ```
/// use ndarray::{array, Array2};
/// use streamload::tensor::Unbatch;
///
/// let batch: (Array2<f32>, _) = (array![[1.0, 2.0], [3.0, 4.0]], array![7i64, 9]);
/// let rows = batch.into_rows()?;
/// assert_eq!(rows, [(array![1.0, 2.0], 7), (array![3.0, 4.0], 9)]);
///
/// // A scalar has no rows, and components must agree on how many rows there are.
/// let err = (array![1i64, 2, 3], array![1i64, 2]).into_rows().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "Input element must have the same batch size in each component. \
///      Component 0 had size 3 but component 1 had size 2."
/// );
/// # anyhow::Ok(())
/// ```
pub trait Unbatch: Sized {
    /// One row: the batch with its first dimension taken off.
    type Row;

    /// The rows, in order.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a 0-d `ArrayD` or `Tensor` ("Cannot unbatch an input
    /// with scalar components.", TensorFlow's words), or tuple components with different
    /// numbers of rows.
    fn into_rows(self) -> anyhow::Result<Vec<Self::Row>>;
}

impl<T> Unbatch for Vec<T> {
    type Row = T;

    fn into_rows(self) -> anyhow::Result<Vec<T>> {
        Ok(self)
    }
}

impl<T, const N: usize> Unbatch for [T; N] {
    type Row = T;

    fn into_rows(self) -> anyhow::Result<Vec<T>> {
        Ok(self.into())
    }
}

fn scalar_components() -> anyhow::Error {
    Error::InvalidArgument("Cannot unbatch an input with scalar components.".into()).into()
}

impl<A: Clone> Unbatch for Array1<A> {
    type Row = A;

    fn into_rows(self) -> anyhow::Result<Vec<A>> {
        Ok(self.iter().cloned().collect())
    }
}

macro_rules! arrays {
    ($($dim:ty),*) => {$(
        impl<A: Clone> Unbatch for Array<A, $dim> {
            type Row = Array<A, <$dim as Dimension>::Smaller>;

            fn into_rows(self) -> anyhow::Result<Vec<Self::Row>> {
                Ok(self.outer_iter().map(|row| row.to_owned()).collect())
            }
        }
    )*};
}

arrays!(Ix2, Ix3, Ix4, Ix5, Ix6);

impl<A: Clone> Unbatch for ArrayD<A> {
    type Row = ArrayD<A>;

    fn into_rows(self) -> anyhow::Result<Vec<ArrayD<A>>> {
        if self.ndim() == 0 {
            return Err(scalar_components());
        }
        Ok(self.outer_iter().map(|row| row.to_owned()).collect())
    }
}

impl<A: Clone, D: Dimension> Unbatch for RaggedTensor<A, D> {
    type Row = Array<A, D>;

    fn into_rows(self) -> anyhow::Result<Vec<Array<A, D>>> {
        Ok((0..self.nrows()).map(|i| self.row(i).to_owned()).collect())
    }
}

impl Unbatch for Tensor {
    type Row = Tensor;

    fn into_rows(self) -> anyhow::Result<Vec<Tensor>> {
        let Some((&rows, row_shape)) = self.shape().split_first() else {
            return Err(scalar_components());
        };
        let width: usize = row_shape.iter().product();
        let row = |i: usize| {
            let range = i * width..(i + 1) * width;
            let values = match self.values() {
                Values::Int64(v) => Values::Int64(v[range].to_vec()),
                Values::Float32(v) => Values::Float32(v[range].to_vec()),
                Values::String(v) => Values::String(v[range].iter().map(Bytes::clone).collect()),
            };
            Tensor::new_unchecked(row_shape.to_vec(), values)
        };
        Ok((0..rows).map(row).collect())
    }
}

/// Checks that tuple component `i` has as many rows as component 0.
fn same_rows(first: usize, i: usize, len: usize) -> anyhow::Result<()> {
    if len == first {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "Input element must have the same batch size in each component. \
         Component 0 had size {first} but component {i} had size {len}."
    ))
    .into())
}

macro_rules! tuples {
    ($( ($first:ident . 0, $($name:ident . $idx:tt),+) )*) => {$(
        impl<$first: Unbatch, $($name: Unbatch),+> Unbatch for ($first, $($name,)+) {
            type Row = ($first::Row, $($name::Row,)+);

            #[allow(non_snake_case)] // the rows of each component, named after its type
            fn into_rows(self) -> anyhow::Result<Vec<Self::Row>> {
                let $first = self.0.into_rows()?;
                $(
                    let $name = self.$idx.into_rows()?;
                    same_rows($first.len(), $idx, $name.len())?;
                )+
                let mut $first = $first.into_iter();
                $(let mut $name = $name.into_iter();)+
                Ok(std::iter::from_fn(|| Some(($first.next()?, $($name.next()?,)+))).collect())
            }
        }
    )*};
}

tuples! {
    (A.0, B.1)
    (A.0, B.1, C.2)
    (A.0, B.1, C.2, D.3)
}
