//! The `next` cursor of a page of holds: opaque to clients, it says where the next page
//! starts. In the oldest and newest orders that is a position (`"42"`). The urgent order is by
//! deadline first, so its cursor also carries the deadline of the last hold shown
//! (`"u1700000000000.42"`, or `"u-.42"` for a hold without one): the next page continues
//! after that pair, across equal deadlines and into the holds without one.

use holdpoint_protocol::{Hold, Order, Timestamp};

/// Where a page continues: after the hold at `position`, whose deadline was `deadline`
/// (only read in the urgent order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cursor {
    pub position: u64,
    pub deadline: Option<Timestamp>,
}

impl Cursor {
    /// The cursor after `hold`, the last of a page at `position`.
    pub(super) fn after(position: u64, hold: &Hold) -> Self {
        Cursor {
            position,
            deadline: hold.deadline,
        }
    }

    pub(super) fn encode(self, order: Order) -> String {
        match (order, self.deadline) {
            (Order::Oldest | Order::Newest, _) => self.position.to_string(),
            (Order::Urgent, Some(d)) => format!("u{}.{}", d.as_millis(), self.position),
            (Order::Urgent, None) => format!("u-.{}", self.position),
        }
    }

    /// Reads a cursor made by [`Cursor::encode`] for the same order; `None` for anything
    /// else, a cursor of another order included.
    pub(super) fn decode(text: &str, order: Order) -> Option<Self> {
        match order {
            Order::Oldest | Order::Newest => Some(Cursor {
                position: text.parse().ok()?,
                deadline: None,
            }),
            Order::Urgent => {
                let (deadline, position) = text.strip_prefix('u')?.split_once('.')?;
                let deadline = match deadline {
                    "-" => None,
                    millis => Some(Timestamp::from_millis(millis.parse().ok()?)),
                };
                Some(Cursor {
                    position: position.parse().ok()?,
                    deadline,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_in_their_own_order_only() {
        let dated = Cursor {
            position: 42,
            deadline: Some(Timestamp::from_millis(1_700_000_000_000)),
        };
        let undated = Cursor {
            position: 7,
            deadline: None,
        };
        for c in [dated, undated] {
            assert_eq!(
                Cursor::decode(&c.encode(Order::Urgent), Order::Urgent),
                Some(c)
            );
            let plain = Cursor {
                deadline: None,
                ..c
            };
            for order in [Order::Oldest, Order::Newest] {
                assert_eq!(Cursor::decode(&c.encode(order), order), Some(plain));
                assert_eq!(Cursor::decode(&c.encode(order), Order::Urgent), None);
                assert_eq!(Cursor::decode(&c.encode(Order::Urgent), order), None);
            }
        }
        for junk in [
            "", "u", "u.", "u-", "u-.", "u1.x", "ux.1", "x1.2", "-1", "1.2",
        ] {
            assert_eq!(Cursor::decode(junk, Order::Urgent), None, "{junk:?}");
            assert_eq!(Cursor::decode(junk, Order::Oldest), None, "{junk:?}");
        }
    }
}
