//! The Linux backend: an X11 display (x11rb: EWMH, GetImage, XTEST), its UI controls over
//! AT-SPI, and the clipboard (arboard, one long-lived owner so what gantry copies stays
//! pasteable while the server runs).

mod a11y;
mod display;

use crate::DesktopError;
use crate::keys::Key;
use crate::model::{Button, Capture, Control, ControlHandle, Rect, WindowInfo};

/// The desktop gantry was started on.
pub struct Desktop {
    display: display::Display,
    a11y: a11y::A11y,
    pub(crate) clipboard: crate::clipboard::Clipboard,
}

impl std::fmt::Debug for Desktop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desktop")
            .field("display", &self.display)
            .finish_non_exhaustive()
    }
}

impl Desktop {
    /// Connects to the X display in `$DISPLAY`; fails, saying why, where there is none.
    pub fn connect() -> Result<Desktop, DesktopError> {
        Ok(Desktop {
            display: display::Display::connect()?,
            a11y: a11y::A11y::default(),
            clipboard: crate::clipboard::Clipboard::default(),
        })
    }

    /// What the backend drives, for the start-up log.
    pub fn describe(&self) -> String {
        let s = self.display.screen();
        format!(
            "X11 display {} ({}x{})",
            std::env::var("DISPLAY").unwrap_or_default(),
            s.w,
            s.h
        )
    }

    /// The whole screen.
    pub fn screen(&self) -> Rect {
        self.display.screen()
    }

    /// The shown top-level windows, topmost first.
    pub fn windows(&self) -> Result<Vec<WindowInfo>, DesktopError> {
        self.display.windows()
    }

    /// The popups (menus, tooltips) shown over the windows, each judged as the listed window
    /// of its application where it has one.
    pub fn popups(&self, listed: &[WindowInfo]) -> Result<Vec<WindowInfo>, DesktopError> {
        self.display.popups(listed)
    }

    /// The window input at `(x, y)` reaches now (see [`display::Display::window_at`]).
    pub fn window_at(
        &self,
        listed: &[WindowInfo],
        x: i32,
        y: i32,
    ) -> Result<Option<WindowInfo>, DesktopError> {
        self.display.window_at(listed, x, y)
    }

    /// The window that has the keyboard focus now.
    pub fn focused_window(
        &self,
        listed: &[WindowInfo],
    ) -> Result<Option<WindowInfo>, DesktopError> {
        self.display.focused_window(listed)
    }

    /// Captures `area` of the screen.
    pub fn capture(&self, area: Rect) -> Result<Capture, DesktopError> {
        self.display.capture(area)
    }

    /// Where the pointer is.
    pub fn pointer(&self) -> Result<(i32, i32), DesktopError> {
        self.display.pointer()
    }

    /// Whether a key is held down (by someone at the keyboard: gantry releases what it
    /// presses within the step).
    pub fn keys_held(&self) -> Result<bool, DesktopError> {
        self.display.keys_held()
    }

    /// Moves the pointer.
    pub fn move_to(&self, x: i32, y: i32) -> Result<(), DesktopError> {
        self.display.move_to(x, y)
    }

    /// Presses or releases a button where the pointer is.
    pub fn button(&self, b: Button, down: bool) -> Result<(), DesktopError> {
        self.display.button(b, down)
    }

    /// Turns the wheel.
    pub fn wheel(&self, dx: i32, dy: i32) -> Result<(), DesktopError> {
        self.display.wheel(dx, dy)
    }

    /// Types text.
    pub fn type_text(&self, text: &str) -> Result<(), DesktopError> {
        self.display.type_text(text)
    }

    /// Presses a chord.
    pub fn chord(&self, keys: &[Key]) -> Result<(), DesktopError> {
        self.display.chord(keys)
    }

    /// Raises and focuses a window.
    pub fn activate(&self, id: u64) -> Result<(), DesktopError> {
        self.display.activate(id)
    }

    /// A window's UI controls.
    pub async fn controls(
        &self,
        window: &WindowInfo,
        max: usize,
    ) -> Result<Vec<Control>, DesktopError> {
        self.a11y.controls(window, max).await
    }

    /// Where a control is now (`None`: it has no size), or why it cannot be used.
    pub async fn locate(&self, h: &ControlHandle) -> Result<Option<Rect>, DesktopError> {
        self.a11y.locate(h).await
    }

    /// Runs a control's default action.
    pub async fn press(&self, h: &ControlHandle) -> Result<String, DesktopError> {
        self.a11y.press(h).await
    }

    /// Sets a control's text or value; says which.
    pub async fn set_value(
        &self,
        h: &ControlHandle,
        text: &str,
        editable: bool,
    ) -> Result<&'static str, DesktopError> {
        self.a11y.set_value(h, text, editable).await
    }

    /// Focuses a control.
    pub async fn focus_control(&self, h: &ControlHandle) -> Result<(), DesktopError> {
        self.a11y.focus(h).await
    }
}
