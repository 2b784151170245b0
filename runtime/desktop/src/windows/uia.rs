//! UI controls through UI Automation, on one thread of their own: COM elements cannot leave
//! the thread that made them, so every request is a job sent there and its answer sent back.
//! A snapshot is one cached subtree request (names, types, bounds, states and which patterns
//! apply, fetched together); the elements of the latest snapshot stay on the thread, and a
//! control is only ever addressed through them, its runtime id checked again before use.

use std::sync::mpsc;

use uiautomation::core::UICacheRequest;
use uiautomation::patterns::{
    UIInvokePattern, UILegacyIAccessiblePattern, UIPatternType, UIRangeValuePattern,
    UITogglePattern, UIValuePattern,
};
use uiautomation::types::{ElementMode, Handle, TreeScope, UIProperty};
use uiautomation::{UIAutomation, UIElement};

use crate::DesktopError;
use crate::model::{Control, ControlHandle, Rect};

struct Uia {
    automation: UIAutomation,
    /// The latest snapshot's elements, by the index their handles carry.
    elements: Vec<UIElement>,
}

type Job = Box<dyn FnOnce(&mut Uia) + Send>;

/// The automation thread.
#[derive(Debug)]
pub struct Automation {
    jobs: std::sync::Mutex<mpsc::Sender<Job>>,
}

fn failed(what: &str) -> impl FnOnce(uiautomation::Error) -> DesktopError + '_ {
    move |e| DesktopError::Failed(format!("UI Automation: {what}: {e}"))
}

impl Automation {
    /// Starts the thread and its UI Automation client.
    pub fn start() -> Result<Automation, DesktopError> {
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("gantry-uia".into())
            .spawn(move || {
                let automation = match UIAutomation::new() {
                    Ok(a) => a,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let mut uia = Uia {
                    automation,
                    elements: Vec::new(),
                };
                while let Ok(job) = rx.recv() {
                    job(&mut uia);
                }
            })
            .map_err(|e| DesktopError::Unavailable(format!("UI Automation thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Automation {
                jobs: std::sync::Mutex::new(tx),
            }),
            // Wine's gives no reason.
            Ok(Err(e)) if e.trim().is_empty() => Err(DesktopError::Unavailable(
                "UI Automation cannot start".into(),
            )),
            Ok(Err(e)) => Err(DesktopError::Unavailable(format!(
                "UI Automation cannot start: {e}"
            ))),
            Err(_) => Err(DesktopError::Unavailable(
                "UI Automation thread ended".into(),
            )),
        }
    }

    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Uia) -> Result<T, DesktopError> + Send + 'static,
    ) -> Result<T, DesktopError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let boxed: Job = Box::new(move |u| {
            let _ = tx.send(job(u));
        });
        self.jobs
            .lock()
            .map_err(|_| DesktopError::Failed("UI Automation queue lock poisoned".into()))?
            .send(boxed)
            .map_err(|_| DesktopError::Failed("the UI Automation thread has ended".into()))?;
        // A provider that hangs (or a huge tree) must not hang the server: the answer is
        // awaited a bounded time; the thread finishes the job in its own time.
        match tokio::time::timeout(std::time::Duration::from_secs(10), rx).await {
            Ok(answer) => answer.map_err(|_| {
                DesktopError::Failed("the UI Automation thread dropped a request".into())
            })?,
            Err(_) => Err(DesktopError::Timeout(
                "the application did not answer UI Automation within 10 s".into(),
            )),
        }
    }

    /// The shown controls of window `hwnd`, depth first, at most `max`.
    pub async fn controls(&self, hwnd: u64, max: usize) -> Result<Vec<Control>, DesktopError> {
        self.run(move |u| u.controls(hwnd, max)).await
    }

    /// Where control `h` is now, or why it cannot be used.
    pub async fn locate(&self, h: &ControlHandle) -> Result<Option<Rect>, DesktopError> {
        let h = h.clone();
        self.run(move |u| {
            let e = u.element(&h)?;
            if e.is_offscreen().unwrap_or(false) {
                return Err(DesktopError::Gone(
                    "the control is no longer shown; observe the controls again".into(),
                ));
            }
            Ok(e.get_bounding_rectangle()
                .ok()
                .map(rect)
                .filter(|r| r.w > 0 && r.h > 0))
        })
        .await
    }

    /// Invokes, toggles or runs the default action of control `h`; says which.
    pub async fn press(&self, h: &ControlHandle) -> Result<String, DesktopError> {
        let h = h.clone();
        self.run(move |u| {
            let e = u.element(&h)?;
            if let Ok(p) = e.get_pattern::<UIInvokePattern>() {
                p.invoke().map_err(failed("invoke"))?;
                return Ok("invoke".into());
            }
            if let Ok(p) = e.get_pattern::<UITogglePattern>() {
                p.toggle().map_err(failed("toggle"))?;
                return Ok("toggle".into());
            }
            let p = e
                .get_pattern::<UILegacyIAccessiblePattern>()
                .map_err(|_| DesktopError::Failed("the control has no action".into()))?;
            p.do_default_action().map_err(failed("default action"))?;
            Ok("default action".into())
        })
        .await
    }

    /// Sets the text (value pattern) or number (range value) of control `h`.
    pub async fn set_value(
        &self,
        h: &ControlHandle,
        text: &str,
    ) -> Result<&'static str, DesktopError> {
        let h = h.clone();
        let text = text.to_string();
        self.run(move |u| {
            let e = u.element(&h)?;
            if let Ok(p) = e.get_pattern::<UIValuePattern>() {
                p.set_value(&text).map_err(failed("set value"))?;
                return Ok("value");
            }
            let n: f64 = text.trim().parse().map_err(|_| {
                DesktopError::Input(format!(
                    "the control takes a number, and `{text}` is not one"
                ))
            })?;
            let p = e
                .get_pattern::<UIRangeValuePattern>()
                .map_err(|_| DesktopError::Failed("the control cannot be set".into()))?;
            p.set_value(n).map_err(failed("set range value"))?;
            Ok("range value")
        })
        .await
    }

    /// Gives control `h` the keyboard focus.
    pub async fn focus(&self, h: &ControlHandle) -> Result<(), DesktopError> {
        let h = h.clone();
        self.run(move |u| u.element(&h)?.set_focus().map_err(failed("focus")))
            .await
    }
}

fn rect(r: uiautomation::types::Rect) -> Rect {
    Rect {
        x: r.get_left(),
        y: r.get_top(),
        w: (r.get_right() - r.get_left()).unsigned_abs(),
        h: (r.get_bottom() - r.get_top()).unsigned_abs(),
    }
}

fn runtime_id(e: &UIElement) -> String {
    e.get_runtime_id()
        .map(|v| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(".")
        })
        .unwrap_or_default()
}

impl Uia {
    fn request(&self) -> Result<UICacheRequest, DesktopError> {
        let a = &self.automation;
        let req = a.create_cache_request().map_err(failed("cache request"))?;
        for p in [
            UIProperty::RuntimeId,
            UIProperty::Name,
            UIProperty::ControlType,
            UIProperty::BoundingRectangle,
            UIProperty::IsEnabled,
            UIProperty::HasKeyboardFocus,
            UIProperty::IsOffscreen,
            UIProperty::IsPassword,
            UIProperty::IsInvokePatternAvailable,
            UIProperty::IsTogglePatternAvailable,
            UIProperty::IsValuePatternAvailable,
            UIProperty::IsRangeValuePatternAvailable,
            UIProperty::IsLegacyIAccessiblePatternAvailable,
        ] {
            req.add_property(p).map_err(failed("cache request"))?;
        }
        req.add_pattern(UIPatternType::Value)
            .map_err(failed("cache request"))?;
        req.set_tree_scope(TreeScope::Subtree)
            .map_err(failed("cache request"))?;
        req.set_tree_filter(
            a.get_control_view_condition()
                .map_err(failed("cache request"))?,
        )
        .map_err(failed("cache request"))?;
        req.set_element_mode(ElementMode::Full)
            .map_err(failed("cache request"))?;
        Ok(req)
    }

    fn controls(&mut self, hwnd: u64, max: usize) -> Result<Vec<Control>, DesktopError> {
        let window = self
            .automation
            .element_from_handle(Handle::from(hwnd as isize))
            .map_err(|_| DesktopError::Gone(format!("window {hwnd:#x} is gone")))?;
        let root = window
            .build_updated_cache(&self.request()?)
            .map_err(failed("controls"))?;
        let mut out = Vec::new();
        let mut elements = Vec::new();
        let mut stack: Vec<(usize, UIElement)> = root
            .get_cached_children()
            .unwrap_or_default()
            .into_iter()
            .rev()
            .map(|e| (0, e))
            .collect();
        while let Some((depth, e)) = stack.pop() {
            if out.len() >= max {
                break;
            }
            if e.is_cached_offscreen().unwrap_or(false) {
                continue;
            }
            let flag = |p: UIProperty| {
                e.get_cached_property_value(p)
                    .ok()
                    .and_then(|v| v.get_value().ok())
                    .is_some_and(|v| matches!(v, uiautomation::variants::Value::BOOL(true)))
            };
            let value = if flag(UIProperty::IsValuePatternAvailable)
                && !e.is_cached_password().unwrap_or(false)
            {
                e.get_cached_pattern::<UIValuePattern>()
                    .ok()
                    .and_then(|p| p.get_cached_value().ok())
                    .map(|v| crate::model::shown_value(&v))
            } else {
                None
            };
            let mut states = Vec::new();
            if flag(UIProperty::HasKeyboardFocus) {
                states.push("focused");
            }
            if !e.is_cached_enabled().unwrap_or(true) {
                states.push("disabled");
            }
            let role = e
                .get_cached_control_type()
                .map(|t| format!("{t:?}").to_lowercase())
                .unwrap_or_else(|_| "control".into());
            out.push(Control {
                depth,
                role,
                name: e
                    .get_cached_name()
                    .unwrap_or_default()
                    .chars()
                    .filter(|c| !c.is_control())
                    .collect(),
                value,
                states,
                rect: e
                    .get_cached_bounding_rectangle()
                    .ok()
                    .map(rect)
                    .filter(|r| r.w > 0 && r.h > 0),
                can_press: flag(UIProperty::IsInvokePatternAvailable)
                    || flag(UIProperty::IsTogglePatternAvailable)
                    || flag(UIProperty::IsLegacyIAccessiblePatternAvailable),
                can_set: flag(UIProperty::IsValuePatternAvailable)
                    || flag(UIProperty::IsRangeValuePatternAvailable),
                handle: ControlHandle {
                    owner: runtime_id(&e),
                    path: elements.len().to_string(),
                },
            });
            for child in e
                .get_cached_children()
                .unwrap_or_default()
                .into_iter()
                .rev()
            {
                stack.push((depth + 1, child));
            }
            elements.push(e);
        }
        self.elements = elements;
        Ok(out)
    }

    /// The live element `h` names: one of the latest snapshot's, still the same control.
    fn element(&self, h: &ControlHandle) -> Result<UIElement, DesktopError> {
        let stale = || {
            DesktopError::Gone(
                "the control is gone (its window changed); observe the controls again".into(),
            )
        };
        let i: usize = h.path.parse().map_err(|_| stale())?;
        let e = self.elements.get(i).ok_or_else(stale)?;
        if runtime_id(e) != h.owner {
            return Err(stale());
        }
        Ok(e.clone())
    }
}
