//! What the store and import tests share: the budgets they read with and `search` as they
//! all ask it.

#![allow(dead_code)]

use recordings::store::SessionInfo;
use recordings::{Budgets, Redactor, Search, Store};

pub const BUDGETS: Budgets = Budgets {
    search_tokens: 3000,
    read_tokens: 5000,
    newest: 30,
};

pub fn everyone(_: &SessionInfo) -> bool {
    true
}

/// `search` as every test asks it: everyone may see everything, no extra redaction.
pub fn search(
    store: &Store,
    query: Option<&str>,
    source: Option<&str>,
    cursor: Option<&str>,
) -> recordings::Page {
    let r = Redactor::new(&[], Vec::new()).unwrap();
    store
        .search(
            Search {
                query,
                source,
                cursor,
            },
            &everyone,
            &r,
            BUDGETS,
        )
        .unwrap()
}
