//! UI controls through AT-SPI: a window's accessible tree read in one call per application
//! (`Cache.GetItems`), positions fetched concurrently, and the few actions gantry takes on a
//! control (its default action, setting its text or value, giving it focus).

use std::collections::HashMap;

use atspi::proxy::accessible::AccessibleProxy;
use atspi::proxy::action::ActionProxy;
use atspi::proxy::cache::CacheProxy;
use atspi::proxy::component::ComponentProxy;
use atspi::proxy::editable_text::EditableTextProxy;
use atspi::proxy::text::TextProxy;
use atspi::proxy::value::ValueProxy;
use atspi::{CoordType, Interface, InterfaceSet, Role, State, StateSet};
use futures_util::future::join_all;
use zbus::proxy::CacheProperties;

use crate::DesktopError;
use crate::model::{Control, ControlHandle, Rect, WindowInfo};

const REGISTRY: &str = "org.a11y.atspi.Registry";
const ROOT: &str = "/org/a11y/atspi/accessible/root";
/// How long an application gets to answer: one that hangs must not hang gantry.
const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// `work`, or a timeout error naming `what` once [`ANSWER_WITHIN`] has passed.
async fn bounded<T>(
    what: &str,
    work: impl std::future::Future<Output = Result<T, DesktopError>>,
) -> Result<T, DesktopError> {
    tokio::time::timeout(ANSWER_WITHIN, work)
        .await
        .unwrap_or_else(|_| {
            Err(DesktopError::Timeout(format!(
                "the application did not answer ({what}) within {} s",
                ANSWER_WITHIN.as_secs()
            )))
        })
}

fn failed(what: &str) -> impl FnOnce(zbus::Error) -> DesktopError + '_ {
    move |e| DesktopError::Failed(format!("accessibility bus: {what}: {e}"))
}

/// A control as its application's cache lists it.
#[derive(Debug, Clone)]
struct Item {
    path: String,
    parent: String,
    index: i32,
    ifaces: InterfaceSet,
    role: Role,
    name: String,
    states: StateSet,
}

/// The accessibility bus, connected on first use and again after it went away.
#[derive(Debug, Default)]
pub struct A11y {
    conn: tokio::sync::Mutex<Option<zbus::Connection>>,
}

macro_rules! proxy {
    ($ty:ident, $conn:expr, $dest:expr, $path:expr) => {
        $ty::builder($conn)
            .destination($dest.to_owned())
            .and_then(|b| b.path($path.to_owned()))
            .map(|b| b.cache_properties(CacheProperties::No))
            .map_err(failed("proxy"))?
            .build()
            .await
            .map_err(failed("proxy"))?
    };
}

impl A11y {
    async fn connection(&self) -> Result<zbus::Connection, DesktopError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let unavailable = |e: zbus::Error| {
            DesktopError::Unavailable(format!(
                "the accessibility bus cannot be reached ({e}); UI controls need AT-SPI (at-spi2-core) and a session bus"
            ))
        };
        let session = zbus::Connection::session().await.map_err(unavailable)?;
        let bus = atspi::proxy::bus::BusProxy::new(&session)
            .await
            .map_err(unavailable)?;
        let address = bus.get_address().await.map_err(unavailable)?;
        let conn = zbus::connection::Builder::address(address.as_str())
            .map_err(unavailable)?
            .build()
            .await
            .map_err(unavailable)?;
        // Toolkits keep their control cache (one call for a whole window) only while some
        // client listens for their events, as screen readers do; so gantry listens to one.
        let registry = atspi::proxy::registry::RegistryProxy::new(&conn)
            .await
            .map_err(unavailable)?;
        registry
            .register_event("object:children-changed")
            .await
            .map_err(unavailable)?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    async fn forget(&self) {
        *self.conn.lock().await = None;
    }

    /// The controls of `window` that are shown, depth first, at most `max`.
    pub async fn controls(
        &self,
        window: &WindowInfo,
        max: usize,
    ) -> Result<Vec<Control>, DesktopError> {
        let conn = bounded("accessibility bus", self.connection()).await?;
        match bounded("controls", self.controls_on(&conn, window, max)).await {
            Err(DesktopError::Failed(m)) if m.contains("Disconnected") || m.contains("closed") => {
                // The bus restarted: one more try on a fresh connection.
                self.forget().await;
                let conn = bounded("accessibility bus", self.connection()).await?;
                bounded("controls", self.controls_on(&conn, window, max)).await
            }
            other => other,
        }
    }

    async fn controls_on(
        &self,
        conn: &zbus::Connection,
        window: &WindowInfo,
        max: usize,
    ) -> Result<Vec<Control>, DesktopError> {
        let (app, frame) = self.find_frame(conn, window).await?;
        let items = cached_items(conn, &app).await?;
        let mut children: HashMap<&str, Vec<&Item>> = HashMap::new();
        for it in &items {
            children.entry(it.parent.as_str()).or_default().push(it);
        }
        for list in children.values_mut() {
            list.sort_by_key(|i| i.index);
        }
        // Depth first from the frame; hidden subtrees and the insides of controls that manage
        // their own descendants (long lists) are left out.
        let mut picked: Vec<(usize, &Item)> = Vec::new();
        let mut stack: Vec<(usize, &str)> = vec![(0, frame.as_str())];
        let mut visited = 0usize;
        while let Some((depth, path)) = stack.pop() {
            visited += 1;
            if picked.len() >= max || visited > max * 20 {
                break;
            }
            let Some(kids) = children.get(path) else {
                continue;
            };
            let mut next = Vec::new();
            for it in kids {
                if !it.states.contains(State::Showing) {
                    continue;
                }
                let shown = is_interesting(it);
                if shown && picked.len() < max {
                    picked.push((depth, it));
                }
                if !it.states.contains(State::ManagesDescendants) {
                    next.push((if shown { depth + 1 } else { depth }, it.path.as_str()));
                }
            }
            stack.extend(next.into_iter().rev());
        }
        // Positions and texts of every picked control, all requests in flight at once.
        let lookups = picked.iter().map(|(_, it)| {
            let conn = conn.clone();
            let app = app.clone();
            let path = it.path.clone();
            let ifaces = it.ifaces;
            // A password's text is never read, not even its length.
            let editable = it.states.contains(State::Editable) && it.role != Role::PasswordText;
            let known_name = (!it.name.is_empty()).then(|| it.name.clone());
            async move {
                // Toolkits leave most names out of their cache (a button's comes from its
                // label): ask for each one the cache did not give.
                let name = match known_name {
                    Some(n) => n,
                    None => name_of(&conn, &app, &path).await.unwrap_or_default(),
                };
                let rect = if ifaces.contains(Interface::Component) {
                    extents(&conn, &app, &path).await.ok().flatten()
                } else {
                    None
                };
                let value: Option<String> = if ifaces.contains(Interface::Text) && editable {
                    text_of(&conn, &app, &path).await.ok()
                } else if ifaces.contains(Interface::Value) && !ifaces.contains(Interface::Text) {
                    value_of(&conn, &app, &path).await.ok()
                } else {
                    None
                };
                (name, rect, value)
            }
        });
        let looked = join_all(lookups).await;
        Ok(picked
            .into_iter()
            .zip(looked)
            .map(|((depth, it), (name, rect, value))| Control {
                depth,
                role: it.role.name().to_string(),
                name: name.chars().filter(|c| !c.is_control()).collect(),
                value: value.map(|v| crate::model::shown_value(&v)),
                states: notable_states(it.states),
                rect,
                can_press: it.ifaces.contains(Interface::Action),
                can_set: it.ifaces.contains(Interface::EditableText)
                    || it.ifaces.contains(Interface::Value),
                handle: ControlHandle {
                    owner: app.clone(),
                    path: it.path.clone(),
                },
            })
            .collect())
    }

    /// The application (bus name) and the frame object of `window`: the application whose
    /// process owns the window, and its frame with the window's title (or, failing that, its
    /// position).
    async fn find_frame(
        &self,
        conn: &zbus::Connection,
        window: &WindowInfo,
    ) -> Result<(String, String), DesktopError> {
        let root = proxy!(AccessibleProxy, conn, REGISTRY, ROOT);
        let apps = root.get_children().await.map_err(failed("applications"))?;
        let dbus = zbus::fdo::DBusProxy::new(conn)
            .await
            .map_err(failed("bus"))?;
        // Controls are only taken from the process that owns the window: a title or a
        // position alone could hand another application's controls out under this window.
        let Some(pid) = window.pid else {
            return Err(DesktopError::Gone(format!(
                "window {:#x} does not say which process owns it (no _NET_WM_PID), so its controls cannot be told from another application's; use coordinates from a screenshot",
                window.id
            )));
        };
        let mut best: Option<(u32, String, String)> = None;
        for app in apps {
            let Some(name) = app.name_as_str().map(str::to_owned) else {
                continue;
            };
            let Ok(bus_name) = zbus::names::BusName::try_from(name.as_str()) else {
                continue;
            };
            match dbus.get_connection_unix_process_id(bus_name).await {
                Ok(p) if p == pid => {}
                _ => continue,
            }
            let app_root = proxy!(AccessibleProxy, conn, name.as_str(), app.path_as_str());
            let Ok(frames) = app_root.get_children().await else {
                continue;
            };
            for f in frames {
                let path = f.path_as_str().to_string();
                let acc = proxy!(AccessibleProxy, conn, name.as_str(), path.as_str());
                let title = acc.name().await.unwrap_or_default();
                let rect = extents(conn, &name, &path).await.ok().flatten();
                // Title equal and position overlapping is certain; either alone is a guess.
                let mut score = 0;
                if title == window.title && !title.is_empty() {
                    score += 2;
                }
                if rect.is_some_and(|r| r.intersect(&window.rect).is_some()) {
                    score += 1;
                }
                if score > 0 && best.as_ref().is_none_or(|b| score > b.0) {
                    best = Some((score, name.clone(), path));
                }
            }
        }
        best.map(|(_, app, frame)| (app, frame)).ok_or_else(|| {
            DesktopError::Gone(format!(
                "window {:#x} (\"{}\") exposes no UI controls over AT-SPI (its toolkit may not support accessibility); use coordinates from a screenshot",
                window.id, window.title
            ))
        })
    }

    /// Where control `h` is now, or why it cannot be used: gone, or no longer shown.
    pub async fn locate(&self, h: &ControlHandle) -> Result<Option<Rect>, DesktopError> {
        bounded("locate", self.locate_on(h)).await
    }

    async fn locate_on(&self, h: &ControlHandle) -> Result<Option<Rect>, DesktopError> {
        let conn = self.connection().await?;
        let acc = proxy!(AccessibleProxy, &conn, h.owner.as_str(), h.path.as_str());
        let states = acc.get_state().await.map_err(|_| {
            DesktopError::Gone(
                "the control is gone (its window changed); observe the controls again".into(),
            )
        })?;
        if !states.contains(State::Showing) {
            return Err(DesktopError::Gone(
                "the control is no longer shown; observe the controls again".into(),
            ));
        }
        extents(&conn, &h.owner, &h.path).await
    }

    /// Runs the control's default action; returns the action's name.
    pub async fn press(&self, h: &ControlHandle) -> Result<String, DesktopError> {
        bounded("action", self.press_on(h)).await
    }

    async fn press_on(&self, h: &ControlHandle) -> Result<String, DesktopError> {
        let conn = self.connection().await?;
        let action = proxy!(ActionProxy, &conn, h.owner.as_str(), h.path.as_str());
        let name = action.get_name(0).await.unwrap_or_default();
        let done = action.do_action(0).await.map_err(failed("action"))?;
        if !done {
            return Err(DesktopError::Failed(format!(
                "the control refused its action `{name}`"
            )));
        }
        Ok(name)
    }

    /// Replaces the control's text (editable text) or sets its value (a number).
    pub async fn set_value(
        &self,
        h: &ControlHandle,
        text: &str,
        editable: bool,
    ) -> Result<&'static str, DesktopError> {
        bounded("set value", self.set_value_on(h, text, editable)).await
    }

    async fn set_value_on(
        &self,
        h: &ControlHandle,
        text: &str,
        editable: bool,
    ) -> Result<&'static str, DesktopError> {
        let conn = self.connection().await?;
        if editable {
            let e = proxy!(EditableTextProxy, &conn, h.owner.as_str(), h.path.as_str());
            // A control without editable text answers with an error: it may take a number.
            if e.set_text_contents(text).await.unwrap_or(false) {
                return Ok("editable text");
            }
        }
        let Ok(number) = text.trim().parse::<f64>() else {
            return Err(DesktopError::Input(format!(
                "the control takes a number, and `{}` is not one",
                crate::model::shown_value(text)
            )));
        };
        let v = proxy!(ValueProxy, &conn, h.owner.as_str(), h.path.as_str());
        v.set_current_value(number)
            .await
            .map_err(failed("set value"))?;
        Ok("value")
    }

    /// Gives the control the keyboard focus.
    pub async fn focus(&self, h: &ControlHandle) -> Result<(), DesktopError> {
        bounded("focus", self.focus_on(h)).await
    }

    async fn focus_on(&self, h: &ControlHandle) -> Result<(), DesktopError> {
        let conn = self.connection().await?;
        let c = proxy!(ComponentProxy, &conn, h.owner.as_str(), h.path.as_str());
        if c.grab_focus().await.map_err(failed("focus"))? {
            Ok(())
        } else {
            Err(DesktopError::Failed("the control refused the focus".into()))
        }
    }
}

async fn cached_items(conn: &zbus::Connection, app: &str) -> Result<Vec<Item>, DesktopError> {
    let cache = proxy!(CacheProxy, conn, app, "/org/a11y/atspi/cache");
    let mut first = cache.get_items().await;
    if first.is_err() {
        // An application that saw the listener arrive just now may still be building its cache.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        first = cache.get_items().await;
    }
    match first {
        Ok(items) => Ok(items
            .into_iter()
            .map(|i| Item {
                path: i.object.path_as_str().to_string(),
                parent: i.parent.path_as_str().to_string(),
                index: i.index,
                ifaces: i.ifaces,
                role: i.role,
                name: i.name,
                states: i.states,
            })
            .collect()),
        Err(_) => {
            // Toolkits before at-spi2-core 2.34 answer with the older item shape.
            let items = cache.get_legacy_items().await.map_err(failed("controls"))?;
            let mut index_of: HashMap<String, i32> = HashMap::new();
            for it in &items {
                for (n, c) in it.children.iter().enumerate() {
                    index_of.insert(
                        c.path_as_str().to_string(),
                        i32::try_from(n).unwrap_or(i32::MAX),
                    );
                }
            }
            Ok(items
                .into_iter()
                .map(|i| {
                    let path = i.object.path_as_str().to_string();
                    Item {
                        index: index_of.get(&path).copied().unwrap_or(0),
                        path,
                        parent: i.parent.path_as_str().to_string(),
                        ifaces: i.ifaces,
                        role: i.role,
                        name: i.name,
                        states: i.states,
                    }
                })
                .collect())
        }
    }
}

async fn extents(
    conn: &zbus::Connection,
    app: &str,
    path: &str,
) -> Result<Option<Rect>, DesktopError> {
    let c = proxy!(ComponentProxy, conn, app, path);
    let (x, y, w, h) = c
        .get_extents(CoordType::Screen)
        .await
        .map_err(failed("position"))?;
    Ok((w > 0 && h > 0).then(|| Rect {
        x,
        y,
        w: w.unsigned_abs(),
        h: h.unsigned_abs(),
    }))
}

async fn name_of(conn: &zbus::Connection, app: &str, path: &str) -> Result<String, DesktopError> {
    let a = proxy!(AccessibleProxy, conn, app, path);
    a.name().await.map_err(failed("name"))
}

async fn text_of(conn: &zbus::Connection, app: &str, path: &str) -> Result<String, DesktopError> {
    let t = proxy!(TextProxy, conn, app, path);
    // Only the start is shown; never ask a document for all of itself.
    let end = i32::try_from(crate::model::VALUE_CHARS * 2).unwrap_or(i32::MAX);
    t.get_text(0, end).await.map_err(failed("text"))
}

async fn value_of(conn: &zbus::Connection, app: &str, path: &str) -> Result<String, DesktopError> {
    let v = proxy!(ValueProxy, conn, app, path);
    let n = v.current_value().await.map_err(failed("value"))?;
    Ok(format!("{n}"))
}

/// Whether a control is worth a line: anything shown but the containers that only lay
/// others out (their children are listed in their place).
fn is_interesting(it: &Item) -> bool {
    !matches!(
        it.role,
        Role::Filler
            | Role::Panel
            | Role::ScrollPane
            | Role::Viewport
            | Role::LayeredPane
            | Role::SplitPane
            | Role::RedundantObject
            | Role::Unknown
            | Role::Invalid
            | Role::Separator
    ) || it.ifaces.contains(Interface::Action)
        || it.ifaces.contains(Interface::EditableText)
}

fn notable_states(s: StateSet) -> Vec<&'static str> {
    let mut out = Vec::new();
    if s.contains(State::Focused) {
        out.push("focused");
    }
    if s.contains(State::Checked) {
        out.push("checked");
    }
    if s.contains(State::Selected) {
        out.push("selected");
    }
    if s.contains(State::Expanded) {
        out.push("expanded");
    }
    if s.contains(State::Pressed) {
        out.push("pressed");
    }
    if !s.contains(State::Sensitive) && !s.contains(State::Enabled) {
        out.push("disabled");
    }
    out
}
