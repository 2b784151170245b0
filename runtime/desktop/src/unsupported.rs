//! Platforms without a desktop backend yet: [`Desktop::connect`] says so and nothing else can
//! be reached (the type has no values), so the server masks the desktop connector there.

use crate::DesktopError;
use crate::keys::Key;
use crate::model::{Button, Capture, Control, ControlHandle, Rect, WindowInfo};

/// No desktop on this platform.
#[derive(Debug)]
pub struct Desktop {
    never: std::convert::Infallible,
}

#[allow(missing_docs, clippy::unused_async)]
impl Desktop {
    pub fn connect() -> Result<Desktop, DesktopError> {
        Err(DesktopError::Unavailable(format!(
            "gantry has no desktop backend for {} yet",
            std::env::consts::OS
        )))
    }
    pub fn describe(&self) -> String {
        match self.never {}
    }
    pub fn screen(&self) -> Rect {
        match self.never {}
    }
    pub fn windows(&self) -> Result<Vec<WindowInfo>, DesktopError> {
        match self.never {}
    }
    pub fn window_at(
        &self,
        _: &[WindowInfo],
        _: i32,
        _: i32,
    ) -> Result<Option<WindowInfo>, DesktopError> {
        match self.never {}
    }
    pub fn focused_window(&self, _: &[WindowInfo]) -> Result<Option<WindowInfo>, DesktopError> {
        match self.never {}
    }
    pub fn popups(&self, _: &[WindowInfo]) -> Result<Vec<WindowInfo>, DesktopError> {
        match self.never {}
    }
    pub fn capture(&self, _: Rect) -> Result<Capture, DesktopError> {
        match self.never {}
    }
    pub fn pointer(&self) -> Result<(i32, i32), DesktopError> {
        match self.never {}
    }
    pub fn keys_held(&self) -> Result<bool, DesktopError> {
        match self.never {}
    }
    pub fn move_to(&self, _: i32, _: i32) -> Result<(), DesktopError> {
        match self.never {}
    }
    pub fn button(&self, _: Button, _: bool) -> Result<(), DesktopError> {
        match self.never {}
    }
    pub fn wheel(&self, _: i32, _: i32) -> Result<(), DesktopError> {
        match self.never {}
    }
    pub fn type_text(&self, _: &str) -> Result<(), DesktopError> {
        match self.never {}
    }
    pub fn chord(&self, _: &[Key]) -> Result<(), DesktopError> {
        match self.never {}
    }
    pub fn activate(&self, _: u64) -> Result<(), DesktopError> {
        match self.never {}
    }
    pub async fn controls(&self, _: &WindowInfo, _: usize) -> Result<Vec<Control>, DesktopError> {
        match self.never {}
    }
    pub async fn locate(&self, _: &ControlHandle) -> Result<Option<Rect>, DesktopError> {
        match self.never {}
    }
    pub async fn press(&self, _: &ControlHandle) -> Result<String, DesktopError> {
        match self.never {}
    }
    pub async fn set_value(
        &self,
        _: &ControlHandle,
        _: &str,
        _: bool,
    ) -> Result<&'static str, DesktopError> {
        match self.never {}
    }
    pub async fn focus_control(&self, _: &ControlHandle) -> Result<(), DesktopError> {
        match self.never {}
    }
    pub fn read_clipboard(&self) -> Result<Option<String>, DesktopError> {
        match self.never {}
    }
    pub fn write_clipboard(&self, _: &str) -> Result<(), DesktopError> {
        match self.never {}
    }
}
