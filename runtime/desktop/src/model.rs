//! The platform-neutral shapes of what a desktop holds: rectangles, windows, controls.

/// A rectangle in screen pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rect {
    /// Left edge.
    pub x: i32,
    /// Top edge.
    pub y: i32,
    /// Width.
    pub w: u32,
    /// Height.
    pub h: u32,
}

impl Rect {
    /// Whether `(x, y)` lies inside.
    pub fn contains(&self, x: i32, y: i32) -> bool {
        let (dx, dy) = (
            i64::from(x) - i64::from(self.x),
            i64::from(y) - i64::from(self.y),
        );
        dx >= 0 && dy >= 0 && dx < i64::from(self.w) && dy < i64::from(self.h)
    }

    /// The part of `self` inside `other`, if any.
    pub fn intersect(&self, other: &Rect) -> Option<Rect> {
        let x0 = i64::from(self.x).max(i64::from(other.x));
        let y0 = i64::from(self.y).max(i64::from(other.y));
        let x1 =
            (i64::from(self.x) + i64::from(self.w)).min(i64::from(other.x) + i64::from(other.w));
        let y1 =
            (i64::from(self.y) + i64::from(self.h)).min(i64::from(other.y) + i64::from(other.h));
        if x1 <= x0 || y1 <= y0 {
            return None;
        }
        Some(Rect {
            x: i32::try_from(x0).ok()?,
            y: i32::try_from(y0).ok()?,
            w: u32::try_from(x1 - x0).ok()?,
            h: u32::try_from(y1 - y0).ok()?,
        })
    }

    /// The centre point.
    pub fn centre(&self) -> (i32, i32) {
        let half = |v: u32| i32::try_from(v / 2).unwrap_or(i32::MAX);
        (
            self.x.saturating_add(half(self.w)),
            self.y.saturating_add(half(self.h)),
        )
    }
}

impl std::fmt::Display for Rect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{} at {},{}", self.w, self.h, self.x, self.y)
    }
}

/// A top-level window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowInfo {
    /// The platform's id (an X window id, an HWND).
    pub id: u64,
    /// Its title.
    pub title: String,
    /// The application it belongs to (X11: the WM_CLASS instance name).
    pub app: String,
    /// The process that owns it, when known.
    pub pid: Option<u32>,
    /// Where it is on the screen (its client area).
    pub rect: Rect,
    /// Its whole extent with the window manager's decorations (title bar, borders): what
    /// a click there reaches.
    pub frame: Rect,
    /// Whether it has the input focus.
    pub focused: bool,
}

impl WindowInfo {
    /// The window manager's decorations around `rect`: left, right, top, bottom.
    pub fn framed(rect: Rect, (left, right, top, bottom): (u32, u32, u32, u32)) -> Rect {
        let i = |v: u32| i32::try_from(v).unwrap_or(0);
        Rect {
            x: rect.x.saturating_sub(i(left)),
            y: rect.y.saturating_sub(i(top)),
            w: rect.w.saturating_add(left).saturating_add(right),
            h: rect.h.saturating_add(top).saturating_add(bottom),
        }
    }

    /// The id as the model sees it.
    pub fn handle(&self) -> String {
        window_handle(self.id)
    }
}

/// The id of window `id` as the model sees it (`0x1a00007`).
pub fn window_handle(id: u64) -> String {
    format!("{id:#x}")
}

/// The window id in `handle`, as [`window_handle`] writes it (decimal accepted too).
pub fn parse_window_handle(handle: &str) -> Option<u64> {
    let h = handle.trim();
    match h.strip_prefix("0x").or_else(|| h.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => h.parse().ok(),
    }
}

/// Pixels of a screen area, as captured.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The pixels.
    pub image: image::RgbaImage,
    /// The screen area they show.
    pub area: Rect,
}

/// A mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Button {
    /// The primary button.
    Left,
    /// The wheel button.
    Middle,
    /// The secondary button.
    Right,
}

/// One UI control of a window, as a snapshot saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    /// Depth below the window (0 = its direct children that are shown).
    pub depth: usize,
    /// Its role (`push button`, `text`, `check box`...).
    pub role: String,
    /// Its accessible name.
    pub name: String,
    /// Its text or value, for controls that hold one (cut).
    pub value: Option<String>,
    /// Notable states (`focused`, `checked`, `disabled`...).
    pub states: Vec<&'static str>,
    /// Where it is on the screen.
    pub rect: Option<Rect>,
    /// What can be done to it: `press` (an action), `set` (editable text or a value).
    pub can_press: bool,
    /// Whether `set_value` can set it.
    pub can_set: bool,
    /// How the backend finds it again.
    pub handle: ControlHandle,
}

/// A backend's address of a control: only valid for the snapshot that produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlHandle {
    /// The owning application's bus name (AT-SPI) or runtime id (UIA).
    pub owner: String,
    /// The object path (AT-SPI) or an index into the live element table (UIA).
    pub path: String,
}

/// Characters of a control's value shown in a snapshot.
pub const VALUE_CHARS: usize = 120;

/// A control's value as a snapshot shows it: at most [`VALUE_CHARS`] characters, control
/// characters as spaces, a cut marked with `…`.
pub fn shown_value(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(VALUE_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > VALUE_CHARS {
        out.push('…');
    }
    out
}
