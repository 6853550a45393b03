//! The connections a server holds open: admitted at accept, counted overall and per client
//! address, and closed when they have sent no request `server.header_timeout` after accept.
//!
//! A connection that has not yet sent a whole request's headers is *fresh*. Fresh ones cost
//! a descriptor and give nothing, so when a cap is reached the oldest fresh connection (of
//! the same address for the per-address cap) is closed to make room; only when none is fresh
//! is the new connection refused. Silent or trickling clients therefore cannot keep a probe,
//! a person's decision or an agent's request from being served, from any address: their
//! connections are the ones that give way. A connection that sent a request is never closed
//! here (streams and long polls are capped by `limits::Limiter`, idle keep-alives by hyper's
//! header timeout, which runs again before each request).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Descriptors kept for everything but client connections (the store's files, upstream MCP
/// servers' pipes, webhook and LLM connections, shell commands): a quarter of the process's
/// limit, and at least this many.
const RESERVED_DESCRIPTORS: usize = 64;

/// Connections closed to make room take a moment to let go of their descriptors: the accept
/// loop runs at most this many ahead of them, so that it never runs out.
const HEADROOM: usize = 16;

/// The open connections and their caps.
pub(crate) struct Connections {
    table: Mutex<Table>,
    max_total: usize,
    max_per_address: usize,
    /// A connection let go of its descriptor.
    freed: tokio::sync::Notify,
}

#[derive(Default)]
struct Table {
    next: u64,
    total: usize,
    per_address: HashMap<IpAddr, usize>,
    /// Connections without a request yet, oldest first (ids grow with each accept).
    fresh: BTreeMap<u64, (IpAddr, CancellationToken)>,
}

/// One admitted connection. Dropping it counts the connection as closed.
pub(crate) struct Admitted {
    connections: Arc<Connections>,
    id: u64,
    ip: IpAddr,
    requested: AtomicBool,
    evicted: CancellationToken,
}

impl Connections {
    /// At most `max_total` connections (fewer when the process may open fewer descriptors)
    /// and `max_per_address` from one client address.
    pub(crate) fn new(max_total: usize, max_per_address: usize) -> Arc<Connections> {
        let max_total = match descriptor_limit() {
            Some(limit) => max_total.min(limit.saturating_sub(reserved(limit)).max(1)),
            None => max_total,
        };
        Arc::new(Connections {
            table: Mutex::default(),
            max_total: max_total.max(1),
            max_per_address: max_per_address.max(1),
            freed: tokio::sync::Notify::new(),
        })
    }

    /// The most connections open at once, after the descriptor limit.
    pub(crate) fn max_total(&self) -> usize {
        self.max_total
    }

    /// Admits a connection from `ip`, closing the oldest fresh one when a cap is reached;
    /// `None` when it is full of connections that all sent requests.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Arc<Admitted>> {
        let mut table = self.table.lock();
        if table.per_address.get(&ip).copied().unwrap_or(0) >= self.max_per_address
            && !table.evict_oldest(Some(ip))
        {
            return None;
        }
        if table.total >= self.max_total && !table.evict_oldest(None) {
            return None;
        }
        let id = table.next;
        table.next += 1;
        table.total += 1;
        *table.per_address.entry(ip).or_default() += 1;
        let evicted = CancellationToken::new();
        table.fresh.insert(id, (ip, evicted.clone()));
        Some(Arc::new(Admitted {
            connections: Arc::clone(self),
            id,
            ip,
            requested: AtomicBool::new(false),
            evicted,
        }))
    }

    /// Waits until the connections closed to make room have let go of their descriptors,
    /// all but a few: the accept loop calls it before each accept.
    pub(crate) async fn room(&self) {
        while self.table.lock().total >= self.max_total + HEADROOM {
            self.freed.notified().await;
        }
    }

    /// Closes the oldest fresh connection, to free a descriptor when accept found none.
    pub(crate) fn shed(&self) -> bool {
        self.table.lock().evict_oldest(None)
    }

    /// How many connections are open, and how many of them sent no request yet.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let table = self.table.lock();
        (table.total, table.fresh.len())
    }
}

impl Table {
    /// Closes the oldest fresh connection (of `ip`, when given). Its count goes when its
    /// task lets it go, a moment later.
    fn evict_oldest(&mut self, ip: Option<IpAddr>) -> bool {
        let oldest = self
            .fresh
            .iter()
            .find(|(_, (from, _))| ip.is_none_or(|ip| ip == *from))
            .map(|(id, _)| *id);
        let Some((_, close)) = oldest.and_then(|id| self.fresh.remove(&id)) else {
            return false;
        };
        close.cancel();
        true
    }
}

impl Admitted {
    /// The connection sent a request: it is no longer closed for silence or to make room.
    pub(crate) fn requested(&self) {
        if !self.requested.swap(true, Ordering::Relaxed) {
            self.connections.table.lock().fresh.remove(&self.id);
        }
    }

    pub(crate) fn has_requested(&self) -> bool {
        self.requested.load(Ordering::Relaxed)
    }

    /// Resolves when the connection is closed to make room for another.
    pub(crate) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut table = self.connections.table.lock();
        table.fresh.remove(&self.id);
        table.total -= 1;
        if let Some(n) = table.per_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                table.per_address.remove(&self.ip);
            }
        }
        drop(table);
        self.connections.freed.notify_one();
    }
}

fn reserved(limit: usize) -> usize {
    (limit / 4).max(RESERVED_DESCRIPTORS)
}

/// The process's limit on open descriptors, raised first to the most it may be (as a server
/// that holds a descriptor per client must); `None` when it cannot be read.
fn descriptor_limit() -> Option<usize> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let mut current = limit.current?;
    if limit.maximum.is_none_or(|max| max > current) {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            current = getrlimit(Resource::Nofile).current?;
        }
    }
    usize::try_from(current).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn table(max_total: usize, max_per_address: usize) -> Arc<Connections> {
        Arc::new(Connections {
            table: Mutex::default(),
            max_total,
            max_per_address,
            freed: tokio::sync::Notify::new(),
        })
    }

    #[test]
    fn a_full_table_closes_its_oldest_fresh_connection_for_a_new_one() {
        let connections = table(3, 10);
        let first = connections.admit(ip(1)).expect("room");
        let second = connections.admit(ip(2)).expect("room");
        let third = connections.admit(ip(3)).expect("room");
        first.requested();
        // Full: the oldest without a request is the second.
        let fourth = connections.admit(ip(4)).expect("a fresh one gives way");
        assert!(second.evicted.is_cancelled());
        assert!(!first.evicted.is_cancelled() && !third.evicted.is_cancelled());
        drop(second);
        assert_eq!(connections.counts(), (3, 2));
        third.requested();
        fourth.requested();
        assert!(
            connections.admit(ip(5)).is_none(),
            "every open connection sent a request: the new one is refused"
        );
        drop(first);
        assert!(connections.admit(ip(5)).is_some());
    }

    #[test]
    fn an_address_at_its_cap_gives_way_with_its_own_fresh_connections_only() {
        let connections = table(100, 2);
        let other = connections.admit(ip(9)).expect("room");
        let a = connections.admit(ip(1)).expect("room");
        let b = connections.admit(ip(1)).expect("room");
        let c = connections
            .admit(ip(1))
            .expect("its oldest fresh one gives way");
        assert!(a.evicted.is_cancelled());
        assert!(!other.evicted.is_cancelled() && !b.evicted.is_cancelled());
        drop(a);
        b.requested();
        c.requested();
        assert!(connections.admit(ip(1)).is_none());
        assert!(
            connections.admit(ip(2)).is_some(),
            "other addresses are not held back"
        );
    }

    #[test]
    fn shedding_closes_the_oldest_fresh_connection() {
        let connections = table(10, 10);
        let a = connections.admit(ip(1)).expect("room");
        let b = connections.admit(ip(1)).expect("room");
        a.requested();
        assert!(connections.shed());
        assert!(b.evicted.is_cancelled() && !a.evicted.is_cancelled());
        drop(b);
        assert!(!connections.shed(), "no fresh connection is left");
    }

    #[test]
    fn the_descriptor_limit_keeps_a_reserve() {
        assert_eq!(reserved(512), 128);
        assert_eq!(reserved(100), 64);
        let connections = Connections::new(usize::MAX, 10);
        let limit = descriptor_limit().expect("Linux has a descriptor limit");
        assert_eq!(connections.max_total(), limit - reserved(limit));
    }
}
