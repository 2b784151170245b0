/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be opened or created.
    #[error("the session store {0} cannot be opened: {1}")]
    Open(std::path::PathBuf, String),
    /// SQLite refused a statement.
    #[error("the session store failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
}
