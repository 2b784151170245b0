//! `computer`: up to 20 steps in order, each decided on its own (Cedar: its operation's
//! permission, on the window it acts on) and carried out only after what it was planned on is
//! checked again: a frame's window must stand where the frame showed it, a ref must be of the
//! latest snapshot and its control still shown. The batch stops at the first failing step,
//! and, unless turned off, as soon as the person at the computer moves the mouse or types.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use desktop::Desktop;
use desktop::model::{Button, Control, WindowInfo};
use desktop::refs::Refs;
use generated::desktop::{ComputerArgs, ComputerOperation, ComputerOutput, actions, limits};
use generated::types::{
    ComputerAction, ComputerActionAction as Action, ComputerActionButton, StepResult, Verify,
    VerifyUntil,
};
use tool_api::{ActionId, CallContext, ErrorCode, Host, Reply, ToolError};

use super::observe::{control_line, target_window, window_line};
use super::{State, blocking, error_code, quoted, resource, tool_error};

/// Keys sent right after a click can overtake it while the window manager still holds the
/// click (openbox grabs the button synchronously): a keyboard step waits this long after the
/// last pointer step.
const POINTER_SETTLE: Duration = Duration::from_millis(30);
/// How often a `verify` condition is checked.
const VERIFY_POLL: Duration = Duration::from_millis(50);
/// Characters of clipboard text shown.
const CLIPBOARD_SHOWN: usize = 16 * 1024;
/// Characters typed between two checks of the keyboard focus.
const TYPE_CHUNK: usize = 64;
/// The most a batch may wait in all (its `wait` steps and its `verify`): a call must answer
/// well within the HTTP request timeout, or its client gives up while input is still sent.
const MAX_BATCH_WAIT_MS: i64 = 60_000;

/// How long after one of gantry's pointer steps a single step (a Shell input tool) still
/// checks that the pointer stayed where gantry left it: the gap between a model's calls.
const YIELD_WINDOW: Duration = Duration::from_secs(10);
/// After a single step stood back for the person at the computer, how long the pointer must
/// then stay still before the next one runs: a retry at once waits for them too.
const STILL_FOR: Duration = Duration::from_secs(2);

/// The Cedar actions desktop steps are decided by: the Desktop connector's `computer`
/// operations, or a Shell input tool's own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepActions {
    /// Clicks, moves, drags, scrolls, control actions.
    pub(crate) pointer: ActionId,
    /// Typing and key chords.
    pub(crate) keyboard: ActionId,
    /// Reading the clipboard (a paste chord or a middle click puts it where it can be read).
    pub(crate) read_clipboard: ActionId,
    /// Replacing the clipboard.
    pub(crate) write_clipboard: ActionId,
}

impl StepActions {
    /// `computer`'s own operations.
    pub(crate) const COMPUTER: StepActions = StepActions {
        pointer: ComputerOperation::Pointer.action(),
        keyboard: ComputerOperation::Keyboard.action(),
        read_clipboard: ComputerOperation::ReadClipboard.action(),
        write_clipboard: ComputerOperation::WriteClipboard.action(),
    };

    fn of(&self, op: ComputerOperation) -> ActionId {
        match op {
            ComputerOperation::Pointer => self.pointer,
            ComputerOperation::Keyboard => self.keyboard,
            ComputerOperation::ReadClipboard => self.read_clipboard,
            ComputerOperation::WriteClipboard => self.write_clipboard,
        }
    }
}

/// How a step went well: its route and what it touched, as one line.
struct Done {
    route: &'static str,
    line: String,
}

/// A screen point a step acts on, and the window there (if any), both checked just now.
struct Target {
    x: i32,
    y: i32,
    window: Option<WindowInfo>,
}

struct Batch<'a> {
    state: &'a Arc<State>,
    cx: &'a CallContext,
    /// Where gantry left the pointer (the person moved it if it is elsewhere).
    pointer: Option<(i32, i32)>,
    last_pointer_step: Option<Instant>,
    /// What each step is decided by.
    actions: StepActions,
}

fn need<'v, T>(at: &str, field: &str, action: &str, v: &'v Option<T>) -> Result<&'v T, ToolError> {
    v.as_ref()
        .ok_or_else(|| ToolError::invalid_input(format!("{at}.{field}: required for {action}")))
}

fn action_name(a: Action) -> &'static str {
    a.as_str()
}

impl<'a> Batch<'a> {
    /// A batch on `state` with no step run yet, each step decided by `actions`.
    fn new(state: &'a Arc<State>, cx: &'a CallContext, actions: StepActions) -> Self {
        Batch {
            state,
            cx,
            pointer: None,
            last_pointer_step: None,
            actions,
        }
    }

    fn desktop(&self) -> &Desktop {
        &self.state.desktop
    }

    async fn windows(&self) -> Result<Vec<WindowInfo>, ToolError> {
        blocking(self.state, |d| d.windows())
            .await
            .map_err(tool_error)
    }

    fn authorize(
        &self,
        op: ComputerOperation,
        window: Option<&WindowInfo>,
    ) -> Result<(), ToolError> {
        let action = self.actions.of(op);
        match window {
            Some(w) => self.cx.authorize(action, &resource(w), ()).map(drop),
            None => self.cx.authorize(action, &Host, ()).map(drop),
        }
    }

    /// Why the batch must stop for the person at the computer, if it must.
    async fn user_active(&self) -> Option<String> {
        let Some(expected) = self.pointer else {
            return Some(
                "the pointer's position could not be read after the last step, so whether the user is at work cannot be told: stopped".into(),
            );
        };
        let Ok((now, keys)) = blocking(self.state, |d| Ok((d.pointer()?, d.keys_held()?))).await
        else {
            return Some(
                "the pointer and keyboard cannot be read, so whether the user is at work cannot be told: stopped".into(),
            );
        };
        if now != expected {
            return Some(format!(
                "the user moved the mouse (to {},{}; gantry left it at {},{}): stopped to let them work",
                now.0, now.1, expected.0, expected.1
            ));
        }
        if keys {
            return Some(
                "the user is typing (a key is held down): stopped to let them work".into(),
            );
        }
        None
    }

    async fn note_pointer(&mut self) {
        self.last_pointer_step = Some(Instant::now());
        if self.state.yield_to_user {
            self.pointer = blocking(self.state, |d| d.pointer()).await.ok();
        }
    }

    /// The screen point frame pixel (`x`, `y`) of `step` shows, and the window the frame showed
    /// there, checked against the windows as they stand now.
    async fn point(
        &self,
        at: &str,
        step: &ComputerAction,
        x: Option<i64>,
        y: Option<i64>,
        xs: &str,
    ) -> Result<Target, ToolError> {
        let name = action_name(step.action);
        let frame_id = need(at, "frame", name, &step.frame)?;
        let (fx, fy) = match (x, y) {
            (Some(x), Some(y)) => (x, y),
            _ => {
                return Err(ToolError::invalid_input(format!(
                    "{at}.{xs}: required for {name}"
                )));
            }
        };
        let frame = self
            .state
            .frames
            .lock()
            .map_err(|_| ToolError::new(ErrorCode::Internal, "frame store lock poisoned"))?
            .get(frame_id)
            .cloned()
            .map_err(tool_error)?;
        let (sx, sy) = frame
            .to_screen(fx, fy)
            .map_err(|e| ToolError::invalid_input(format!("{at}: {e}")))?;
        let then = frame.window_at(sx, sy).cloned();
        let now = self.windows().await?;
        // What the input would reach: the window really on top there now (decorations,
        // menus and other unlisted windows included), not a guess from the listed ones.
        let top = {
            let listed = now.clone();
            blocking(self.state, move |d| d.window_at(&listed, sx, sy))
                .await
                .map_err(tool_error)?
        };
        let top = top.as_ref();
        let (cx, pointer) = (self.cx, self.actions.pointer);
        let named = move |w: &WindowInfo| {
            if cx.permits(pointer, &resource(w)) {
                format!("window {} {}", w.handle(), quoted(&w.title))
            } else {
                "another window".to_string()
            }
        };
        let stale = |why: String| {
            ToolError::new(
                ErrorCode::NotFound,
                format!("{why} since frame {frame_id}; take a new screenshot"),
            )
        };
        match then {
            Some(w) => {
                let Some(cur) = now.iter().find(|c| c.id == w.id) else {
                    return Err(stale(format!("{} has closed", named(&w))));
                };
                if cur.rect != w.rect {
                    return Err(stale(format!(
                        "{} moved or was resized (was {}, now {})",
                        named(&w),
                        w.rect,
                        cur.rect
                    )));
                }
                match top {
                    // Another listed window covers the point now.
                    Some(t) if t.id != w.id && now.iter().any(|n| n.id == t.id) => {
                        Err(stale(format!(
                            "{} now covers ({fx}, {fy}) of window {}",
                            named(t),
                            w.handle()
                        )))
                    }
                    // A menu, list or tooltip the list does not hold (opened by the window, as
                    // a rule): the input goes to it, decided as itself.
                    Some(t) if t.id != w.id => Ok(Target {
                        x: sx,
                        y: sy,
                        window: Some(t.clone()),
                    }),
                    Some(_) => Ok(Target {
                        x: sx,
                        y: sy,
                        window: Some(cur.clone()),
                    }),
                    None => Err(stale(format!(
                        "window {} no longer lies at ({fx}, {fy})",
                        w.handle()
                    ))),
                }
            }
            None => {
                // A point the frame showed as bare desktop may now hold a listed window; a
                // menu or panel the list leaves out gets the input, decided as itself.
                if let Some(t) = top.filter(|t| now.iter().any(|n| n.id == t.id)) {
                    return Err(stale(format!(
                        "{} now lies at ({fx}, {fy}), where the frame showed no window",
                        named(t)
                    )));
                }
                Ok(Target {
                    x: sx,
                    y: sy,
                    window: top.cloned(),
                })
            }
        }
    }

    fn where_(t: &Target) -> String {
        match &t.window {
            Some(w) => format!("{},{} in {} {}", t.x, t.y, w.handle(), quoted(&w.title)),
            None => format!("{},{} on the desktop", t.x, t.y),
        }
    }

    async fn click(
        &mut self,
        x: i32,
        y: i32,
        button: Button,
        times: usize,
    ) -> Result<(), ToolError> {
        blocking(self.state, move |d| {
            d.move_to(x, y)?;
            for _ in 0..times {
                d.button(button, true)?;
                d.button(button, false)?;
            }
            Ok(())
        })
        .await
        .map_err(tool_error)?;
        self.note_pointer().await;
        Ok(())
    }

    /// The control `r` names, its window as it is now, and where the control is now.
    async fn control(
        &self,
        at: &str,
        r: &str,
    ) -> Result<(Control, WindowInfo, Option<desktop::model::Rect>), ToolError> {
        let (window_id, control) = {
            let refs = self
                .state
                .refs
                .lock()
                .map_err(|_| ToolError::new(ErrorCode::Internal, "ref store lock poisoned"))?;
            let (w, c) = refs
                .get(r)
                .map_err(|e| ToolError::new(error_code(&e), format!("{at}.ref: {e}")))?;
            (w, c.clone())
        };
        let now = self.windows().await?;
        let w = now
            .iter()
            .find(|w| w.id == window_id)
            .cloned()
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NotFound,
                    format!("{at}.ref: the window of `{r}` has closed"),
                )
            })?;
        let rect = self
            .desktop()
            .locate(&control.handle)
            .await
            .map_err(|e| ToolError::new(error_code(&e), format!("{at}.ref `{r}`: {e}")))?;
        Ok((control, w, rect))
    }

    /// The window keys would reach now: the one holding the keyboard focus, which must be
    /// a listed window (a launcher, a menu or the bare desktop is refused: what it would do
    /// with the keys cannot be decided per window).
    async fn keyboard_target(&self, at: &str) -> Result<WindowInfo, ToolError> {
        if let Some(t) = self.last_pointer_step {
            let left = POINTER_SETTLE.saturating_sub(t.elapsed());
            if !left.is_zero() {
                tokio::time::sleep(left).await;
            }
        }
        let now = self.windows().await?;
        let listed = now.clone();
        let focused = blocking(self.state, move |d| d.focused_window(&listed))
            .await
            .map_err(tool_error)?;
        match focused {
            Some(w) if now.iter().any(|n| n.id == w.id) => Ok(w),
            Some(_) => Err(ToolError::new(
                ErrorCode::NotFound,
                format!(
                    "{at}: the keyboard focus is on a window that is not listed (a menu, a launcher or a panel); focus a listed window first"
                ),
            )),
            None => Err(ToolError::new(
                ErrorCode::NotFound,
                format!("{at}: no window has the keyboard focus; focus one first"),
            )),
        }
    }

    async fn step(&mut self, i: usize, step: &ComputerAction) -> Result<Done, ToolError> {
        let at = tool_api::check::index("", "actions", i);
        let at = at.trim_start_matches('.');
        let name = action_name(step.action);
        match step.action {
            Action::Click | Action::DoubleClick | Action::Move => {
                let t = self.point(at, step, step.x, step.y, "x").await?;
                self.authorize(ComputerOperation::Pointer, t.window.as_ref())?;
                let button = match step.button {
                    Some(ComputerActionButton::Right) => Button::Right,
                    Some(ComputerActionButton::Middle) => Button::Middle,
                    _ => Button::Left,
                };
                let times = match step.action {
                    Action::Click => 1,
                    Action::DoubleClick => 2,
                    _ => 0,
                };
                if button == Button::Middle && times > 0 {
                    // A middle click pastes the selection on X11.
                    self.authorize(ComputerOperation::ReadClipboard, None)?;
                }
                self.click(t.x, t.y, button, times).await?;
                Ok(Done {
                    route: "pointer",
                    line: format!("{name} at {}", Self::where_(&t)),
                })
            }
            Action::Drag => {
                let from = self.point(at, step, step.x, step.y, "x").await?;
                let to = self.point(at, step, step.to_x, step.to_y, "to_x").await?;
                self.authorize(ComputerOperation::Pointer, from.window.as_ref())?;
                if to.window.as_ref().map(|w| w.id) != from.window.as_ref().map(|w| w.id) {
                    self.authorize(ComputerOperation::Pointer, to.window.as_ref())?;
                }
                let (fx, fy, tx, ty) = (from.x, from.y, to.x, to.y);
                blocking(self.state, move |d| {
                    d.move_to(fx, fy)?;
                    d.button(Button::Left, true)?;
                    // In steps, so the application sees a drag rather than a jump.
                    for k in 1..=8 {
                        d.move_to(fx + (tx - fx) * k / 8, fy + (ty - fy) * k / 8)?;
                        std::thread::sleep(Duration::from_millis(4));
                    }
                    d.button(Button::Left, false)
                })
                .await
                .map_err(tool_error)?;
                self.note_pointer().await;
                Ok(Done {
                    route: "pointer",
                    line: format!("drag from {} to {}", Self::where_(&from), Self::where_(&to)),
                })
            }
            Action::Scroll => {
                let (dx, dy) = (step.dx.unwrap_or(0), step.dy.unwrap_or(0));
                if dx == 0 && dy == 0 {
                    return Err(ToolError::invalid_input(format!(
                        "{at}.dy: scroll needs dx or dy"
                    )));
                }
                let t = if step.frame.is_some() {
                    self.point(at, step, step.x, step.y, "x").await?
                } else {
                    let (x, y) = blocking(self.state, |d| d.pointer())
                        .await
                        .map_err(tool_error)?;
                    let window = self
                        .windows()
                        .await?
                        .into_iter()
                        .find(|w| w.rect.contains(x, y));
                    Target { x, y, window }
                };
                self.authorize(ComputerOperation::Pointer, t.window.as_ref())?;
                let (x, y) = (t.x, t.y);
                let (dx, dy) = (
                    i32::try_from(dx).unwrap_or(0),
                    i32::try_from(dy).unwrap_or(0),
                );
                blocking(self.state, move |d| {
                    d.move_to(x, y)?;
                    d.wheel(dx, dy)
                })
                .await
                .map_err(tool_error)?;
                self.note_pointer().await;
                Ok(Done {
                    route: "pointer",
                    line: format!("scroll {dx},{dy} at {}", Self::where_(&t)),
                })
            }
            Action::ClickRef => {
                let r = need(at, "ref", name, &step.r#ref)?;
                let (control, w, rect) = self.control(at, r).await?;
                self.authorize(ComputerOperation::Pointer, Some(&w))?;
                let what = format!("{r} {}", control_line(&control));
                if control.can_press {
                    match self.desktop().press(&control.handle).await {
                        Ok(action) => {
                            return Ok(Done {
                                route: "action",
                                line: format!("click_ref {what}: its action {}", quoted(&action)),
                            });
                        }
                        Err(e) if rect.is_none() => return Err(tool_error(e)),
                        Err(_) => {}
                    }
                }
                let Some(rect) = rect else {
                    return Err(ToolError::new(
                        ErrorCode::NotFound,
                        format!(
                            "{at}.ref `{r}`: the control has no action and no position on the screen"
                        ),
                    ));
                };
                let (x, y) = rect.centre();
                let top = self
                    .windows()
                    .await?
                    .into_iter()
                    .find(|o| o.rect.contains(x, y));
                if top.as_ref().map(|t| t.id) != Some(w.id) {
                    return Err(ToolError::new(
                        ErrorCode::NotFound,
                        format!(
                            "{at}.ref `{r}`: the control is covered by another window; focus its window first"
                        ),
                    ));
                }
                self.click(x, y, Button::Left, 1).await?;
                Ok(Done {
                    route: "pointer",
                    line: format!("click_ref {what}: clicked at {x},{y}"),
                })
            }
            Action::SetValue => {
                let r = need(at, "ref", name, &step.r#ref)?;
                let text = need(at, "text", name, &step.text)?;
                let (control, w, _) = self.control(at, r).await?;
                // Text into a control is typing, whatever route it takes.
                self.authorize(ComputerOperation::Keyboard, Some(&w))?;
                if !control.can_set {
                    return Err(ToolError::invalid_input(format!(
                        "{at}.ref `{r}` ({}) cannot be set; click it and type instead",
                        control_line(&control)
                    )));
                }
                let how = self
                    .desktop()
                    .set_value(&control.handle, text, true)
                    .await
                    .map_err(|e| ToolError::new(error_code(&e), format!("{at}.ref `{r}`: {e}")))?;
                Ok(Done {
                    route: "action",
                    line: format!("set_value {r} {} to {} ({how})", control.role, quoted(text)),
                })
            }
            Action::Focus => {
                if let Some(r) = &step.r#ref {
                    let (control, w, _) = self.control(at, r).await?;
                    self.authorize(ComputerOperation::Pointer, Some(&w))?;
                    let id = w.id;
                    blocking(self.state, move |d| d.activate(id))
                        .await
                        .map_err(tool_error)?;
                    self.desktop()
                        .focus_control(&control.handle)
                        .await
                        .map_err(tool_error)?;
                    return Ok(Done {
                        route: "action",
                        line: format!("focus {r} {}", control_line(&control)),
                    });
                }
                let handle = step.window.as_deref().ok_or_else(|| {
                    ToolError::invalid_input(format!("{at}.window: focus needs a window or a ref"))
                })?;
                let w = target_window(&self.windows().await?, Some(handle))?;
                self.authorize(ComputerOperation::Pointer, Some(&w))?;
                let id = w.id;
                blocking(self.state, move |d| d.activate(id))
                    .await
                    .map_err(tool_error)?;
                Ok(Done {
                    route: "window manager",
                    line: format!("focus {}", window_line(&w)),
                })
            }
            Action::Wait => {
                let ms = *need(at, "ms", name, &step.ms)?;
                self.authorize(ComputerOperation::Pointer, None)?;
                tokio::time::sleep(Duration::from_millis(u64::try_from(ms).unwrap_or(0))).await;
                Ok(Done {
                    route: "wait",
                    line: format!("waited {ms} ms"),
                })
            }
            Action::Type => {
                let text = need(at, "text", name, &step.text)?;
                let w = self.keyboard_target(at).await?;
                self.authorize(ComputerOperation::Keyboard, Some(&w))?;
                let chars: Vec<char> = text.chars().collect();
                let n = chars.len();
                // A piece also ends after a newline or a tab: either can move the focus.
                let mut pieces: Vec<&[char]> = Vec::new();
                for line in chars.split_inclusive(|c| matches!(c, '\n' | '\t')) {
                    pieces.extend(line.chunks(TYPE_CHUNK));
                }
                let mut typed = 0;
                // In pieces, the focus checked between them: keys typed into a window that
                // took the focus meanwhile would go where no decision was made.
                for (k, piece) in pieces.into_iter().enumerate() {
                    if k > 0 {
                        let now = self.windows().await?;
                        let still = blocking(self.state, move |d| d.focused_window(&now))
                            .await
                            .map_err(tool_error)?;
                        if still.as_ref().map(|f| f.id) != Some(w.id) {
                            return Err(ToolError::new(
                                ErrorCode::NotFound,
                                format!(
                                    "{at}: the keyboard focus left window {} after {} of {n} characters; stopped there",
                                    w.handle(),
                                    typed
                                ),
                            ));
                        }
                    }
                    typed += piece.len();
                    let piece: String = piece.iter().collect();
                    blocking(self.state, move |d| d.type_text(&piece))
                        .await
                        .map_err(|e| ToolError::new(error_code(&e), format!("{at}.text: {e}")))?;
                }
                Ok(Done {
                    route: "keyboard",
                    line: format!("typed {n} character(s) into {}", focused(Some(&w))),
                })
            }
            Action::Keypress => {
                let keys = need(at, "keys", name, &step.keys)?;
                let chord = desktop::keys::parse_chord(keys)
                    .map_err(|e| ToolError::invalid_input(format!("{at}.{e}")))?;
                let w = self.keyboard_target(at).await?;
                self.authorize(ComputerOperation::Keyboard, Some(&w))?;
                if pastes(&chord) {
                    // Pasting puts the clipboard where observe can read it back.
                    self.authorize(ComputerOperation::ReadClipboard, None)?;
                }
                blocking(self.state, move |d| d.chord(&chord))
                    .await
                    .map_err(|e| ToolError::new(error_code(&e), format!("{at}.keys: {e}")))?;
                // Whatever the chord opens or focuses settles before the next step looks.
                tokio::time::sleep(POINTER_SETTLE).await;
                Ok(Done {
                    route: "keyboard",
                    line: format!("pressed {} in {}", quoted(keys), focused(Some(&w))),
                })
            }
            Action::ReadClipboard => {
                self.authorize(ComputerOperation::ReadClipboard, None)?;
                let Some(text) = blocking(self.state, |d| d.read_clipboard())
                    .await
                    .map_err(tool_error)?
                else {
                    return Ok(Done {
                        route: "clipboard",
                        line: "read_clipboard: the clipboard holds no text".into(),
                    });
                };
                let total = text.chars().count();
                let shown: String = text.chars().take(CLIPBOARD_SHOWN).collect();
                // One escaped, quoted string: clipboard text can never pass for a line of
                // this reply.
                let mut line = format!("read_clipboard ({total} characters): {shown:?}");
                if total > CLIPBOARD_SHOWN {
                    let _ = write!(
                        line,
                        " [… {} more characters not shown]",
                        total - CLIPBOARD_SHOWN
                    );
                }
                Ok(Done {
                    route: "clipboard",
                    line,
                })
            }
            Action::WriteClipboard => {
                let text = need(at, "text", name, &step.text)?.clone();
                self.authorize(ComputerOperation::WriteClipboard, None)?;
                let n = text.chars().count();
                blocking(self.state, move |d| d.write_clipboard(&text))
                    .await
                    .map_err(tool_error)?;
                Ok(Done {
                    route: "clipboard",
                    line: format!("write_clipboard: {n} character(s)"),
                })
            }
        }
    }

    /// Checks `v` until it holds or its time runs out; returns whether it held and the state
    /// seen last, as lines.
    async fn verify(&self, v: &Verify) -> Result<(bool, String), ToolError> {
        let timeout = u64::try_from(verify_wait_ms(v)).unwrap_or(0);
        let deadline = Instant::now() + Duration::from_millis(timeout);
        let wanted = v.text.as_str();
        loop {
            let windows = self.windows().await?;
            let seen: Vec<&WindowInfo> = windows
                .iter()
                .filter(|w| self.cx.permits(actions::OBSERVE, &resource(w)))
                .collect();
            let (held, state) = match v.until {
                VerifyUntil::Foreground => {
                    let f = seen.iter().find(|w| w.focused);
                    let ok = f.is_some_and(|w| w.title.contains(wanted));
                    (
                        ok,
                        f.map_or("no window has the focus".into(), |w| {
                            format!("focused: {}", window_line(w))
                        }),
                    )
                }
                VerifyUntil::WindowOpen => match seen.iter().find(|w| w.title.contains(wanted)) {
                    Some(w) => (true, window_line(w)),
                    None => (
                        false,
                        format!("no window title contains {}", quoted(wanted)),
                    ),
                },
                VerifyUntil::WindowClosed => match seen.iter().find(|w| w.title.contains(wanted)) {
                    Some(w) => (false, format!("still open: {}", window_line(w))),
                    None => (true, format!("no window title contains {}", quoted(wanted))),
                },
                VerifyUntil::ControlAppears | VerifyUntil::ControlGone => {
                    let w = target_window(&windows, v.window.as_deref())?;
                    self.cx.authorize(actions::OBSERVE, &resource(&w), ())?;
                    let found = self
                        .state
                        .desktop
                        .controls(&w, generated::desktop::limits::observe::MAX_CONTROLS)
                        .await
                        .map_err(tool_error)?;
                    let hit = found.iter().position(|c| {
                        c.name.contains(wanted)
                            || c.value.as_deref().is_some_and(|t| t.contains(wanted))
                    });
                    let line = hit.map(|i| control_line(&found[i]));
                    let generation = self
                        .state
                        .refs
                        .lock()
                        .map_err(|_| {
                            ToolError::new(ErrorCode::Internal, "ref store lock poisoned")
                        })?
                        .replace(w.id, found);
                    let appears = matches!(v.until, VerifyUntil::ControlAppears);
                    match (hit, line) {
                        (Some(i), Some(line)) => (
                            appears,
                            format!(
                                "{} {line} (refs are now r{generation}.*)",
                                Refs::name(generation, i)
                            ),
                        ),
                        _ => (
                            !appears,
                            format!(
                                "no control of {} {} is named {}",
                                w.handle(),
                                quoted(&w.title),
                                quoted(wanted)
                            ),
                        ),
                    }
                }
            };
            if held || Instant::now() >= deadline {
                return Ok((held, state));
            }
            tokio::time::sleep(VERIFY_POLL).await;
        }
    }
}

/// Whether a chord is a paste (ctrl+v, ctrl+shift+v, shift+insert).
fn pastes(chord: &[desktop::keys::Key]) -> bool {
    use desktop::keys::{Key, Named};
    let has = |n: Named| chord.contains(&Key::Named(n));
    let last = chord.last();
    (has(Named::Ctrl) && matches!(last, Some(Key::Char('v' | 'V'))))
        || (has(Named::Shift) && last == Some(&Key::Named(Named::Insert)))
}

fn focused(w: Option<&WindowInfo>) -> String {
    w.map_or("the focused window (none)".into(), |w| {
        format!("{} {}", w.handle(), quoted(&w.title))
    })
}

pub(super) async fn run(
    state: Arc<State>,
    cx: &CallContext,
    args: ComputerArgs,
) -> Result<Reply<ComputerOutput>, ToolError> {
    let waits: i64 = args.actions.iter().filter_map(|a| a.ms).sum::<i64>()
        + args.verify.as_ref().map_or(0, verify_wait_ms);
    if waits > MAX_BATCH_WAIT_MS {
        return Err(ToolError::invalid_input(format!(
            "actions: the batch's waits and verify add up to {waits} ms; at most {MAX_BATCH_WAIT_MS} ms a call (split the batch)"
        )));
    }
    let _only_batch = state.batch.lock().await;
    let mut batch = Batch::new(&state, cx, StepActions::COMPUTER);
    if state.yield_to_user {
        // Without the pointer's position nobody could tell the user is at work: refuse.
        batch.pointer = Some(
            blocking(&state, |d| d.pointer())
                .await
                .map_err(tool_error)?,
        );
    }
    let total = args.actions.len();
    let mut steps = Vec::with_capacity(total);
    let mut text = String::new();
    let mut stopped = false;
    let result = |i: usize, ok: bool, note: Option<String>, route: Option<&str>| StepResult {
        index: i64::try_from(i).unwrap_or(0),
        ok,
        note,
        route: route.map(str::to_string),
    };
    for (i, step) in args.actions.iter().enumerate() {
        if i > 0
            && state.yield_to_user
            && let Some(why) = batch.user_active().await
        {
            let _ = writeln!(text, "step {} not run: {why}", i + 1);
            steps.push(result(i, false, Some(why), None));
            stopped = true;
            break;
        }
        match batch.step(i, step).await {
            Ok(done) => {
                let _ = writeln!(text, "step {} ok ({}): {}", i + 1, done.route, done.line);
                steps.push(result(i, true, None, Some(done.route)));
            }
            Err(e) => {
                // A message can carry an application's words (its toolkit's error): kept to
                // one escaped line, so it cannot forge the lines around it.
                let why = format!(
                    "{}: {}",
                    e.code.as_str(),
                    crate::handlers::printable(&e.message)
                );
                let name = action_name(step.action);
                let _ = writeln!(text, "step {} FAILED ({name}): {why}", i + 1);
                steps.push(result(i, false, Some(why), None));
                stopped = true;
                break;
            }
        }
    }
    let completed = steps.iter().filter(|s| s.ok).count();
    if stopped && completed + 1 < total {
        let _ = writeln!(text, "steps {}-{total} not run", completed + 2);
    }
    let mut verified = None;
    if let (Some(v), false) = (&args.verify, stopped) {
        match batch.verify(v).await {
            Ok((held, state)) => {
                let _ = writeln!(
                    text,
                    "verify {} {}: {}",
                    v.until.as_str(),
                    if held { "ok" } else { "FAILED (timed out)" },
                    state
                );
                verified = Some(held);
            }
            Err(e) => {
                let _ = writeln!(
                    text,
                    "verify FAILED: {}: {}",
                    e.code.as_str(),
                    crate::handlers::printable(&e.message)
                );
                verified = Some(false);
            }
        }
    }
    let output = ComputerOutput {
        completed: i64::try_from(completed).unwrap_or(0),
        steps,
        verified,
    };
    let mut reply = Reply::rendered(output, text);
    reply.failed = completed == 0;
    Ok(reply)
}

/// How long `v` waits, in ms: its own `timeout_ms`, else the surface's default.
fn verify_wait_ms(v: &Verify) -> i64 {
    v.timeout_ms.unwrap_or_else(|| {
        i64::try_from(limits::computer::VERIFY_WAIT.duration().as_millis()).unwrap_or(i64::MAX)
    })
}

/// One step on its own (a Shell input tool), decided by `actions`. It is not run while the
/// person at the computer holds a key, or when they moved the pointer since gantry's last
/// step (within [`YIELD_WINDOW`]): between single steps, as between a batch's.
pub(super) async fn one_step(
    state: Arc<State>,
    cx: &CallContext,
    step: &ComputerAction,
    actions: StepActions,
) -> Result<String, ToolError> {
    let _only_batch = state.batch.lock().await;
    let mut batch = Batch::new(&state, cx, actions);
    if state.yield_to_user {
        let (now, keys) = blocking(&state, |d| Ok((d.pointer()?, d.keys_held()?)))
            .await
            .map_err(tool_error)?;
        let mut record = state
            .left_pointer
            .lock()
            .map_err(|_| ToolError::new(ErrorCode::Internal, "pointer record lock poisoned"))?;
        let why = if keys {
            Some("the user is typing (a key is held down)".to_string())
        } else {
            match *record {
                // Gantry's own last step left the pointer elsewhere a moment ago.
                Some(Left::ByGantry(at, when)) if when.elapsed() < YIELD_WINDOW && at != now => {
                    Some(format!(
                        "the user moved the mouse (to {},{}; gantry left it at {},{})",
                        now.0, now.1, at.0, at.1
                    ))
                }
                // A step already stood back: the user must have let the pointer be since.
                Some(Left::ByUser(at, when)) if at != now || when.elapsed() < STILL_FOR => {
                    Some(format!(
                        "the user is at work (the mouse moved within the last {} s)",
                        STILL_FOR.as_secs()
                    ))
                }
                _ => None,
            }
        };
        if let Some(why) = why {
            // Where the user left it, and when: the next call waits until it stays put.
            let since = match *record {
                Some(Left::ByUser(at, when)) if at == now => when,
                _ => std::time::Instant::now(),
            };
            *record = Some(Left::ByUser(now, since));
            return Err(ToolError::new(
                ErrorCode::Busy,
                format!(
                    "{why}: not run, to let them work; try again when the pointer has been still for {} s",
                    STILL_FOR.as_secs()
                ),
            ));
        }
        *record = None;
        drop(record);
        batch.pointer = Some(now);
    }
    let outcome = batch.step(0, step).await;
    if state.yield_to_user
        && let Some(p) = batch.pointer
        && let Ok(mut left) = state.left_pointer.lock()
    {
        *left = Some(Left::ByGantry(p, Instant::now()));
    }
    // The step's fields are the tool's own arguments: named as such.
    let done = outcome.map_err(|e| {
        let message = e
            .message
            .replace("actions[0].", "")
            .replace("actions[0]: ", "");
        ToolError::new(e.code, message)
    })?;
    Ok(format!("ok ({}): {}", done.route, done.line))
}

/// Who last left the pointer where it is, as single steps (the Shell input tools) see it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Left {
    /// Gantry's last step, at that point and time.
    ByGantry((i32, i32), Instant),
    /// The user, seen there by a step that stood back, since then.
    ByUser((i32, i32), Instant),
}
