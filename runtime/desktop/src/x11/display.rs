//! The X server: windows through EWMH, pixels through GetImage, input through XTEST. One
//! connection for the server's life; every call is a short round trip (a 1280×800 capture is
//! one 4 MB reply).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::xproto::{
    self, AtomEnum, ClientMessageEvent, ConnectionExt as _, EventMask, ImageFormat, ImageOrder,
    MapState, Window,
};
use x11rb::protocol::xtest::{self, ConnectionExt as _};
use x11rb::rust_connection::RustConnection;

use crate::DesktopError;
use crate::keys::{Key, Named};
use crate::model::{Button, Capture, Rect, WindowInfo};

fn failed(what: &str) -> impl FnOnce(String) -> DesktopError + '_ {
    move |e| DesktopError::Failed(format!("X server: {what}: {e}"))
}

macro_rules! x {
    ($what:expr, $e:expr) => {
        $e.map_err(|e| e.to_string()).map_err(failed($what))?
    };
}

/// The atoms gantry reads or sends.
struct Atoms {
    client_list_stacking: u32,
    client_list: u32,
    active_window: u32,
    wm_name: u32,
    utf8_string: u32,
    wm_pid: u32,
    wm_state: u32,
    wm_state_hidden: u32,
    frame_extents: u32,
}

impl Atoms {
    fn intern(conn: &RustConnection) -> Result<Atoms, DesktopError> {
        let names: [&[u8]; 9] = [
            b"_NET_CLIENT_LIST_STACKING",
            b"_NET_CLIENT_LIST",
            b"_NET_ACTIVE_WINDOW",
            b"_NET_WM_NAME",
            b"UTF8_STRING",
            b"_NET_WM_PID",
            b"_NET_WM_STATE",
            b"_NET_WM_STATE_HIDDEN",
            b"_NET_FRAME_EXTENTS",
        ];
        // All requests first, then the replies: one round trip's latency, not eight.
        let mut cookies = Vec::with_capacity(names.len());
        for n in names {
            cookies.push(x!("intern atom", conn.intern_atom(false, n)));
        }
        let mut atoms = Vec::with_capacity(names.len());
        for c in cookies {
            atoms.push(x!("intern atom", c.reply()).atom);
        }
        Ok(Atoms {
            client_list_stacking: atoms[0],
            client_list: atoms[1],
            active_window: atoms[2],
            wm_name: atoms[3],
            utf8_string: atoms[4],
            wm_pid: atoms[5],
            wm_state: atoms[6],
            wm_state_hidden: atoms[7],
            frame_extents: atoms[8],
        })
    }
}

/// Keysym → (keycode, shift needed), and the keycodes no keysym uses (lent to characters the
/// keyboard map lacks while they are typed).
struct Keymap {
    per: u8,
    by_keysym: HashMap<u32, (u8, bool)>,
    spare: Vec<u8>,
}

/// How long a client is given to see a changed keyboard mapping before a key lent to a
/// character is pressed (GTK reads the change from its event queue).
const REMAP_SETTLE: Duration = Duration::from_millis(25);

/// The keysym that types `c` (Latin-1 directly, the rest as Unicode keysyms).
fn char_keysym(c: char) -> u32 {
    let u = c as u32;
    match u {
        0x20..=0x7e | 0xa0..=0xff => u,
        _ => 0x0100_0000 + u,
    }
}

fn named_keysym(n: Named) -> u32 {
    match n {
        Named::Ctrl => 0xffe3,
        Named::Shift => 0xffe1,
        Named::Alt => 0xffe9,
        Named::Super => 0xffeb,
        Named::Enter => 0xff0d,
        Named::Tab => 0xff09,
        Named::Escape => 0xff1b,
        Named::Backspace => 0xff08,
        Named::Delete => 0xffff,
        Named::Insert => 0xff63,
        Named::Home => 0xff50,
        Named::End => 0xff57,
        Named::PageUp => 0xff55,
        Named::PageDown => 0xff56,
        Named::Up => 0xff52,
        Named::Down => 0xff54,
        Named::Left => 0xff51,
        Named::Right => 0xff53,
        Named::Space => 0x20,
        Named::Menu => 0xff67,
        Named::F(k) => 0xffbe + u32::from(k.saturating_sub(1)),
    }
}

/// The X display gantry was started on.
pub struct Display {
    conn: RustConnection,
    root: Window,
    screen: Rect,
    atoms: Atoms,
    keymap: Mutex<Keymap>,
}

impl std::fmt::Debug for Display {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Display")
            .field("screen", &self.screen)
            .finish_non_exhaustive()
    }
}

impl Display {
    /// Connects to `$DISPLAY` and checks what the backend needs: XTEST, 32-bit LSB pixels.
    pub fn connect() -> Result<Display, DesktopError> {
        let display = std::env::var_os("DISPLAY").filter(|d| !d.is_empty());
        if display.is_none() {
            let why = if std::env::var_os("WAYLAND_DISPLAY").is_some() {
                "a Wayland session without XWayland (DISPLAY is not set); gantry drives X11 desktops only"
            } else {
                "DISPLAY is not set"
            };
            return Err(DesktopError::Unavailable(why.into()));
        }
        if std::env::var("XDG_SESSION_TYPE").is_ok_and(|t| t == "wayland") {
            // Through XWayland gantry would see only X11 windows: native Wayland ones would be
            // invisible to every check that decides where input goes.
            return Err(DesktopError::Unavailable(
                "a Wayland session (XDG_SESSION_TYPE=wayland): its native windows are invisible to X11, so gantry does not drive it".into(),
            ));
        }
        let (conn, n) = x11rb::connect(None).map_err(|e| {
            DesktopError::Unavailable(format!("cannot connect to the X display: {e}"))
        })?;
        let setup = conn.setup();
        let Some(screen) = setup.roots.get(n) else {
            return Err(DesktopError::Unavailable(format!(
                "the X display has no screen {n}"
            )));
        };
        let bpp = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == screen.root_depth)
            .map(|f| f.bits_per_pixel);
        if !(matches!(screen.root_depth, 24 | 32)
            && bpp == Some(32)
            && setup.image_byte_order == ImageOrder::LSB_FIRST)
        {
            return Err(DesktopError::Unavailable(format!(
                "the X screen's pixel format (depth {}, {bpp:?} bits a pixel) is not one gantry captures",
                screen.root_depth
            )));
        }
        let has_xtest = conn
            .extension_information(xtest::X11_EXTENSION_NAME)
            .map_err(|e| DesktopError::Unavailable(format!("X server: {e}")))?
            .is_some();
        if !has_xtest {
            return Err(DesktopError::Unavailable(
                "the X server lacks the XTEST extension gantry sends input through".into(),
            ));
        }
        let root = screen.root;
        let rect = Rect {
            x: 0,
            y: 0,
            w: u32::from(screen.width_in_pixels),
            h: u32::from(screen.height_in_pixels),
        };
        let atoms = Atoms::intern(&conn)?;
        let keymap = read_keymap(&conn)?;
        Ok(Display {
            conn,
            root,
            screen: rect,
            atoms,
            keymap: Mutex::new(keymap),
        })
    }

    /// The whole screen.
    pub fn screen(&self) -> Rect {
        self.screen
    }

    fn window_list(&self) -> Result<Vec<Window>, DesktopError> {
        for atom in [self.atoms.client_list_stacking, self.atoms.client_list] {
            let r = x!(
                "window list",
                x!(
                    "window list",
                    self.conn
                        .get_property(false, self.root, atom, AtomEnum::WINDOW, 0, 4096)
                )
                .reply()
            );
            if let Some(ids) = r.value32() {
                let ids: Vec<Window> = ids.collect();
                if !ids.is_empty() {
                    return Ok(ids);
                }
            }
        }
        // No EWMH window manager: the root's children, bottom to top.
        let tree = x!(
            "window tree",
            x!("window tree", self.conn.query_tree(self.root)).reply()
        );
        Ok(tree.children)
    }

    fn active(&self) -> Option<Window> {
        let r = self
            .conn
            .get_property(
                false,
                self.root,
                self.atoms.active_window,
                AtomEnum::WINDOW,
                0,
                1,
            )
            .ok()?
            .reply()
            .ok()?;
        r.value32()?.next().filter(|w| *w != 0)
    }

    /// The top-level windows that are shown, topmost first.
    pub fn windows(&self) -> Result<Vec<WindowInfo>, DesktopError> {
        let ids = self.window_list()?;
        let active = self.active();
        let mut out = Vec::with_capacity(ids.len());
        // Every request for every window first; then the replies.
        let mut pending = Vec::with_capacity(ids.len());
        for &w in &ids {
            let c = &self.conn;
            let a = &self.atoms;
            pending.push((
                w,
                c.get_window_attributes(w),
                c.get_geometry(w),
                c.translate_coordinates(w, self.root, 0, 0),
                c.get_property(false, w, a.wm_name, a.utf8_string, 0, 256),
                c.get_property(false, w, AtomEnum::WM_NAME, AtomEnum::ANY, 0, 256),
                c.get_property(false, w, AtomEnum::WM_CLASS, AtomEnum::STRING, 0, 64),
                c.get_property(false, w, a.wm_pid, AtomEnum::CARDINAL, 0, 1),
                c.get_property(false, w, a.wm_state, AtomEnum::ATOM, 0, 32),
                c.get_property(false, w, a.frame_extents, AtomEnum::CARDINAL, 0, 4),
            ));
        }
        for (w, attrs, geom, at, name, old_name, class, pid, state, extents) in pending {
            // A window that closed meanwhile has no replies: it is simply not listed.
            let (Ok(attrs), Ok(geom), Ok(at)) = (attrs, geom, at) else {
                continue;
            };
            let (Ok(attrs), Ok(geom), Ok(at)) = (attrs.reply(), geom.reply(), at.reply()) else {
                continue;
            };
            if attrs.map_state != MapState::VIEWABLE {
                continue;
            }
            let hidden = state
                .ok()
                .and_then(|c| c.reply().ok())
                .and_then(|r| {
                    r.value32()
                        .map(|mut v| v.any(|s| s == self.atoms.wm_state_hidden))
                })
                .unwrap_or(false);
            if hidden {
                continue;
            }
            let text = |c: Result<x11rb::cookie::Cookie<'_, _, xproto::GetPropertyReply>, _>| {
                c.ok()
                    .and_then(|c| c.reply().ok())
                    .map(|r: xproto::GetPropertyReply| {
                        String::from_utf8_lossy(&r.value).into_owned()
                    })
                    .filter(|s| !s.is_empty())
            };
            let title = text(name).or_else(|| text(old_name)).unwrap_or_default();
            let app = class
                .ok()
                .and_then(|c| c.reply().ok())
                .and_then(|r| {
                    r.value
                        .split(|b| *b == 0)
                        .next()
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                })
                .unwrap_or_default();
            let pid = pid
                .ok()
                .and_then(|c| c.reply().ok())
                .and_then(|r| r.value32().and_then(|mut v| v.next()));
            let rect = Rect {
                x: i32::from(at.dst_x),
                y: i32::from(at.dst_y),
                w: u32::from(geom.width),
                h: u32::from(geom.height),
            };
            let extents: Vec<u32> = extents
                .ok()
                .and_then(|c| c.reply().ok())
                .and_then(|r| r.value32().map(Iterator::collect))
                .unwrap_or_default();
            let frame = match extents[..] {
                [l, r, t, b] => WindowInfo::framed(rect, (l, r, t, b)),
                _ => rect,
            };
            out.push(WindowInfo {
                id: u64::from(w),
                title: title.chars().filter(|c| !c.is_control()).collect(),
                app,
                pid,
                rect,
                frame,
                focused: active == Some(w),
            });
        }
        out.reverse();
        Ok(out)
    }

    /// The listed window that top-level window `top` is, or holds: a window manager puts
    /// each client in a frame, a level or two down.
    fn listed_in(
        &self,
        listed: &[WindowInfo],
        top: Window,
    ) -> Result<Option<WindowInfo>, DesktopError> {
        let mut level = vec![top];
        for _ in 0..3 {
            if let Some(w) = listed
                .iter()
                .find(|l| level.iter().any(|t| u64::from(*t) == l.id))
            {
                return Ok(Some(w.clone()));
            }
            let mut next = Vec::new();
            for t in level.iter().take(16) {
                let tree = x!(
                    "window tree",
                    x!("window tree", self.conn.query_tree(*t)).reply()
                );
                next.extend(tree.children);
            }
            level = next;
        }
        Ok(None)
    }

    /// The listed window made by the same X client as `t`: window ids are allocated from
    /// their client's id base, so a popup menu or tooltip shares its application's base
    /// whatever its own class says (Tk's menus call themselves `Menu`).
    fn owner_of(&self, listed: &[WindowInfo], t: Window) -> Option<WindowInfo> {
        let client = |id: u64| id & !u64::from(self.conn.setup().resource_id_mask);
        let base = client(u64::from(t));
        listed.iter().find(|l| client(l.id) == base).cloned()
    }

    /// `t` as a window the list does not hold (a menu, a tooltip, a launcher): as the listed
    /// window of the same client when there is one (so a policy on an application holds for
    /// its menus), else its own title, class and process, or its first child's that has them.
    fn unlisted(&self, listed: &[WindowInfo], t: Window) -> Result<WindowInfo, DesktopError> {
        // A top-level window's geometry is in root coordinates, its corner the border's
        // outer one, its size the inside's: the border (Tk's and Xt's menus draw one) is
        // part of what shows.
        let geom = x!(
            "geometry",
            x!("geometry", self.conn.get_geometry(t)).reply()
        );
        let border = 2 * u32::from(geom.border_width);
        let rect = Rect {
            x: i32::from(geom.x),
            y: i32::from(geom.y),
            w: u32::from(geom.width) + border,
            h: u32::from(geom.height) + border,
        };
        if let Some(owner) = self.owner_of(listed, t) {
            return Ok(WindowInfo {
                id: u64::from(t),
                rect,
                frame: rect,
                focused: false,
                ..owner
            });
        }
        let mut candidates = vec![t];
        if let Ok(tree) = self
            .conn
            .query_tree(t)
            .map_err(|e| e.to_string())
            .and_then(|c| c.reply().map_err(|e| e.to_string()))
        {
            candidates.extend(tree.children.into_iter().take(8));
        }
        for w in candidates {
            let class = x!(
                "window class",
                x!(
                    "window class",
                    self.conn
                        .get_property(false, w, AtomEnum::WM_CLASS, AtomEnum::STRING, 0, 64)
                )
                .reply()
            );
            let Some(app) = class
                .value
                .split(|b| *b == 0)
                .next()
                .filter(|s| !s.is_empty())
            else {
                continue;
            };
            let pid = self
                .conn
                .get_property(false, w, self.atoms.wm_pid, AtomEnum::CARDINAL, 0, 1)
                .ok()
                .and_then(|c| c.reply().ok())
                .and_then(|r| r.value32().and_then(|mut v| v.next()));
            return Ok(WindowInfo {
                id: u64::from(t),
                title: String::new(),
                app: String::from_utf8_lossy(app).into_owned(),
                pid,
                rect,
                frame: rect,
                focused: false,
            });
        }
        Ok(WindowInfo {
            id: u64::from(t),
            title: String::new(),
            app: String::new(),
            pid: None,
            rect,
            frame: rect,
            focused: false,
        })
    }

    /// The windows drawn over the listed ones without a window manager's say (menus,
    /// tooltips, drop-downs: mapped override-redirect children of the root), each judged as
    /// [`Self::unlisted`] judges it, topmost first.
    pub fn popups(&self, listed: &[WindowInfo]) -> Result<Vec<WindowInfo>, DesktopError> {
        let tree = x!(
            "window tree",
            x!("window tree", self.conn.query_tree(self.root)).reply()
        );
        let pending: Vec<_> = tree
            .children
            .iter()
            .map(|&w| (w, self.conn.get_window_attributes(w)))
            .collect();
        let mut out = Vec::new();
        for (w, attrs) in pending {
            let Some(attrs) = attrs.ok().and_then(|c| c.reply().ok()) else {
                continue;
            };
            // An input-only window (a drag proxy, an overlay catching clicks) draws nothing.
            if attrs.override_redirect
                && attrs.map_state == MapState::VIEWABLE
                && attrs.class != xproto::WindowClass::INPUT_ONLY
            {
                // One that closed meanwhile is simply not there.
                if let Ok(info) = self.unlisted(listed, w) {
                    out.push(info);
                }
            }
        }
        out.reverse();
        Ok(out)
    }

    /// The window that input at `(x, y)` reaches now: a listed window when the point is in
    /// one (decorations included), else whatever top-level window is there (its app read
    /// from its class), `None` over the bare desktop.
    pub fn window_at(
        &self,
        listed: &[WindowInfo],
        x: i32,
        y: i32,
    ) -> Result<Option<WindowInfo>, DesktopError> {
        let to16 = |v: i32| i16::try_from(v).unwrap_or(if v < 0 { i16::MIN } else { i16::MAX });
        let r = x!(
            "window at a point",
            x!(
                "window at a point",
                self.conn
                    .translate_coordinates(self.root, self.root, to16(x), to16(y))
            )
            .reply()
        );
        if r.child == x11rb::NONE {
            return Ok(None);
        }
        match self.listed_in(listed, r.child)? {
            Some(w) => Ok(Some(w)),
            None => self.unlisted(listed, r.child).map(Some),
        }
    }

    /// The window that has the keyboard focus: the listed window the focus lies in, or (as
    /// an unlisted window) the top-level window holding it; `None` when nothing has it.
    pub fn focused_window(
        &self,
        listed: &[WindowInfo],
    ) -> Result<Option<WindowInfo>, DesktopError> {
        let f = x!("focus", x!("focus", self.conn.get_input_focus()).reply()).focus;
        // 0 is None and 1 is PointerRoot: no window holds the focus.
        if f <= 1 || f == self.root {
            return Ok(None);
        }
        let mut w = f;
        for _ in 0..32 {
            if let Some(found) = listed.iter().find(|l| l.id == u64::from(w)) {
                return Ok(Some(found.clone()));
            }
            let t = x!(
                "window tree",
                x!("window tree", self.conn.query_tree(w)).reply()
            );
            if t.parent == self.root || t.parent == x11rb::NONE {
                // A frame holds the focus for its client: the listed window inside it.
                if let Some(l) = self.listed_in(listed, w)? {
                    return Ok(Some(l));
                }
                return self.unlisted(listed, w).map(Some);
            }
            w = t.parent;
        }
        Ok(None)
    }

    /// Captures `area` of the screen (clipped to it).
    pub fn capture(&self, area: Rect) -> Result<Capture, DesktopError> {
        let Some(area) = area.intersect(&self.screen) else {
            return Err(DesktopError::Gone(format!("{area} lies off the screen")));
        };
        let to16 = |v: i64| {
            i16::try_from(v)
                .map_err(|_| DesktopError::Input(format!("{area} is beyond X11's coordinates")))
        };
        let (x, y) = (to16(i64::from(area.x))?, to16(i64::from(area.y))?);
        let (w, h) = (
            u16::try_from(area.w).unwrap_or(u16::MAX),
            u16::try_from(area.h).unwrap_or(u16::MAX),
        );
        let reply = x!(
            "capture",
            x!(
                "capture",
                self.conn
                    .get_image(ImageFormat::Z_PIXMAP, self.root, x, y, w, h, !0)
            )
            .reply()
        );
        let need = usize::from(w) * usize::from(h) * 4;
        if reply.data.len() < need {
            return Err(DesktopError::Failed(format!(
                "X server: capture returned {} bytes for {w}x{h}",
                reply.data.len()
            )));
        }
        let mut rgba = reply.data;
        rgba.truncate(need);
        // BGRX → RGBA in place.
        for p in rgba.chunks_exact_mut(4) {
            p.swap(0, 2);
            p[3] = 255;
        }
        let image =
            image::RgbaImage::from_raw(u32::from(w), u32::from(h), rgba).ok_or_else(|| {
                DesktopError::Failed("capture: pixel buffer of the wrong size".into())
            })?;
        Ok(Capture {
            image,
            area: Rect {
                x: area.x,
                y: area.y,
                w: u32::from(w),
                h: u32::from(h),
            },
        })
    }

    /// Where the pointer is.
    pub fn pointer(&self) -> Result<(i32, i32), DesktopError> {
        let r = x!(
            "pointer",
            x!("pointer", self.conn.query_pointer(self.root)).reply()
        );
        Ok((i32::from(r.root_x), i32::from(r.root_y)))
    }

    /// Whether any key is held down.
    pub fn keys_held(&self) -> Result<bool, DesktopError> {
        let r = x!("keyboard", x!("keyboard", self.conn.query_keymap()).reply());
        Ok(r.keys.iter().any(|b| *b != 0))
    }

    fn fake(&self, kind: u8, detail: u8, x: i32, y: i32) -> Result<(), DesktopError> {
        let clamp = |v: i32| i16::try_from(v.clamp(0, i32::from(i16::MAX))).unwrap_or(i16::MAX);
        x!(
            "input",
            self.conn.xtest_fake_input(
                kind,
                detail,
                x11rb::CURRENT_TIME,
                self.root,
                clamp(x),
                clamp(y),
                0
            )
        );
        Ok(())
    }

    /// Waits until the server has handled everything sent so far.
    pub fn sync(&self) -> Result<(), DesktopError> {
        x!("sync", x!("sync", self.conn.get_input_focus()).reply());
        Ok(())
    }

    /// Moves the pointer to `(x, y)`.
    pub fn move_to(&self, x: i32, y: i32) -> Result<(), DesktopError> {
        self.fake(xproto::MOTION_NOTIFY_EVENT, 0, x, y)?;
        self.sync()
    }

    fn button_code(b: Button) -> u8 {
        match b {
            Button::Left => 1,
            Button::Middle => 2,
            Button::Right => 3,
        }
    }

    /// Presses or releases `button` where the pointer is.
    pub fn button(&self, b: Button, down: bool) -> Result<(), DesktopError> {
        let kind = if down {
            xproto::BUTTON_PRESS_EVENT
        } else {
            xproto::BUTTON_RELEASE_EVENT
        };
        self.fake(kind, Self::button_code(b), 0, 0)?;
        self.sync()
    }

    /// Turns the wheel `dy` clicks down (negative: up) and `dx` right (negative: left).
    pub fn wheel(&self, dx: i32, dy: i32) -> Result<(), DesktopError> {
        let taps = |n: i32, neg: u8, pos: u8| -> Result<(), DesktopError> {
            let b = if n < 0 { neg } else { pos };
            for _ in 0..n.unsigned_abs().min(50) {
                self.fake(xproto::BUTTON_PRESS_EVENT, b, 0, 0)?;
                self.fake(xproto::BUTTON_RELEASE_EVENT, b, 0, 0)?;
            }
            Ok(())
        };
        taps(dy, 4, 5)?;
        taps(dx, 6, 7)?;
        self.sync()
    }

    fn key(&self, code: u8, down: bool) -> Result<(), DesktopError> {
        let kind = if down {
            xproto::KEY_PRESS_EVENT
        } else {
            xproto::KEY_RELEASE_EVENT
        };
        self.fake(kind, code, 0, 0)
    }

    /// Presses a chord: modifiers held in order, the last key tapped, all released in reverse.
    pub fn chord(&self, keys: &[Key]) -> Result<(), DesktopError> {
        let map = self
            .keymap
            .lock()
            .map_err(|_| DesktopError::Failed("keyboard map lock poisoned".into()))?;
        let shift = map.by_keysym.get(&named_keysym(Named::Shift)).map(|k| k.0);
        let mut codes: Vec<u8> = Vec::new();
        for key in keys {
            let (keysym, what) = match key {
                Key::Named(n) => (named_keysym(*n), format!("{n:?}")),
                // A letter in a chord means its key (ctrl+T is ctrl+t); shift is said apart.
                Key::Char(c) => (
                    char_keysym(c.to_lowercase().next().unwrap_or(*c)),
                    format!("`{c}`"),
                ),
            };
            let Some(&(code, needs_shift)) = map.by_keysym.get(&keysym) else {
                return Err(DesktopError::Input(format!(
                    "the keyboard map has no key for {what}"
                )));
            };
            if let (true, Some(s)) = (needs_shift, shift.filter(|s| !codes.contains(s))) {
                codes.push(s);
            }
            codes.push(code);
        }
        for c in &codes {
            self.key(*c, true)?;
        }
        for c in codes.iter().rev() {
            self.key(*c, false)?;
        }
        self.sync()
    }

    /// Types `text` (any Unicode): characters the keyboard map lacks are typed through spare
    /// keycodes lent to them for the while.
    pub fn type_text(&self, text: &str) -> Result<(), DesktopError> {
        let map = self
            .keymap
            .lock()
            .map_err(|_| DesktopError::Failed("keyboard map lock poisoned".into()))?;
        let shift = map.by_keysym.get(&named_keysym(Named::Shift)).map(|k| k.0);
        let chars: Vec<char> = text.chars().collect();
        let mut start = 0;
        while start < chars.len() {
            // One run: as many characters as the spare keycodes can cover at once.
            let mut lent: HashMap<u32, u8> = HashMap::new();
            let mut end = start;
            while end < chars.len() {
                let ks = match chars[end] {
                    '\n' => named_keysym(Named::Enter),
                    '\t' => named_keysym(Named::Tab),
                    c if c.is_control() => {
                        return Err(DesktopError::Input(format!(
                            "text: control character U+{:04X} cannot be typed (use keypress)",
                            c as u32
                        )));
                    }
                    c => char_keysym(c),
                };
                if !map.by_keysym.contains_key(&ks) && !lent.contains_key(&ks) {
                    if lent.len() == map.spare.len() {
                        if lent.is_empty() {
                            return Err(DesktopError::Failed(
                                "the keyboard map has no spare keycode to type this character with"
                                    .into(),
                            ));
                        }
                        break;
                    }
                    let code = map.spare[lent.len()];
                    lent.insert(ks, code);
                }
                end += 1;
            }
            if !lent.is_empty() {
                for (&ks, &code) in &lent {
                    let syms = vec![ks; usize::from(map.per)];
                    x!(
                        "keyboard map",
                        self.conn.change_keyboard_mapping(1, code, map.per, &syms)
                    );
                }
                self.sync()?;
                std::thread::sleep(REMAP_SETTLE);
            }
            for &c in &chars[start..end] {
                let ks = match c {
                    '\n' => named_keysym(Named::Enter),
                    '\t' => named_keysym(Named::Tab),
                    c => char_keysym(c),
                };
                let (code, needs_shift) = match lent.get(&ks) {
                    Some(&code) => (code, false),
                    None => map.by_keysym.get(&ks).copied().unwrap_or((0, false)),
                };
                if code == 0 {
                    continue;
                }
                let shifted = needs_shift && shift.is_some();
                if let (true, Some(s)) = (shifted, shift) {
                    self.key(s, true)?;
                }
                self.key(code, true)?;
                self.key(code, false)?;
                if let (true, Some(s)) = (shifted, shift) {
                    self.key(s, false)?;
                }
            }
            self.sync()?;
            if !lent.is_empty() {
                // Give the keys back only once the client has read them under the lent map.
                std::thread::sleep(REMAP_SETTLE);
                let empty = vec![0u32; usize::from(map.per)];
                for &code in lent.values() {
                    x!(
                        "keyboard map",
                        self.conn.change_keyboard_mapping(1, code, map.per, &empty)
                    );
                }
                self.sync()?;
            }
            start = end;
        }
        Ok(())
    }

    /// Asks the window manager to raise and focus window `id` (EWMH), or sets the input focus
    /// where there is none.
    pub fn activate(&self, id: u64) -> Result<(), DesktopError> {
        let w = u32::try_from(id)
            .map_err(|_| DesktopError::Input(format!("{id:#x} is not an X window id")))?;
        let ev = ClientMessageEvent::new(32, w, self.atoms.active_window, [2u32, 0, 0, 0, 0]);
        x!(
            "focus",
            self.conn.send_event(
                false,
                self.root,
                EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
                ev
            )
        );
        if self.window_list()?.is_empty() || self.active().is_none() {
            x!(
                "focus",
                self.conn
                    .set_input_focus(xproto::InputFocus::PARENT, w, x11rb::CURRENT_TIME)
            );
        }
        self.sync()
    }
}

fn read_keymap(conn: &RustConnection) -> Result<Keymap, DesktopError> {
    let setup = conn.setup();
    let (min, max) = (setup.min_keycode, setup.max_keycode);
    let count = max.saturating_sub(min).saturating_add(1);
    let r = x!(
        "keyboard map",
        x!("keyboard map", conn.get_keyboard_mapping(min, count)).reply()
    );
    let per = r.keysyms_per_keycode;
    let mut by_keysym = HashMap::new();
    let mut spare = Vec::new();
    for (i, syms) in r.keysyms.chunks(usize::from(per.max(1))).enumerate() {
        let Ok(code) = u8::try_from(usize::from(min) + i) else {
            break;
        };
        if syms.iter().all(|s| *s == 0) {
            spare.push(code);
            continue;
        }
        // Column 0 types without shift, column 1 with it; the first keycode found wins.
        for (col, &ks) in syms.iter().take(2).enumerate() {
            if ks != 0 {
                by_keysym.entry(ks).or_insert((code, col == 1));
            }
        }
    }
    // Lend the highest spare keycodes first: low ones are where real keys sit.
    spare.reverse();
    spare.truncate(8);
    Ok(Keymap {
        per,
        by_keysym,
        spare,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_and_named_keys_have_their_keysyms() {
        assert_eq!(char_keysym('a'), 0x61);
        assert_eq!(char_keysym('é'), 0xe9);
        assert_eq!(char_keysym('€'), 0x0100_20ac);
        assert_eq!(char_keysym('😀'), 0x0101_f600);
        assert_eq!(named_keysym(Named::F(1)), 0xffbe);
        assert_eq!(named_keysym(Named::F(12)), 0xffc9);
    }
}
