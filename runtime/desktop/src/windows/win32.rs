//! The Windows desktop through Win32: top-level windows (EnumWindows, in Z order), the
//! screen's pixels (BitBlt of the screen into a DIB section), and input (SendInput). The
//! process is made per-monitor DPI aware first, so every coordinate here is a physical pixel.
//!
//! Every `unsafe` block is one documented Win32 call on values this module owns.
#![allow(unsafe_code)]

use std::ffi::c_void;

use windows_sys::Win32::Foundation::{CloseHandle, HWND, LPARAM, POINT, RECT};
use windows_sys::Win32::Graphics::Dwm::{
    DWMWA_CLOAKED, DWMWA_EXTENDED_FRAME_BOUNDS, DwmGetWindowAttribute,
};
use windows_sys::Win32::Graphics::Gdi::{
    BI_RGB, BITMAPINFO, BITMAPINFOHEADER, BitBlt, CAPTUREBLT, CreateCompatibleDC, CreateDIBSection,
    DIB_RGB_COLORS, DeleteDC, DeleteObject, GetDC, ReleaseDC, SRCCOPY, SelectObject,
};
use windows_sys::Win32::System::Threading::{
    OpenProcess, PROCESS_NAME_WIN32, PROCESS_QUERY_LIMITED_INFORMATION, QueryFullProcessImageNameW,
};
use windows_sys::Win32::UI::HiDpi::{
    DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2, SetProcessDpiAwarenessContext,
};
use windows_sys::Win32::UI::Input::KeyboardAndMouse::{
    GetAsyncKeyState, INPUT, INPUT_0, INPUT_KEYBOARD, INPUT_MOUSE, KEYBDINPUT,
    KEYEVENTF_EXTENDEDKEY, KEYEVENTF_KEYUP, KEYEVENTF_UNICODE, MOUSEEVENTF_HWHEEL,
    MOUSEEVENTF_LEFTDOWN, MOUSEEVENTF_LEFTUP, MOUSEEVENTF_MIDDLEDOWN, MOUSEEVENTF_MIDDLEUP,
    MOUSEEVENTF_RIGHTDOWN, MOUSEEVENTF_RIGHTUP, MOUSEEVENTF_WHEEL, MOUSEINPUT, SendInput,
    VkKeyScanW,
};
use windows_sys::Win32::UI::WindowsAndMessaging::{
    EnumWindows, GA_ROOT, GA_ROOTOWNER, GWL_EXSTYLE, GetAncestor, GetCursorPos,
    GetForegroundWindow, GetSystemMetrics, GetWindowLongPtrW, GetWindowRect, GetWindowTextLengthW,
    GetWindowTextW, GetWindowThreadProcessId, IsIconic, IsWindowVisible, SM_CXSCREEN, SM_CYSCREEN,
    SW_RESTORE, SetCursorPos, SetForegroundWindow, ShowWindow, WS_EX_TOOLWINDOW, WindowFromPoint,
};

use crate::DesktopError;
use crate::keys::{Key, Named};
use crate::model::{Button, Capture, Rect, WindowInfo};

/// Makes coordinates physical pixels for the whole process (once; a second call fails
/// harmlessly).
pub fn dpi_aware() {
    // SAFETY: takes a predefined context constant; no pointers.
    unsafe {
        SetProcessDpiAwarenessContext(DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2);
    }
}

/// The primary screen.
pub fn screen() -> Rect {
    // SAFETY: plain metric queries.
    let (w, h) = unsafe { (GetSystemMetrics(SM_CXSCREEN), GetSystemMetrics(SM_CYSCREEN)) };
    Rect {
        x: 0,
        y: 0,
        w: w.unsigned_abs(),
        h: h.unsigned_abs(),
    }
}

unsafe extern "system" fn collect(hwnd: HWND, out: LPARAM) -> i32 {
    // SAFETY: `out` is the `&mut Vec<HWND>` `windows` passed to EnumWindows, alive for the call.
    let list = unsafe { &mut *(out as *mut Vec<HWND>) };
    list.push(hwnd);
    1
}

fn title(hwnd: HWND) -> String {
    // SAFETY: the buffer is as long as the length given.
    unsafe {
        let n = GetWindowTextLengthW(hwnd);
        if n <= 0 {
            return String::new();
        }
        let mut buf = vec![0u16; usize::try_from(n).unwrap_or(0) + 1];
        let got = GetWindowTextW(hwnd, buf.as_mut_ptr(), n + 1);
        buf.truncate(usize::try_from(got).unwrap_or(0));
        String::from_utf16_lossy(&buf)
    }
}

/// The executable's file name without its extension (`notepad`), the app Cedar sees.
fn app_of(pid: u32) -> String {
    // SAFETY: the handle is closed here; the buffer's length is passed in and updated.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            return String::new();
        }
        let mut buf = vec![0u16; 1024];
        let mut len = 1024u32;
        let ok = QueryFullProcessImageNameW(h, PROCESS_NAME_WIN32, buf.as_mut_ptr(), &mut len);
        CloseHandle(h);
        if ok == 0 {
            return String::new();
        }
        buf.truncate(len as usize);
        let path = String::from_utf16_lossy(&buf);
        let file = path.rsplit(['\\', '/']).next().unwrap_or("");
        file.strip_suffix(".exe")
            .or_else(|| file.strip_suffix(".EXE"))
            .unwrap_or(file)
            .to_lowercase()
    }
}

fn visible_rect(hwnd: HWND) -> Option<Rect> {
    let mut r = RECT {
        left: 0,
        top: 0,
        right: 0,
        bottom: 0,
    };
    // SAFETY: `r` is a RECT of the size given.
    let ok = unsafe {
        DwmGetWindowAttribute(
            hwnd,
            DWMWA_EXTENDED_FRAME_BOUNDS as u32,
            (&raw mut r).cast::<c_void>(),
            size_of::<RECT>() as u32,
        ) == 0
            || GetWindowRect(hwnd, &mut r) != 0
    };
    ok.then(|| Rect {
        x: r.left,
        y: r.top,
        w: (r.right - r.left).unsigned_abs(),
        h: (r.bottom - r.top).unsigned_abs(),
    })
}

fn cloaked(hwnd: HWND) -> bool {
    let mut c: u32 = 0;
    // SAFETY: `c` is a u32, the attribute's size.
    unsafe {
        DwmGetWindowAttribute(hwnd, DWMWA_CLOAKED as u32, (&raw mut c).cast::<c_void>(), 4) == 0
            && c != 0
    }
}

/// The shown, titled top-level windows, topmost first (EnumWindows walks the Z order).
pub fn windows() -> Vec<WindowInfo> {
    let mut all: Vec<HWND> = Vec::new();
    // SAFETY: the callback only pushes into `all`, which outlives the call.
    unsafe {
        EnumWindows(Some(collect), (&raw mut all) as LPARAM);
    }
    // SAFETY: a query without arguments.
    let foreground = unsafe { GetForegroundWindow() };
    let mut out = Vec::new();
    for hwnd in all {
        // SAFETY: queries on a window handle; a handle gone meanwhile answers 0.
        let (shown, minimized, ex) = unsafe {
            (
                IsWindowVisible(hwnd) != 0,
                IsIconic(hwnd) != 0,
                GetWindowLongPtrW(hwnd, GWL_EXSTYLE),
            )
        };
        if !shown || minimized || ex & (WS_EX_TOOLWINDOW as isize) != 0 || cloaked(hwnd) {
            continue;
        }
        let t = title(hwnd);
        if t.is_empty() {
            continue;
        }
        let Some(rect) = visible_rect(hwnd) else {
            continue;
        };
        let mut pid = 0u32;
        // SAFETY: `pid` is a u32 out parameter.
        unsafe {
            GetWindowThreadProcessId(hwnd, &mut pid);
        }
        out.push(WindowInfo {
            id: hwnd as usize as u64,
            title: t.chars().filter(|c| !c.is_control()).collect(),
            app: app_of(pid),
            pid: (pid != 0).then_some(pid),
            rect,
            frame: rect,
            focused: hwnd == foreground,
        });
    }
    out
}

/// The shown top-level windows the list leaves out (menus, tooltips, untitled and tool
/// windows), each as [`resolve`] judges it: by the listed window that owns it, else by its
/// own process. Topmost first.
pub fn popups(listed: &[WindowInfo]) -> Vec<WindowInfo> {
    let mut all: Vec<HWND> = Vec::new();
    // SAFETY: the callback only pushes into `all`, which outlives the call.
    unsafe {
        EnumWindows(Some(collect), (&raw mut all) as LPARAM);
    }
    all.into_iter()
        .filter(|&hwnd| {
            // SAFETY: queries on a window handle; a handle gone meanwhile answers 0.
            let shown = unsafe { IsWindowVisible(hwnd) != 0 && IsIconic(hwnd) == 0 };
            shown
                && !cloaked(hwnd)
                && !listed.iter().any(|l| l.id == hwnd as usize as u64)
                && visible_rect(hwnd).is_some()
        })
        .filter_map(|hwnd| {
            // Judged as its owner, drawn where it is.
            resolve(listed, hwnd).map(|mut w| {
                let rect = visible_rect(hwnd).unwrap_or_default();
                w.id = hwnd as usize as u64;
                w.rect = rect;
                w.frame = rect;
                w.focused = false;
                w
            })
        })
        .collect()
}

/// `hwnd` as a window the list does not hold (untitled, a tool window, the taskbar).
fn unlisted(hwnd: HWND) -> WindowInfo {
    let mut pid = 0u32;
    // SAFETY: `pid` is a u32 out parameter.
    unsafe {
        GetWindowThreadProcessId(hwnd, &mut pid);
    }
    let rect = visible_rect(hwnd).unwrap_or_default();
    WindowInfo {
        id: hwnd as usize as u64,
        title: title(hwnd).chars().filter(|c| !c.is_control()).collect(),
        app: app_of(pid),
        pid: (pid != 0).then_some(pid),
        rect,
        frame: rect,
        focused: false,
    }
}

/// `hwnd` as listed, or as an unlisted window; `None` for no window.
fn resolve(listed: &[WindowInfo], hwnd: HWND) -> Option<WindowInfo> {
    if hwnd.is_null() {
        return None;
    }
    let find = |h: HWND| listed.iter().find(|l| l.id == h as usize as u64).cloned();
    // An untitled dialog or tool window belongs to the listed window that owns it.
    // SAFETY: a plain query on a window handle.
    let owner = unsafe { GetAncestor(hwnd, GA_ROOTOWNER) };
    Some(
        find(hwnd)
            .or_else(|| (!owner.is_null()).then(|| find(owner)).flatten())
            .unwrap_or_else(|| unlisted(hwnd)),
    )
}

/// The top-level window input at `(x, y)` reaches now.
pub fn window_at(listed: &[WindowInfo], x: i32, y: i32) -> Option<WindowInfo> {
    // SAFETY: plain queries; a null answer means no window.
    let top = unsafe {
        let w = WindowFromPoint(POINT { x, y });
        if w.is_null() {
            return None;
        }
        GetAncestor(w, GA_ROOT)
    };
    resolve(listed, top)
}

/// The window that has the keyboard focus (the foreground window).
pub fn focused_window(listed: &[WindowInfo]) -> Option<WindowInfo> {
    // SAFETY: a query without arguments.
    resolve(listed, unsafe { GetForegroundWindow() })
}

/// Captures `area` of the screen (clipped to it) as shown now.
pub fn capture(area: Rect) -> Result<Capture, DesktopError> {
    let Some(area) = area.intersect(&screen()) else {
        return Err(DesktopError::Gone(format!("{area} lies off the screen")));
    };
    let (w, h) = (
        i32::try_from(area.w).unwrap_or(i32::MAX),
        i32::try_from(area.h).unwrap_or(i32::MAX),
    );
    let info = BITMAPINFO {
        bmiHeader: BITMAPINFOHEADER {
            biSize: size_of::<BITMAPINFOHEADER>() as u32,
            biWidth: w,
            // Negative: rows top to bottom.
            biHeight: -h,
            biPlanes: 1,
            biBitCount: 32,
            biCompression: BI_RGB,
            biSizeImage: 0,
            biXPelsPerMeter: 0,
            biYPelsPerMeter: 0,
            biClrUsed: 0,
            biClrImportant: 0,
        },
        bmiColors: [Default::default()],
    };
    let len = area.w as usize * area.h as usize * 4;
    let mut bgra = vec![0u8; len];
    // SAFETY: every GDI object made here is released here; `bits` points into the DIB
    // section, `len` bytes long (32 bits a pixel, no padding), read before it is deleted.
    let ok = unsafe {
        let screen_dc = GetDC(std::ptr::null_mut());
        let mem = CreateCompatibleDC(screen_dc);
        let mut bits: *mut c_void = std::ptr::null_mut();
        let bmp = CreateDIBSection(
            mem,
            &info,
            DIB_RGB_COLORS,
            &mut bits,
            std::ptr::null_mut(),
            0,
        );
        let ok = !bmp.is_null() && !bits.is_null() && {
            let old = SelectObject(mem, bmp);
            let copied = BitBlt(
                mem,
                0,
                0,
                w,
                h,
                screen_dc,
                area.x,
                area.y,
                SRCCOPY | CAPTUREBLT,
            ) != 0;
            if copied {
                std::ptr::copy_nonoverlapping(bits.cast::<u8>(), bgra.as_mut_ptr(), len);
            }
            SelectObject(mem, old);
            copied
        };
        if !bmp.is_null() {
            DeleteObject(bmp);
        }
        DeleteDC(mem);
        ReleaseDC(std::ptr::null_mut(), screen_dc);
        ok
    };
    if !ok {
        return Err(DesktopError::Failed(
            "the screen could not be captured (BitBlt failed; is the session locked?)".into(),
        ));
    }
    for p in bgra.chunks_exact_mut(4) {
        p.swap(0, 2);
        p[3] = 255;
    }
    let image = image::RgbaImage::from_raw(area.w, area.h, bgra)
        .ok_or_else(|| DesktopError::Failed("capture: pixel buffer of the wrong size".into()))?;
    Ok(Capture { image, area })
}

pub fn pointer() -> Result<(i32, i32), DesktopError> {
    let mut p = POINT { x: 0, y: 0 };
    // SAFETY: `p` is a POINT out parameter.
    if unsafe { GetCursorPos(&mut p) } == 0 {
        return Err(DesktopError::Failed(
            "the pointer's position cannot be read".into(),
        ));
    }
    Ok((p.x, p.y))
}

/// Whether a key or mouse button other than the ones input injected now is held.
pub fn keys_held() -> bool {
    // Mouse buttons (1-6) are left out: a step's own click may still be settling.
    // SAFETY: plain queries of virtual-key states.
    (0x08..=0xFE).any(|vk| unsafe { GetAsyncKeyState(vk) } as u16 & 0x8000 != 0)
}

fn send(inputs: &[INPUT]) -> Result<(), DesktopError> {
    if inputs.is_empty() {
        return Ok(());
    }
    // SAFETY: the slice is valid for its length; the size is INPUT's.
    let sent = unsafe {
        SendInput(
            inputs.len() as u32,
            inputs.as_ptr(),
            size_of::<INPUT>() as i32,
        )
    };
    if sent as usize != inputs.len() {
        return Err(DesktopError::Failed(
            "Windows refused the input (a window of higher integrity, or the secure desktop, has the focus)".into(),
        ));
    }
    Ok(())
}

fn mouse(flags: u32, data: i32) -> INPUT {
    INPUT {
        r#type: INPUT_MOUSE,
        Anonymous: INPUT_0 {
            mi: MOUSEINPUT {
                dx: 0,
                dy: 0,
                mouseData: data as u32,
                dwFlags: flags,
                time: 0,
                dwExtraInfo: 0,
            },
        },
    }
}

fn key(vk: u16, scan: u16, flags: u32) -> INPUT {
    INPUT {
        r#type: INPUT_KEYBOARD,
        Anonymous: INPUT_0 {
            ki: KEYBDINPUT {
                wVk: vk,
                wScan: scan,
                dwFlags: flags,
                time: 0,
                dwExtraInfo: 0,
            },
        },
    }
}

pub fn move_to(x: i32, y: i32) -> Result<(), DesktopError> {
    // SAFETY: plain coordinates.
    if unsafe { SetCursorPos(x, y) } == 0 {
        return Err(DesktopError::Failed(format!(
            "the pointer cannot be moved to {x},{y}"
        )));
    }
    Ok(())
}

pub fn button(b: Button, down: bool) -> Result<(), DesktopError> {
    let flags = match (b, down) {
        (Button::Left, true) => MOUSEEVENTF_LEFTDOWN,
        (Button::Left, false) => MOUSEEVENTF_LEFTUP,
        (Button::Right, true) => MOUSEEVENTF_RIGHTDOWN,
        (Button::Right, false) => MOUSEEVENTF_RIGHTUP,
        (Button::Middle, true) => MOUSEEVENTF_MIDDLEDOWN,
        (Button::Middle, false) => MOUSEEVENTF_MIDDLEUP,
    };
    send(&[mouse(flags, 0)])
}

/// The inputs that turn the wheel `dy` clicks down and `dx` right.
pub fn wheel_inputs(dx: i32, dy: i32) -> Vec<INPUT> {
    const DELTA: i32 = 120;
    let mut out = Vec::new();
    if dy != 0 {
        // Positive wheel data turns away from the user: up.
        out.push(mouse(MOUSEEVENTF_WHEEL, -dy.clamp(-50, 50) * DELTA));
    }
    if dx != 0 {
        out.push(mouse(MOUSEEVENTF_HWHEEL, dx.clamp(-50, 50) * DELTA));
    }
    out
}

pub fn wheel(dx: i32, dy: i32) -> Result<(), DesktopError> {
    send(&wheel_inputs(dx, dy))
}

/// The inputs that type `text`: each UTF-16 unit as a Unicode key press and release (a
/// character outside the BMP is its two surrogates), newlines as Enter, tabs as Tab.
pub fn text_inputs(text: &str) -> Result<Vec<INPUT>, DesktopError> {
    let mut out = Vec::new();
    for c in text.chars() {
        match c {
            '\n' => {
                out.push(key(0x0D, 0, 0));
                out.push(key(0x0D, 0, KEYEVENTF_KEYUP));
            }
            '\t' => {
                out.push(key(0x09, 0, 0));
                out.push(key(0x09, 0, KEYEVENTF_KEYUP));
            }
            '\r' => {}
            c if c.is_control() => {
                return Err(DesktopError::Input(format!(
                    "text: control character U+{:04X} cannot be typed (use keypress)",
                    c as u32
                )));
            }
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push(key(0, *u, KEYEVENTF_UNICODE));
                    out.push(key(0, *u, KEYEVENTF_UNICODE | KEYEVENTF_KEYUP));
                }
            }
        }
    }
    Ok(out)
}

pub fn type_text(text: &str) -> Result<(), DesktopError> {
    send(&text_inputs(text)?)
}

/// A named key's virtual-key code, and whether it is an extended key.
pub fn named_vk(n: Named) -> (u16, bool) {
    match n {
        Named::Ctrl => (0x11, false),
        Named::Shift => (0x10, false),
        Named::Alt => (0x12, false),
        Named::Super => (0x5B, true),
        Named::Enter => (0x0D, false),
        Named::Tab => (0x09, false),
        Named::Escape => (0x1B, false),
        Named::Backspace => (0x08, false),
        Named::Delete => (0x2E, true),
        Named::Insert => (0x2D, true),
        Named::Home => (0x24, true),
        Named::End => (0x23, true),
        Named::PageUp => (0x21, true),
        Named::PageDown => (0x22, true),
        Named::Up => (0x26, true),
        Named::Down => (0x28, true),
        Named::Left => (0x25, true),
        Named::Right => (0x27, true),
        Named::Space => (0x20, false),
        Named::Menu => (0x5D, true),
        Named::F(k) => (0x70 + u16::from(k.saturating_sub(1)), false),
    }
}

/// The inputs of a chord: keys pressed in order (a character's shift added), released in
/// reverse.
pub fn chord_inputs(keys: &[Key]) -> Result<Vec<INPUT>, DesktopError> {
    let mut down: Vec<(u16, bool)> = Vec::new();
    for k in keys {
        match k {
            Key::Named(n) => down.push(named_vk(*n)),
            Key::Char(c) => {
                let lower = c.to_lowercase().next().unwrap_or(*c);
                let mut units = [0u16; 2];
                let unit = match lower.encode_utf16(&mut units) {
                    [u] => *u,
                    _ => {
                        return Err(DesktopError::Input(format!(
                            "no key types `{c}` in a chord"
                        )));
                    }
                };
                // SAFETY: a plain query of the keyboard layout.
                let scan = unsafe { VkKeyScanW(unit) };
                if scan == -1 {
                    return Err(DesktopError::Input(format!(
                        "the keyboard layout has no key for `{c}`"
                    )));
                }
                let vk = (scan as u16) & 0xFF;
                if (scan as u16) & 0x100 != 0 && !down.contains(&(0x10, false)) {
                    down.push((0x10, false));
                }
                down.push((vk, false));
            }
        }
    }
    let flag = |ext: bool| if ext { KEYEVENTF_EXTENDEDKEY } else { 0 };
    let mut out: Vec<INPUT> = down
        .iter()
        .map(|&(vk, ext)| key(vk, 0, flag(ext)))
        .collect();
    out.extend(
        down.iter()
            .rev()
            .map(|&(vk, ext)| key(vk, 0, flag(ext) | KEYEVENTF_KEYUP)),
    );
    Ok(out)
}

pub fn chord(keys: &[Key]) -> Result<(), DesktopError> {
    send(&chord_inputs(keys)?)
}

pub fn activate(id: u64) -> Result<(), DesktopError> {
    let hwnd = id as usize as HWND;
    // SAFETY: window calls on a handle; a stale handle makes them fail, which is reported.
    unsafe {
        if IsIconic(hwnd) != 0 {
            ShowWindow(hwnd, SW_RESTORE);
        }
        SetForegroundWindow(hwnd);
        if GetForegroundWindow() != hwnd {
            return Err(DesktopError::Failed(format!(
                "Windows did not bring window {id:#x} to the front (its foreground rules refuse it while another app is in use)"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unicode_units(inputs: &[INPUT]) -> Vec<(u16, bool)> {
        inputs
            .iter()
            // SAFETY: every input here is a keyboard one.
            .map(|i| unsafe {
                (
                    i.Anonymous.ki.wScan,
                    i.Anonymous.ki.dwFlags & KEYEVENTF_KEYUP != 0,
                )
            })
            .collect()
    }

    #[test]
    fn text_is_typed_as_utf16_units_pressed_and_released() {
        let inputs = text_inputs("é😀").unwrap();
        assert_eq!(
            unicode_units(&inputs),
            vec![
                (0xe9, false),
                (0xe9, true),
                (0xd83d, false),
                (0xd83d, true),
                (0xde00, false),
                (0xde00, true)
            ]
        );
        assert!(text_inputs("a\u{7}").is_err());
        assert_eq!(text_inputs("a\nb").unwrap().len(), 6);
    }

    #[test]
    fn the_wheel_turns_the_way_asked() {
        let w = wheel_inputs(0, 3);
        assert_eq!(w.len(), 1);
        // SAFETY: mouse inputs.
        let (data, flags) = unsafe {
            (
                w[0].Anonymous.mi.mouseData as i32,
                w[0].Anonymous.mi.dwFlags,
            )
        };
        assert_eq!((data, flags), (-360, MOUSEEVENTF_WHEEL));
        assert_eq!(wheel_inputs(2, 0).len(), 1);
        assert!(wheel_inputs(0, 0).is_empty());
    }

    #[test]
    fn a_chord_holds_its_modifiers_and_releases_in_reverse() {
        let inputs = chord_inputs(&[Key::Named(Named::Ctrl), Key::Named(Named::F(4))]).unwrap();
        // SAFETY: keyboard inputs.
        let keys: Vec<(u16, bool)> = inputs
            .iter()
            .map(|i| unsafe {
                (
                    i.Anonymous.ki.wVk,
                    i.Anonymous.ki.dwFlags & KEYEVENTF_KEYUP != 0,
                )
            })
            .collect();
        assert_eq!(
            keys,
            vec![(0x11, false), (0x73, false), (0x73, true), (0x11, true)]
        );
        assert_eq!(named_vk(Named::Up), (0x26, true));
    }
}
