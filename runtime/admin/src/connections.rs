//! Who may hold a connection to the control page. Connections from programs gantry started
//! (refused anyway) share a few slots of their own; the user's share the rest, and when those
//! are full the connection idle the longest makes room. So no flood of sockets, from a command
//! gantry ran or from anything else, locks the user out of the page: a new connection always
//! gets in unless every slot is in the middle of a request.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// Connections the user's side serves at once.
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// Connections from programs gantry started, answered 403 and closed.
pub(crate) const MAX_REFUSED_CONNECTIONS: usize = 4;
/// Connections whose opener is being looked up at once.
pub(crate) const MAX_CHECKING: usize = 16;
/// Connections waiting (up to 5 s) for their opener to be looked up; beyond, a new one is
/// closed at once.
pub(crate) const MAX_WAITING: usize = 256;

#[derive(Debug)]
struct Held {
    id: u64,
    /// Since when it has had no request in flight (`None`: serving one now).
    idle_since: Option<Instant>,
    /// Ends the connection when it is evicted.
    end: CancellationToken,
}

/// The user's connections.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    held: Mutex<Vec<Held>>,
    next: std::sync::atomic::AtomicU64,
}

/// A connection admitted to the pool; leaves it when dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    pool: Arc<Pool>,
    id: u64,
    /// Fires when the connection is evicted.
    pub(crate) end: CancellationToken,
}

impl Pool {
    fn held(&self) -> std::sync::MutexGuard<'_, Vec<Held>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a new connection, ending the one idle the longest when the pool is full; `None`
    /// when every connection is serving a request.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut held = self.held();
        if held.len() >= MAX_CONNECTIONS {
            let oldest = held
                .iter()
                .enumerate()
                .filter_map(|(i, h)| h.idle_since.map(|t| (i, t)))
                .min_by_key(|(_, t)| *t)?
                .0;
            held.swap_remove(oldest).end.cancel();
        }
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let end = CancellationToken::new();
        held.push(Held {
            id,
            idle_since: Some(Instant::now()),
            end: end.clone(),
        });
        Some(Admitted {
            pool: self.clone(),
            id,
            end,
        })
    }

    fn set_busy(&self, id: u64, busy: bool) {
        if let Some(h) = self.held().iter_mut().find(|h| h.id == id) {
            h.idle_since = (!busy).then(Instant::now);
        }
    }
}

impl Admitted {
    /// Marks a request in flight until the returned guard drops (it cannot be evicted then).
    pub(crate) fn busy(&self) -> Busy {
        self.pool.set_busy(self.id, true);
        Busy {
            pool: self.pool.clone(),
            id: self.id,
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.pool.held().retain(|h| h.id != self.id);
    }
}

/// A request in flight on an admitted connection.
#[derive(Debug)]
pub(crate) struct Busy {
    pool: Arc<Pool>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.pool.set_busy(self.id, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_pool_evicts_the_connection_idle_the_longest_never_a_busy_one() {
        let pool = Arc::new(Pool::default());
        let all: Vec<Admitted> = (0..MAX_CONNECTIONS)
            .map(|_| pool.admit().unwrap())
            .collect();
        let busy: Vec<Busy> = all[1..].iter().map(Admitted::busy).collect();
        let newcomer = pool.admit().unwrap();
        assert!(all[0].end.is_cancelled(), "the idle one made room");
        assert!(all[1..].iter().all(|a| !a.end.is_cancelled()));
        // Now everything but the newcomer is busy: the newcomer can be evicted, nothing else.
        let second = pool.admit().unwrap();
        assert!(newcomer.end.is_cancelled());
        assert!(all[1..].iter().all(|a| !a.end.is_cancelled()));
        // All busy and full: the next one is turned away.
        let _in_flight = second.busy();
        assert!(pool.admit().is_none());
        assert_eq!(pool.held().len(), MAX_CONNECTIONS);
        drop(busy);
        drop(all);
    }
}
