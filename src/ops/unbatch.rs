use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::tensor::Unbatch as Rows;

/// Stream for the [`unbatch`](crate::Dataset::unbatch) method, and the first step of
/// [`rebatch`](crate::Dataset::rebatch): yields the rows of each element, numbering the
/// elements so an error names the one it is about.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Unbatch<St, C: Rows> {
    #[pin]
    input: St,
    current: Option<std::vec::IntoIter<C::Row>>,
    stage: &'static str,
    /// The index of the next input element (error elements are counted too).
    index: u64,
}

impl<St, C: Rows> Unbatch<St, C> {
    pub(crate) fn new(input: St, stage: &'static str) -> Self {
        Unbatch {
            input,
            current: None,
            stage,
            index: 0,
        }
    }
}

impl<St, C> Stream for Unbatch<St, C>
where
    St: Stream<Item = anyhow::Result<C>>,
    C: Rows,
{
    type Item = anyhow::Result<C::Row>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            if let Some(x) = this.current.as_mut().and_then(Iterator::next) {
                return Poll::Ready(Some(Ok(x)));
            }
            *this.current = None;
            let item = ready!(this.input.as_mut().poll_next(cx));
            let index = *this.index;
            *this.index += 1;
            match item {
                Some(Ok(c)) => match c.into_rows() {
                    Ok(rows) => *this.current = Some(rows.into_iter()),
                    Err(e) => {
                        let stage = *this.stage;
                        return Poll::Ready(Some(Err(
                            e.context(format!("{stage}: element {index}"))
                        )));
                    }
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            }
        }
    }
}
