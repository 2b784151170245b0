//! The Windows backend: Win32 for windows, pixels and input (`win32`), UI Automation on a
//! thread of its own for controls (`uia`), arboard for the clipboard. Where UI Automation
//! cannot start (Wine), the rest still serves and the control steps say why they cannot. It type-checks and its
//! pure parts are unit-tested under Wine in CI; it has not run on a real Windows desktop.

mod uia;
mod win32;

use crate::DesktopError;
use crate::keys::Key;
use crate::model::{Button, Capture, Control, ControlHandle, Rect, WindowInfo};

/// The desktop of the session gantry runs in.
pub struct Desktop {
    /// UI Automation, or why it could not start.
    uia: Result<uia::Automation, String>,
    pub(crate) clipboard: crate::clipboard::Clipboard,
}

impl std::fmt::Debug for Desktop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desktop").finish_non_exhaustive()
    }
}

#[allow(missing_docs)]
impl Desktop {
    /// Checks the session has a screen and starts UI Automation.
    pub fn connect() -> Result<Desktop, DesktopError> {
        win32::dpi_aware();
        let s = win32::screen();
        if s.w == 0 || s.h == 0 {
            return Err(DesktopError::Unavailable(
                "this session has no interactive desktop".into(),
            ));
        }
        let uia = uia::Automation::start().map_err(|e| match e {
            DesktopError::Unavailable(why) => why,
            other => other.to_string(),
        });
        if let Err(e) = &uia {
            tracing::warn!(error = %e, "UI Automation is unavailable: windows, screenshots, the pointer, the keyboard and the clipboard work; controls and refs do not");
        }
        Ok(Desktop {
            uia,
            clipboard: crate::clipboard::Clipboard::default(),
        })
    }

    pub fn describe(&self) -> String {
        let s = win32::screen();
        let controls = if self.uia.is_ok() {
            ""
        } else {
            ", no UI Automation"
        };
        format!(
            "Windows desktop ({}x{}, primary screen{controls})",
            s.w, s.h
        )
    }

    /// UI Automation, or the step's error naming why it is missing.
    fn automation(&self) -> Result<&uia::Automation, DesktopError> {
        self.uia.as_ref().map_err(|e| {
            DesktopError::Failed(format!(
                "controls and refs are unavailable on this system ({e}); act on a screenshot's coordinates (click, type, keypress) instead"
            ))
        })
    }

    pub fn screen(&self) -> Rect {
        win32::screen()
    }

    pub fn windows(&self) -> Result<Vec<WindowInfo>, DesktopError> {
        Ok(win32::windows())
    }

    pub fn popups(&self, listed: &[WindowInfo]) -> Result<Vec<WindowInfo>, DesktopError> {
        Ok(win32::popups(listed))
    }

    pub fn window_at(
        &self,
        listed: &[WindowInfo],
        x: i32,
        y: i32,
    ) -> Result<Option<WindowInfo>, DesktopError> {
        Ok(win32::window_at(listed, x, y))
    }

    pub fn focused_window(
        &self,
        listed: &[WindowInfo],
    ) -> Result<Option<WindowInfo>, DesktopError> {
        Ok(win32::focused_window(listed))
    }

    pub fn capture(&self, area: Rect) -> Result<Capture, DesktopError> {
        win32::capture(area)
    }

    pub fn pointer(&self) -> Result<(i32, i32), DesktopError> {
        win32::pointer()
    }

    pub fn keys_held(&self) -> Result<bool, DesktopError> {
        Ok(win32::keys_held())
    }

    pub fn move_to(&self, x: i32, y: i32) -> Result<(), DesktopError> {
        win32::move_to(x, y)
    }

    pub fn button(&self, b: Button, down: bool) -> Result<(), DesktopError> {
        win32::button(b, down)
    }

    pub fn wheel(&self, dx: i32, dy: i32) -> Result<(), DesktopError> {
        win32::wheel(dx, dy)
    }

    pub fn type_text(&self, text: &str) -> Result<(), DesktopError> {
        win32::type_text(text)
    }

    pub fn chord(&self, keys: &[Key]) -> Result<(), DesktopError> {
        win32::chord(keys)
    }

    pub fn activate(&self, id: u64) -> Result<(), DesktopError> {
        win32::activate(id)
    }

    pub async fn controls(
        &self,
        window: &WindowInfo,
        max: usize,
    ) -> Result<Vec<Control>, DesktopError> {
        self.automation()?.controls(window.id, max).await
    }

    pub async fn locate(&self, h: &ControlHandle) -> Result<Option<Rect>, DesktopError> {
        self.automation()?.locate(h).await
    }

    pub async fn press(&self, h: &ControlHandle) -> Result<String, DesktopError> {
        self.automation()?.press(h).await
    }

    pub async fn set_value(
        &self,
        h: &ControlHandle,
        text: &str,
        _editable: bool,
    ) -> Result<&'static str, DesktopError> {
        self.automation()?.set_value(h, text).await
    }

    pub async fn focus_control(&self, h: &ControlHandle) -> Result<(), DesktopError> {
        self.automation()?.focus(h).await
    }
}
