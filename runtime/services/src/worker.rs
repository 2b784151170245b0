//! Managers whose calls block (the Service Control Manager, launchctl), asked on tokio's
//! blocking pool and given up on after a bound, so no call waits on them forever.

use std::time::Duration;

use crate::model::ServiceError;

/// Runs `work` on the blocking pool; a timeout from `manager` after `after`.
pub(crate) async fn blocking<T: Send + 'static>(
    manager: &'static str,
    after: Duration,
    work: impl FnOnce() -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::time::timeout(after, tokio::task::spawn_blocking(work))
        .await
        .map_err(|_| ServiceError::Timeout { manager, after })?
        .map_err(|e| ServiceError::Unavailable {
            manager,
            why: format!("the worker failed: {e}"),
        })?
}
