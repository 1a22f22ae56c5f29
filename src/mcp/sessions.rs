//! Who holds which HTTP session, and how many sessions and requests each
//! token may hold, so that no token can reach, close or crowd out another
//! token's sessions.
//!
//! rmcp's session manager knows sessions only by their id, and the id
//! travels in a header any client can copy. So every session is bound
//! here to the token that opened it (its *holder*): a request naming a
//! session another token opened is answered as for an unknown session
//! (404), whatever it asks (a call, a resumption of another request's
//! answers with `Last-Event-ID`, the listening stream, a `DELETE`).
//!
//! Fair shares: a holder may keep `max_sessions / tokens` sessions (at
//! least one); opening one more closes that holder's least recently used
//! session instead of refusing, so a client that leaks sessions only ever
//! evicts its own. Likewise a holder may have `max_in_flight / tokens`
//! requests in flight (at least 4, or `max_in_flight` if smaller). A session has one listening `GET`
//! stream: a newer one ends the older.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

/// Which token a request came with: its line in the token file, or
/// `None` on a server without tokens (everyone is one holder there).
pub(crate) type Holder = Option<usize>;

/// The sessions' owners and the per-holder budgets.
pub(crate) struct Sessions {
    manager: Arc<LocalSessionManager>,
    max_sessions: usize,
    per_holder_sessions: usize,
    per_holder_in_flight: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    owned: HashMap<String, Owned>,
    /// Sessions being opened (an initialize in flight), per holder.
    opening: HashMap<Holder, usize>,
    in_flight: HashMap<Holder, usize>,
    clock: u64,
}

struct Owned {
    holder: Holder,
    last_used: u64,
    /// Ends the session's listening `GET` stream when a newer one opens.
    listener: Option<CancellationToken>,
    /// Evicted, being closed: no longer a candidate for eviction.
    closing: bool,
}

/// Why a request may not go on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Every session slot is taken by other holders (503).
    Full,
    /// This holder has its share of requests in flight (503).
    Busy,
}

impl Sessions {
    /// `holders`: how many tokens there are (1 without tokens).
    pub(crate) fn new(
        manager: Arc<LocalSessionManager>,
        max_sessions: usize,
        max_in_flight: usize,
        holders: usize,
    ) -> Self {
        let holders = holders.max(1);
        let max_sessions = max_sessions.max(1);
        Sessions {
            manager,
            max_sessions,
            per_holder_sessions: (max_sessions / holders).max(1),
            // At least 4 (a call, its cancellation, a notification, a
            // resumption), or all there are.
            per_holder_in_flight: (max_in_flight.max(1) / holders).max(max_in_flight.clamp(1, 4)),
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Whether `holder` may use `session`: it opened it, or nobody here
    /// did (then rmcp answers 404 for the unknown id). Marks it used.
    pub(crate) fn may_use(&self, holder: Holder, session: &str) -> bool {
        let mut state = self.state();
        state.clock += 1;
        let now = state.clock;
        match state.owned.get_mut(session) {
            Some(owned) if owned.holder == holder => {
                owned.last_used = now;
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Makes room for a session `holder` may open, closing that holder's
    /// least recently used one if it has its share. The slot is held
    /// until the returned [`Opening`] is committed or dropped.
    pub(crate) async fn open(self: &Arc<Self>, holder: Holder) -> Result<Opening, Refusal> {
        // Forget sessions rmcp closed (idle, deleted, ended).
        let live: HashSet<String> = {
            let sessions = self.manager.sessions.read().await;
            sessions.keys().map(|k| k.to_string()).collect()
        };
        let victim = {
            let mut state = self.state();
            state.owned.retain(|id, _| live.contains(id));
            let mine = state.owned.values().filter(|o| o.holder == holder).count()
                + state.opening.get(&holder).copied().unwrap_or(0);
            let victim = if mine >= self.per_holder_sessions {
                match least_recent(&state, holder) {
                    // Left bound to its holder until rmcp has closed it,
                    // so no other token can slip in meanwhile.
                    Some(id) => {
                        if let Some(o) = state.owned.get_mut(&id) {
                            o.closing = true;
                        }
                        Some(id)
                    }
                    // All its slots are sessions still being opened.
                    None => return Err(Refusal::Busy),
                }
            } else {
                let total = state.owned.len() + state.opening.values().sum::<usize>();
                if total >= self.max_sessions {
                    return Err(Refusal::Full);
                }
                None
            };
            *state.opening.entry(holder).or_insert(0) += 1;
            victim
        };
        if let Some(id) = victim {
            let _ = self.manager.close_session(&id.as_str().into()).await;
            self.state().owned.remove(&id);
        }
        Ok(Opening {
            sessions: Arc::clone(self),
            holder,
            done: false,
        })
    }

    /// A listening stream for `session`: the token that ends it, after
    /// ending the session's older one.
    pub(crate) fn listen(&self, session: &str) -> CancellationToken {
        let token = CancellationToken::new();
        let mut state = self.state();
        if let Some(owned) = state.owned.get_mut(session)
            && let Some(old) = owned.listener.replace(token.clone())
        {
            old.cancel();
        }
        token
    }

    /// Counts a request of `holder` in flight, if its share allows.
    pub(crate) fn start(self: &Arc<Self>, holder: Holder) -> Result<Flight, Refusal> {
        let mut state = self.state();
        let n = state.in_flight.entry(holder).or_insert(0);
        if *n >= self.per_holder_in_flight {
            return Err(Refusal::Busy);
        }
        *n += 1;
        Ok(Flight {
            sessions: Arc::clone(self),
            holder,
        })
    }

    /// Sessions bound to a holder now (for tests of the bounds).
    #[cfg(test)]
    fn owned(&self) -> usize {
        self.state().owned.len()
    }
}

impl Sessions {
    /// Whether `holder` opened `session` (an unknown id is not held).
    pub(crate) fn holds(&self, holder: Holder, session: &str) -> bool {
        self.state()
            .owned
            .get(session)
            .is_some_and(|o| o.holder == holder && !o.closing)
    }

    /// Binds a session rmcp opened without a reserved slot to `holder`
    /// and counts it: past the holder's share its least recently used
    /// session is closed, and past the server's bound the new one is.
    pub(crate) async fn adopt(&self, holder: Holder, session: &str) {
        let victim = {
            let mut state = self.state();
            bind(&mut state, holder, session);
            let open = |o: &&Owned| !o.closing;
            let mine = state
                .owned
                .values()
                .filter(|o| o.holder == holder)
                .filter(open)
                .count();
            let total =
                state.owned.values().filter(open).count() + state.opening.values().sum::<usize>();
            let victim = if mine > self.per_holder_sessions {
                least_recent(&state, holder)
            } else if total > self.max_sessions {
                Some(session.to_owned())
            } else {
                None
            };
            if let Some(o) = victim.as_ref().and_then(|id| state.owned.get_mut(id)) {
                o.closing = true;
            }
            victim
        };
        if let Some(id) = victim {
            let _ = self.manager.close_session(&id.as_str().into()).await;
            self.state().owned.remove(&id);
        }
    }
}

/// `holder`'s least recently used session not already being closed.
fn least_recent(state: &State, holder: Holder) -> Option<String> {
    state
        .owned
        .iter()
        .filter(|(_, o)| o.holder == holder && !o.closing)
        .min_by_key(|(_, o)| o.last_used)
        .map(|(id, _)| id.clone())
}

fn bind(state: &mut State, holder: Holder, session: &str) {
    state.clock += 1;
    let now = state.clock;
    state.owned.insert(
        session.to_owned(),
        Owned {
            holder,
            last_used: now,
            listener: None,
            closing: false,
        },
    );
}

/// A session slot reserved for an initialize in flight.
pub(crate) struct Opening {
    sessions: Arc<Sessions>,
    holder: Holder,
    done: bool,
}

impl Opening {
    /// The initialize opened `session`: bind it to the holder.
    pub(crate) fn commit(mut self, session: &str) {
        let mut state = self.sessions.state();
        release(&mut state.opening, self.holder);
        bind(&mut state, self.holder, session);
        self.done = true;
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if !self.done {
            release(&mut self.sessions.state().opening, self.holder);
        }
    }
}

/// A request counted in its holder's share until dropped.
pub(crate) struct Flight {
    sessions: Arc<Sessions>,
    holder: Holder,
}

impl Drop for Flight {
    fn drop(&mut self) {
        release(&mut self.sessions.state().in_flight, self.holder);
    }
}

fn release(counts: &mut HashMap<Holder, usize>, holder: Holder) {
    if let Some(n) = counts.get_mut(&holder) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            counts.remove(&holder);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(max: usize, holders: usize) -> Arc<Sessions> {
        Arc::new(Sessions::new(
            Arc::new(LocalSessionManager::default()),
            max,
            4,
            holders,
        ))
    }

    #[tokio::test]
    async fn a_session_is_usable_only_by_the_token_that_opened_it() {
        let s = sessions(8, 2);
        s.open(Some(0)).await.unwrap().commit("a");
        assert!(s.may_use(Some(0), "a"));
        assert!(!s.may_use(Some(1), "a"));
        assert!(!s.may_use(None, "a"));
        // An id nobody opened is rmcp's to refuse.
        assert!(s.may_use(Some(1), "unknown"));
    }

    #[tokio::test]
    async fn opening_reserves_a_slot_until_committed_or_dropped() {
        // One holder, one slot: a second initialize while the first is
        // in flight is refused rather than let through.
        let s = sessions(1, 1);
        let first = s.open(None).await.unwrap();
        assert_eq!(s.open(None).await.err(), Some(Refusal::Busy));
        drop(first);
        assert!(s.open(None).await.is_ok());
    }

    #[tokio::test]
    async fn in_flight_shares_are_per_holder() {
        // 16 in flight, 4 tokens: 4 each.
        let s = Arc::new(Sessions::new(
            Arc::new(LocalSessionManager::default()),
            8,
            16,
            4,
        ));
        let a: Vec<Flight> = (0..4).map(|_| s.start(Some(0)).unwrap()).collect();
        assert!(matches!(s.start(Some(0)), Err(Refusal::Busy)));
        assert!(s.start(Some(1)).is_ok());
        drop(a);
        assert!(s.start(Some(0)).is_ok());
        assert_eq!(s.owned(), 0);
        // Many tokens still get a few each, never zero.
        let many = sessions(8, 100);
        let held: Vec<Flight> = (0..4).map(|_| many.start(Some(7)).unwrap()).collect();
        assert!(matches!(many.start(Some(7)), Err(Refusal::Busy)));
        drop(held);
    }
}
