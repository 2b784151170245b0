//! The system's service manager: a service's state, and starting, stopping, restarting or
//! reloading it. See the README for what each platform's backend uses.

mod model;

#[cfg(target_vendor = "apple")]
mod launchd;
#[cfg(windows)]
mod scm;
#[cfg(target_os = "linux")]
mod systemd;
#[cfg(any(windows, target_vendor = "apple"))]
mod worker;

pub use model::{Action, Manager, Outcome, ServiceError, ServiceState, State};

#[cfg(target_vendor = "apple")]
pub use launchd::{control, status};
#[cfg(windows)]
pub use scm::{control, status};
#[cfg(target_os = "linux")]
pub use systemd::{control, status};
