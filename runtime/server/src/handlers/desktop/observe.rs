//! `observe`: a screenshot (of the screen or one window) kept as a frame, the window list, or
//! a window's controls kept as the current refs. Nothing here moves focus or the pointer.
//! Windows a policy forbids are left out of lists and blacked out of screenshots.

use std::fmt::Write as _;

use base64::Engine as _;
use std::sync::Arc;

use desktop::model::{Rect, WindowInfo};
use desktop::refs::Refs;
use generated::desktop::{ObserveArgs, ObserveArgsWhat, ObserveOutput, actions, limits};
use tool_api::{CallContext, Content, ErrorCode, Reply, ToolError};

use super::{State, blocking, find_window, quoted, resource, tool_error};

pub(super) async fn run(
    state: Arc<State>,
    cx: &CallContext,
    args: ObserveArgs,
) -> Result<Reply<ObserveOutput>, ToolError> {
    let windows = blocking(&state, |d| d.windows())
        .await
        .map_err(tool_error)?;
    match args.what.unwrap_or(ObserveArgsWhat::Screenshot) {
        ObserveArgsWhat::Windows => Ok(list(cx, actions::OBSERVE, &windows)),
        ObserveArgsWhat::Screenshot => {
            screenshot(
                &state,
                cx,
                actions::OBSERVE,
                windows,
                args.window.as_deref(),
            )
            .await
        }
        ObserveArgsWhat::Controls => controls(&state, cx, &windows, args.window.as_deref()).await,
    }
}

fn empty_output() -> ObserveOutput {
    ObserveOutput {
        frame: None,
        width: None,
        height: None,
        source_width: None,
        source_height: None,
        windows: None,
        controls: None,
    }
}

/// One line of the window list.
pub(super) fn window_line(w: &WindowInfo) -> String {
    let mut line = format!("{} {} app {}", w.handle(), quoted(&w.title), quoted(&w.app));
    if let Some(pid) = w.pid {
        let _ = write!(line, " pid {pid}");
    }
    let _ = write!(line, " {}", w.rect);
    if w.focused {
        line.push_str(" focused");
    }
    line
}

/// The windows `action` may name, topmost first.
pub(super) fn list(
    cx: &CallContext,
    action: tool_api::ActionId,
    windows: &[WindowInfo],
) -> Reply<ObserveOutput> {
    let shown: Vec<&WindowInfo> = windows
        .iter()
        .filter(|w| cx.permits(action, &resource(w)))
        .collect();
    let mut text = format!(
        "{} window(s), topmost first:\n",
        shown.len().min(limits::observe::MAX_WINDOWS)
    );
    for w in shown.iter().take(limits::observe::MAX_WINDOWS) {
        text.push_str(&window_line(w));
        text.push('\n');
    }
    if shown.len() > limits::observe::MAX_WINDOWS {
        let _ = writeln!(
            text,
            "… {} more not listed",
            shown.len() - limits::observe::MAX_WINDOWS
        );
    }
    let output = ObserveOutput {
        windows: Some(i64::try_from(shown.len()).unwrap_or(i64::MAX)),
        ..empty_output()
    };
    Reply::rendered(output, text)
}

/// A screenshot kept as a frame; windows `action` forbids are blacked out.
pub(super) async fn screenshot(
    state: &Arc<State>,
    cx: &CallContext,
    action: tool_api::ActionId,
    windows: Vec<WindowInfo>,
    window: Option<&str>,
) -> Result<Reply<ObserveOutput>, ToolError> {
    let screen = state.desktop.screen();
    let (area, target, covered) = match window {
        Some(handle) => {
            let w = find_window(&windows, handle)?;
            cx.authorize(action, &resource(&w), ())?;
            // Pixels are read from the screen, so whatever lies above the window shows.
            let above: Vec<String> = windows
                .iter()
                .take_while(|o| o.id != w.id)
                .filter(|o| o.frame.intersect(&w.rect).is_some())
                .map(|o| {
                    if cx.permits(action, &resource(o)) {
                        format!("{} {}", o.handle(), quoted(&o.title))
                    } else {
                        "a window a policy hides".to_string()
                    }
                })
                .collect();
            let area = w.rect.intersect(&screen).ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NotFound,
                    format!("window {handle} lies off the screen"),
                )
            })?;
            (area, Some(w.id), above)
        }
        None => (screen, None, Vec::new()),
    };
    // What a policy keeps from the model is painted over, never sent.
    // Pixels, a copy to encode from and the encoding: paid for before they exist.
    // (Waiting for the budget blocks: it is taken off the async threads.)
    let bytes = u64::from(area.w) * u64::from(area.h) * 8;
    let held = tokio::task::spawn_blocking(move || {
        tool_api::memory::HEAVY.take(bytes, std::time::Duration::from_secs(5))
    })
    .await
    .map_err(|e| ToolError::new(ErrorCode::Internal, format!("worker failed: {e}")))??;
    let listed = windows.clone();
    let (mut cap, after, popups) = blocking(state, move |d| {
        let before = d.popups(&listed)?;
        let cap = d.capture(area)?;
        let after = d.windows()?;
        let mut popups = d.popups(&after)?;
        popups.extend(before);
        Ok((cap, after, popups))
    })
    .await
    .map_err(tool_error)?;
    // What a policy keeps from the model is painted over, never sent: every window it
    // forbids as listed before the capture or after it (one may have opened or moved between),
    // and every menu or tooltip judged as the application that opened it.
    let forbidden = |w: &&WindowInfo| !cx.permits(action, &resource(w));
    let hidden: Vec<Rect> = windows
        .iter()
        .chain(after.iter())
        .chain(popups.iter())
        .filter(forbidden)
        .map(|w| w.frame)
        .collect();
    let hidden_count = windows.iter().filter(forbidden).count();
    let max = u32::try_from(limits::observe::MAX_DIMENSION).unwrap_or(u32::MAX);
    let (encoded, area) = blocking(state, move |_| {
        for r in &hidden {
            if let Some(r) = r.intersect(&cap.area) {
                let (x0, y0) = (
                    (r.x - cap.area.x).unsigned_abs(),
                    (r.y - cap.area.y).unsigned_abs(),
                );
                for y in y0..(y0 + r.h).min(cap.image.height()) {
                    for x in x0..(x0 + r.w).min(cap.image.width()) {
                        cap.image.put_pixel(x, y, image::Rgba([0, 0, 0, 255]));
                    }
                }
            }
        }
        Ok((desktop::encode::encode(&cap.image, max)?, cap.area))
    })
    .await
    .map_err(tool_error)?;
    drop(held);
    let frame = {
        let mut frames = state
            .frames
            .lock()
            .map_err(|_| ToolError::new(ErrorCode::Internal, "frame store lock poisoned"))?;
        frames.add(area, (encoded.width, encoded.height), target, windows)
    };
    let what = match window {
        Some(h) => format!("window {h}"),
        None => "the screen".to_string(),
    };
    let mut text = format!(
        "frame {frame}: {what}, {} at {},{} on the screen, sent as {}x{} {}",
        format_args!("{}x{}", area.w, area.h),
        area.x,
        area.y,
        encoded.width,
        encoded.height,
        if encoded.mime == "image/png" {
            "PNG"
        } else {
            "JPEG"
        }
    );
    if encoded.width != area.w {
        let _ = write!(
            text,
            " (scaled by {:.3}; give coordinates in the frame's pixels, gantry maps them back)",
            f64::from(encoded.width) / f64::from(area.w.max(1))
        );
    }
    text.push('\n');
    if !covered.is_empty() {
        let _ = writeln!(
            text,
            "parts may be covered by: {} (captured from the screen; focus the window first for its own pixels)",
            covered.join(", ")
        );
    }
    if hidden_count > 0 {
        let _ = writeln!(
            text,
            "{hidden_count} window(s) a policy hides are blacked out"
        );
    }
    let output = ObserveOutput {
        frame: Some(frame),
        width: Some(i64::from(encoded.width)),
        height: Some(i64::from(encoded.height)),
        source_width: Some(i64::from(area.w)),
        source_height: Some(i64::from(area.h)),
        ..empty_output()
    };
    let mut reply = Reply::rendered(output, text);
    reply.extra.push(Content::image(
        base64::engine::general_purpose::STANDARD.encode(&encoded.data),
        encoded.mime,
    ));
    Ok(reply)
}

/// The window a controls snapshot (or a keyboard step) is about: the one named, else the
/// focused one.
pub(super) fn target_window(
    windows: &[WindowInfo],
    window: Option<&str>,
) -> Result<WindowInfo, ToolError> {
    match window {
        Some(h) => find_window(windows, h),
        None => windows.iter().find(|w| w.focused).cloned().ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                "no window has the focus; name one with `window`",
            )
        }),
    }
}

async fn controls(
    state: &Arc<State>,
    cx: &CallContext,
    windows: &[WindowInfo],
    window: Option<&str>,
) -> Result<Reply<ObserveOutput>, ToolError> {
    let w = target_window(windows, window)?;
    cx.authorize(actions::OBSERVE, &resource(&w), ())?;
    let (text, count) = snapshot(state, &w).await?;
    let output = ObserveOutput {
        controls: Some(i64::try_from(count).unwrap_or(i64::MAX)),
        ..empty_output()
    };
    Ok(Reply::rendered(output, text))
}

/// Takes a controls snapshot of `w`, makes it the current refs, and renders it.
pub(super) async fn snapshot(
    state: &Arc<State>,
    w: &WindowInfo,
) -> Result<(String, usize), ToolError> {
    let max = limits::observe::MAX_CONTROLS;
    let found = state.desktop.controls(w, max).await.map_err(tool_error)?;
    let count = found.len();
    let lines: Vec<(usize, String)> = found.iter().map(|c| (c.depth, control_line(c))).collect();
    let generation = state
        .refs
        .lock()
        .map_err(|_| ToolError::new(ErrorCode::Internal, "ref store lock poisoned"))?
        .replace(w.id, found);
    let mut text = format!(
        "window {} {}: {count} control(s){}\n",
        w.handle(),
        quoted(&w.title),
        if count >= max {
            format!(" (the first {max}; the rest are left out)")
        } else {
            String::new()
        }
    );
    for (i, (depth, line)) in lines.iter().enumerate() {
        let _ = writeln!(
            text,
            "{}{} {line}",
            "  ".repeat((*depth).min(12)),
            Refs::name(generation, i)
        );
    }
    Ok((text, count))
}

/// One control, as a line after its ref: role, name, value, states, and `settable` where
/// `set_value` applies (every control can take `click_ref`).
pub(super) fn control_line(c: &desktop::model::Control) -> String {
    let mut line = c.role.clone();
    if !c.name.is_empty() {
        let _ = write!(line, " {}", quoted(&c.name));
    }
    if let Some(v) = &c.value {
        let _ = write!(line, " = {}", quoted(v));
    }
    if !c.states.is_empty() {
        let _ = write!(line, " [{}]", c.states.join(", "));
    }
    if c.can_set {
        line.push_str(" settable");
    }
    line
}
