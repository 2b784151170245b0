//! The clipboard, through one long-lived arboard owner: on X11 what gantry copies is served
//! by this process, so it stays pasteable only while the owner lives.

use std::sync::Mutex;

use crate::DesktopError;

/// The clipboard, opened on first use.
#[derive(Default)]
pub struct Clipboard {
    slot: Mutex<Option<arboard::Clipboard>>,
}

impl std::fmt::Debug for Clipboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clipboard").finish_non_exhaustive()
    }
}

impl Clipboard {
    fn with<T>(
        &self,
        f: impl FnOnce(&mut arboard::Clipboard) -> Result<T, arboard::Error>,
    ) -> Result<T, DesktopError> {
        let mut slot = self
            .slot
            .lock()
            .map_err(|_| DesktopError::Failed("clipboard lock poisoned".into()))?;
        if slot.is_none() {
            *slot = Some(
                arboard::Clipboard::new()
                    .map_err(|e| DesktopError::Failed(format!("clipboard: {e}")))?,
            );
        }
        let Some(c) = slot.as_mut() else {
            return Err(DesktopError::Failed("clipboard: not open".into()));
        };
        f(c).map_err(|e| match e {
            arboard::Error::ContentNotAvailable => {
                DesktopError::Gone("the clipboard holds no text".into())
            }
            e => DesktopError::Failed(format!("clipboard: {e}")),
        })
    }

    /// The clipboard's text; `None` when it holds none (empty, or only an image or files).
    pub fn read(&self) -> Result<Option<String>, DesktopError> {
        match self.with(|c| c.get_text()) {
            Ok(t) => Ok(Some(t)),
            Err(DesktopError::Gone(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces the clipboard's contents with `text`.
    pub fn write(&self, text: &str) -> Result<(), DesktopError> {
        self.with(|c| c.set_text(text))
    }
}
