//! The Windows backend: Win32 for windows, pixels and input (`win32`), UI Automation on a
//! thread of its own for controls (`uia`), arboard for the clipboard. It type-checks and its
//! pure parts are unit-tested under Wine in CI; it has not run on a real Windows desktop.

mod uia;
mod win32;

use crate::DesktopError;
use crate::keys::Key;
use crate::model::{Button, Capture, Control, ControlHandle, Rect, WindowInfo};

/// The desktop of the session gantry runs in.
pub struct Desktop {
    uia: uia::Automation,
    pub(crate) clipboard: crate::clipboard::Clipboard,
}

impl std::fmt::Debug for Desktop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desktop").finish_non_exhaustive()
    }
}

#[allow(missing_docs)]
impl Desktop {
    /// Starts UI Automation and checks the session has a screen.
    pub fn connect() -> Result<Desktop, DesktopError> {
        win32::dpi_aware();
        let s = win32::screen();
        if s.w == 0 || s.h == 0 {
            return Err(DesktopError::Unavailable(
                "this session has no interactive desktop".into(),
            ));
        }
        Ok(Desktop {
            uia: uia::Automation::start()?,
            clipboard: crate::clipboard::Clipboard::default(),
        })
    }

    pub fn describe(&self) -> String {
        let s = win32::screen();
        format!("Windows desktop ({}x{}, primary screen)", s.w, s.h)
    }

    pub fn screen(&self) -> Rect {
        win32::screen()
    }

    pub fn windows(&self) -> Result<Vec<WindowInfo>, DesktopError> {
        Ok(win32::windows())
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
        self.uia.controls(window.id, max).await
    }

    pub async fn locate(&self, h: &ControlHandle) -> Result<Option<Rect>, DesktopError> {
        self.uia.locate(h).await
    }

    pub async fn press(&self, h: &ControlHandle) -> Result<String, DesktopError> {
        self.uia.press(h).await
    }

    pub async fn set_value(
        &self,
        h: &ControlHandle,
        text: &str,
        _editable: bool,
    ) -> Result<&'static str, DesktopError> {
        self.uia.set_value(h, text).await
    }

    pub async fn focus_control(&self, h: &ControlHandle) -> Result<(), DesktopError> {
        self.uia.focus(h).await
    }
}
