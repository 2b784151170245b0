//! systemd over D-Bus (zbus): the system manager on the system bus, the user's own on the
//! session bus. `LoadUnit` names any unit, known or not, and its `LoadState` says which; a
//! job is followed to the `JobRemoved` signal that ends it.

use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt as _;
use zbus::proxy::CacheProperties;
use zbus::zvariant::OwnedObjectPath;

use crate::model::{Action, Manager, Outcome, ServiceError, ServiceState, State};

const DESTINATION: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER_INTERFACE: &str = "org.freedesktop.systemd1.Manager";
const UNIT_INTERFACE: &str = "org.freedesktop.systemd1.Unit";
const SERVICE_INTERFACE: &str = "org.freedesktop.systemd1.Service";

/// The service's command lines, each a program it may start.
const EXEC_PROPERTIES: [&str; 7] = [
    "ExecCondition",
    "ExecStartPre",
    "ExecStart",
    "ExecStartPost",
    "ExecReload",
    "ExecStop",
    "ExecStopPost",
];

/// One command line of a service as systemd reports it: path, argv, whether errors are
/// ignored, four timestamps, pid, exit code and status.
type ExecLine = (String, Vec<String>, bool, u64, u64, u64, u64, u32, i32, i32);

/// How long the bus and the manager get to answer one question (a job's own wait is the
/// caller's `settle`).
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

fn who(manager: Manager) -> &'static str {
    manager.as_str()
}

/// A D-Bus error as the caller should read it.
fn failure(manager: Manager, name: &str, e: zbus::Error) -> ServiceError {
    let manager = who(manager);
    match &e {
        zbus::Error::MethodError(error, message, _) => {
            let message = message.clone().unwrap_or_default();
            match error.as_str() {
                "org.freedesktop.systemd1.NoSuchUnit" => ServiceError::NotFound {
                    manager,
                    name: name.to_string(),
                },
                "org.freedesktop.systemd1.UnitMasked" | "org.freedesktop.systemd1.LoadFailed" => {
                    ServiceError::Unsupported(format!("name: `{name}`: {message}"))
                }
                "org.freedesktop.DBus.Error.AccessDenied"
                | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" => {
                    ServiceError::Refused {
                        manager,
                        why: format!(
                            "{message} (gantry runs without the privileges this needs; \
                             use [services] manager = \"user\" for your own services)"
                        ),
                    }
                }
                "org.freedesktop.systemd1.JobTypeNotApplicable"
                | "org.freedesktop.systemd1.OnlyByDependency"
                | "org.freedesktop.systemd1.UnitInactive" => {
                    ServiceError::Unsupported(format!("action: `{name}`: {message}"))
                }
                _ => ServiceError::Unavailable {
                    manager,
                    why: format!("{error}: {message}"),
                },
            }
        }
        _ => ServiceError::Unavailable {
            manager,
            why: e.to_string(),
        },
    }
}

/// `work`, or a timeout after [`ANSWER_WITHIN`].
async fn answer<T>(
    manager: Manager,
    work: impl Future<Output = Result<T, ServiceError>>,
) -> Result<T, ServiceError> {
    tokio::time::timeout(ANSWER_WITHIN, work)
        .await
        .map_err(|_| ServiceError::Timeout {
            manager: who(manager),
            after: ANSWER_WITHIN,
        })?
}

async fn connect(manager: Manager) -> Result<zbus::Connection, ServiceError> {
    let bus = match manager {
        Manager::User => zbus::Connection::session().await,
        _ => zbus::Connection::system().await,
    };
    bus.map_err(|e| ServiceError::Unavailable {
        manager: who(manager),
        why: format!("its bus cannot be reached: {e}"),
    })
}

async fn proxy<'a>(
    conn: &zbus::Connection,
    path: OwnedObjectPath,
    interface: &'static str,
) -> zbus::Result<zbus::Proxy<'a>> {
    zbus::proxy::Builder::new(conn)
        .destination(DESTINATION)?
        .path(path)?
        .interface(interface)?
        .cache_properties(CacheProperties::No)
        .build()
        .await
}

async fn manager_proxy(conn: &zbus::Connection) -> zbus::Result<zbus::Proxy<'static>> {
    proxy(
        conn,
        OwnedObjectPath::try_from(MANAGER_PATH).map_err(zbus::Error::from)?,
        MANAGER_INTERFACE,
    )
    .await
}

/// The unit's name for service `bare`.
fn unit_name(bare: &str) -> String {
    format!("{bare}.service")
}

/// systemd's active state as one of ours.
fn state_of(active: &str) -> State {
    match active {
        "active" => State::Running,
        "reloading" | "refreshing" => State::Reloading,
        "activating" => State::Starting,
        "deactivating" => State::Stopping,
        "failed" => State::Failed,
        // "inactive", "maintenance" and whatever a later systemd adds: not running.
        _ => State::Stopped,
    }
}

async fn read_state(
    conn: &zbus::Connection,
    manager: Manager,
    bare: &str,
) -> Result<ServiceState, ServiceError> {
    let name = unit_name(bare);
    let fail = |e| failure(manager, bare, e);
    let managed = manager_proxy(conn).await.map_err(fail)?;
    let path: OwnedObjectPath = managed
        .call("LoadUnit", &(name.as_str(),))
        .await
        .map_err(fail)?;
    let unit = proxy(conn, path.clone(), UNIT_INTERFACE)
        .await
        .map_err(fail)?;
    let load: String = unit.get_property("LoadState").await.map_err(fail)?;
    if load == "not-found" {
        return Err(ServiceError::NotFound {
            manager: who(manager),
            name: bare.to_string(),
        });
    }
    let id: String = unit.get_property("Id").await.map_err(fail)?;
    let active: String = unit.get_property("ActiveState").await.map_err(fail)?;
    let sub: String = unit.get_property("SubState").await.map_err(fail)?;
    let description: String = unit.get_property("Description").await.map_err(fail)?;
    let file_state: String = unit.get_property("UnitFileState").await.map_err(fail)?;
    let service = proxy(conn, path, SERVICE_INTERFACE).await.map_err(fail)?;
    let pid: u32 = service.get_property("MainPID").await.unwrap_or(0);
    let mut sources: Vec<PathBuf> = Vec::new();
    for file in ["FragmentPath", "SourcePath"] {
        let p: String = unit.get_property(file).await.map_err(fail)?;
        sources.push(PathBuf::from(p));
    }
    let drop_ins: Vec<String> = unit.get_property("DropInPaths").await.map_err(fail)?;
    sources.extend(drop_ins.into_iter().map(PathBuf::from));
    for exec in EXEC_PROPERTIES {
        let lines: Vec<ExecLine> = service.get_property(exec).await.map_err(fail)?;
        sources.extend(lines.into_iter().map(|l| PathBuf::from(l.0)));
    }
    let env_files: Vec<(String, bool)> = service
        .get_property("EnvironmentFiles")
        .await
        .map_err(fail)?;
    sources.extend(env_files.into_iter().map(|(p, _)| PathBuf::from(p)));
    let unit_dirs: Vec<String> = manager_proxy(conn)
        .await
        .map_err(fail)?
        .get_property("UnitPath")
        .await
        .map_err(fail)?;
    sources.extend(unit_dirs.into_iter().map(PathBuf::from));
    sources.retain(|p| !p.as_os_str().is_empty());
    let detail = if load == "loaded" {
        format!("{active} ({sub})")
    } else {
        format!("{active} ({sub}), {load}")
    };
    Ok(ServiceState {
        // An alias answers as the unit it names.
        name: if id.is_empty() { name } else { id },
        manager,
        state: state_of(&active),
        detail,
        description: (!description.is_empty()).then_some(description),
        pid: (pid != 0).then_some(pid),
        starts: (!file_state.is_empty()).then_some(file_state),
        sources,
    })
}

/// The state of service `bare` (no `.service` suffix) in `manager`.
pub async fn status(manager: Manager, bare: &str) -> Result<ServiceState, ServiceError> {
    answer(manager, async {
        let conn = connect(manager).await?;
        read_state(&conn, manager, bare).await
    })
    .await
}

/// Does `action` to service `bare` in `manager`, waiting up to `settle` for its job to end;
/// answers how the job ended and the state after.
pub async fn control(
    manager: Manager,
    bare: &str,
    action: Action,
    settle: Duration,
) -> Result<(Outcome, ServiceState), ServiceError> {
    let conn = answer(manager, connect(manager)).await?;
    // An unknown name needs no look first: the manager's NoSuchUnit is "not found".
    let fail = |e| failure(manager, bare, e);
    let (job, mut removed) = answer(manager, async {
        let managed = manager_proxy(&conn).await.map_err(fail)?;
        // The manager signals job ends only while some client subscribed; the subscription
        // ends with this connection.
        managed
            .call::<_, _, ()>("Subscribe", &())
            .await
            .map_err(fail)?;
        // Listening starts before the job does, so its end cannot be missed.
        let removed = managed.receive_signal("JobRemoved").await.map_err(fail)?;
        let method = match action {
            Action::Start => "StartUnit",
            Action::Stop => "StopUnit",
            Action::Restart => "RestartUnit",
            Action::Reload => "ReloadUnit",
        };
        let job: OwnedObjectPath = managed
            .call(method, &(unit_name(bare).as_str(), "replace"))
            .await
            .map_err(fail)?;
        Ok((job, removed))
    })
    .await?;
    let ended = tokio::time::timeout(settle, async {
        while let Some(signal) = removed.next().await {
            let Ok((_, path, _, result)) = signal
                .body()
                .deserialize::<(u32, OwnedObjectPath, String, String)>()
            else {
                continue;
            };
            if path == job {
                return Some(result);
            }
        }
        None
    })
    .await;
    let outcome = match ended {
        // "skipped": the job had nothing to do, which is no failure.
        Ok(Some(result)) if result == "done" || result == "skipped" => Outcome::Done,
        Ok(Some(_)) => Outcome::Failed,
        Ok(None) => {
            return Err(ServiceError::Unavailable {
                manager: who(manager),
                why: "the bus closed before the job ended".into(),
            });
        }
        Err(_) => Outcome::Pending,
    };
    let state = answer(manager, read_state(&conn, manager, bare)).await?;
    Ok((outcome, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_states_map_onto_ours() {
        assert_eq!(state_of("active"), State::Running);
        assert_eq!(state_of("activating"), State::Starting);
        assert_eq!(state_of("deactivating"), State::Stopping);
        assert_eq!(state_of("reloading"), State::Reloading);
        assert_eq!(state_of("failed"), State::Failed);
        assert_eq!(state_of("inactive"), State::Stopped);
        assert_eq!(unit_name("getty@tty1"), "getty@tty1.service");
    }
}
