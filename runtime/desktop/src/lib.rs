//! gantry's desktop: screenshots, windows, UI controls, input and the clipboard. The
//! platform-neutral core (frames, refs, key chords, encoding) is the same everywhere; the
//! backend is X11 + AT-SPI on Linux, Win32 + UI Automation on Windows.

#[cfg(any(target_os = "linux", windows))]
mod clipboard;
#[cfg(any(target_os = "linux", windows))]
mod desktop_clipboard;
pub mod encode;
mod error;
pub mod frames;
pub mod keys;
pub mod model;
pub mod refs;
#[cfg(not(any(target_os = "linux", windows)))]
mod unsupported;
#[cfg(windows)]
mod windows;
#[cfg(target_os = "linux")]
mod x11;

pub use error::DesktopError;
#[cfg(not(any(target_os = "linux", windows)))]
pub use unsupported::Desktop;
#[cfg(windows)]
pub use windows::Desktop;
#[cfg(target_os = "linux")]
pub use x11::Desktop;
