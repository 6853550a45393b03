//! How a page of holds is read, the same on both stores: which index ranges ("parts") it
//! reads, in which order, how many rows each may give, and how the parts are merged. Each
//! store only turns a part into its SQL.

use std::ops::RangeInclusive;

use holdpoint_core::store::{HoldFilter, Positioned, StatusSet, StoreError};
use holdpoint_protocol::{Hold, Order};

/// Which holds one statement of a listing reads, and in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// Open holds, in position order.
    Open,
    /// Resolved holds, in position order.
    Resolved,
    /// Open holds with a deadline, by deadline, then position: the urgent order's first part.
    Due,
    /// Open holds without a deadline, by position: the urgent order's second part.
    Undated,
}

impl Part {
    pub(crate) fn open(self) -> bool {
        self != Part::Resolved
    }
}

/// A range of positions as the stores' SQL takes it: both ends inclusive, as signed 64-bit
/// integers (positions beyond them are none a store gives).
pub(crate) fn position_range(positions: &RangeInclusive<u64>) -> (i64, i64) {
    let bound = |p: u64| i64::try_from(p).unwrap_or(i64::MAX);
    (bound(*positions.start()), bound(*positions.end()))
}

/// The parts a page of `f` reads, in order.
pub(crate) fn parts(f: &HoldFilter) -> Result<&'static [Part], StoreError> {
    let open_only = f.status.open_only();
    Ok(match f.order {
        Order::Urgent if !open_only => {
            return Err(StoreError::new("the urgent order lists open holds only"));
        }
        // The page goes on among the holds without a deadline.
        Order::Urgent if f.after.is_some() && f.after_deadline.is_none() => &[Part::Undated],
        // Those with a deadline, then (if the page is not full) those without.
        Order::Urgent => &[Part::Due, Part::Undated],
        Order::Oldest | Order::Newest if open_only => &[Part::Open],
        Order::Oldest | Order::Newest => match f.status {
            // Open and resolved holds sit in two index ranges: read a page of each and merge.
            StatusSet::Any => &[Part::Open, Part::Resolved],
            _ => &[Part::Resolved],
        },
    })
}

/// How many rows the next part may give, `read` rows being in the page already: the urgent
/// order's parts fill one page in turn; the others each read a whole page, merged after.
pub(crate) fn part_limit(f: &HoldFilter, read: usize) -> usize {
    match f.order {
        Order::Urgent => f.limit - read,
        Order::Oldest | Order::Newest => f.limit,
    }
}

/// The page, once every part of `parts` was read into `rows`.
pub(crate) fn merge(f: &HoldFilter, parts: &[Part], rows: &mut Vec<Positioned<Hold>>) {
    if parts == [Part::Open, Part::Resolved] {
        match f.order {
            Order::Newest => rows.sort_by_key(|r| std::cmp::Reverse(r.position)),
            Order::Oldest | Order::Urgent => rows.sort_by_key(|r| r.position),
        }
        rows.truncate(f.limit);
    }
}
