//! Windows' Service Control Manager through windows-sys: `OpenServiceW` names a service
//! (an unknown one is `ERROR_SERVICE_DOES_NOT_EXIST`), `QueryServiceStatusEx` and
//! `QueryServiceConfigW` read it, `StartServiceW` and `ControlService` act on it. The calls
//! block, so they run on tokio's blocking pool.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_INSUFFICIENT_BUFFER, ERROR_SERVICE_ALREADY_RUNNING,
    ERROR_SERVICE_DOES_NOT_EXIST, ERROR_SERVICE_NEVER_STARTED, ERROR_SERVICE_NOT_ACTIVE,
    ERROR_SERVICE_SPECIFIC_ERROR, GetLastError,
};
use windows_sys::Win32::System::Services::{
    CloseServiceHandle, ControlService, OpenSCManagerW, OpenServiceW, QUERY_SERVICE_CONFIGW,
    QueryServiceConfigW, QueryServiceStatusEx, SC_HANDLE, SC_MANAGER_CONNECT,
    SC_STATUS_PROCESS_INFO, SERVICE_CONTROL_STOP, SERVICE_QUERY_CONFIG, SERVICE_QUERY_STATUS,
    SERVICE_START, SERVICE_STATUS, SERVICE_STATUS_PROCESS, SERVICE_STOP, StartServiceW,
};

use crate::model::{Action, Manager, Outcome, ServiceError, ServiceState, State};

const MANAGER: &str = "scm";

/// An open SCM handle, closed when dropped.
struct Handle(SC_HANDLE);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from OpenSCManagerW or OpenServiceW and is closed once.
        unsafe { CloseServiceHandle(self.0) };
    }
}

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

fn last_error() -> u32 {
    // SAFETY: reads the calling thread's last-error value.
    unsafe { GetLastError() }
}

fn os_failure(name: &str, what: &str, code: u32) -> ServiceError {
    match code {
        ERROR_SERVICE_DOES_NOT_EXIST => ServiceError::NotFound {
            manager: MANAGER,
            name: name.to_string(),
        },
        ERROR_ACCESS_DENIED => ServiceError::Refused {
            manager: MANAGER,
            why: format!(
                "{what}: access denied (gantry runs without the rights this service asks)"
            ),
        },
        _ => ServiceError::Unavailable {
            manager: MANAGER,
            why: format!("{what}: {}", std::io::Error::from_raw_os_error(code as i32)),
        },
    }
}

fn open(name: &str, access: u32) -> Result<Handle, ServiceError> {
    // SAFETY: null machine and database names ask for the local active database.
    let scm = unsafe { OpenSCManagerW(std::ptr::null(), std::ptr::null(), SC_MANAGER_CONNECT) };
    if scm.is_null() {
        return Err(os_failure(name, "opening the manager", last_error()));
    }
    let scm = Handle(scm);
    let wname = wide(name);
    // SAFETY: `wname` is NUL-terminated and outlives the call.
    let service = unsafe { OpenServiceW(scm.0, wname.as_ptr(), access) };
    if service.is_null() {
        return Err(os_failure(name, "opening the service", last_error()));
    }
    Ok(Handle(service))
}

fn query(service: &Handle, name: &str) -> Result<SERVICE_STATUS_PROCESS, ServiceError> {
    let mut status = SERVICE_STATUS_PROCESS::default();
    let mut needed = 0u32;
    // SAFETY: the buffer is a SERVICE_STATUS_PROCESS, as long as the size given.
    let ok = unsafe {
        QueryServiceStatusEx(
            service.0,
            SC_STATUS_PROCESS_INFO,
            (&raw mut status).cast::<u8>(),
            std::mem::size_of::<SERVICE_STATUS_PROCESS>() as u32,
            &mut needed,
        )
    };
    if ok == 0 {
        return Err(os_failure(name, "reading its status", last_error()));
    }
    Ok(status)
}

/// A PWSTR the SCM filled in, as a String.
fn text(p: *const u16) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let mut len = 0;
    // SAFETY: the SCM's strings are NUL-terminated inside the buffer it filled.
    while unsafe { *p.add(len) } != 0 {
        len += 1;
    }
    // SAFETY: `len` u16s were just read from `p`.
    let s = String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(p, len) });
    (!s.is_empty()).then_some(s)
}

/// The program of a service's command line: quoted, or up to its `.exe`, or (unquoted
/// without one) the line as Windows would first try it, up to its first space.
fn program_of(line: &str) -> std::path::PathBuf {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix('"') {
        return rest.split('"').next().unwrap_or_default().into();
    }
    match line.to_ascii_lowercase().find(".exe") {
        Some(end) => line[..end + 4].into(),
        None => line.split(' ').next().unwrap_or_default().into(),
    }
}

/// The display name, the start type and the program.
fn config(service: &Handle) -> (Option<String>, Option<String>, Option<std::path::PathBuf>) {
    let mut needed = 0u32;
    // SAFETY: a null buffer of size 0 asks for the size needed.
    let ok = unsafe { QueryServiceConfigW(service.0, std::ptr::null_mut(), 0, &mut needed) };
    if ok != 0 || last_error() != ERROR_INSUFFICIENT_BUFFER || needed == 0 {
        return (None, None, None);
    }
    // u64s keep the buffer aligned for the struct at its start.
    let mut buf = vec![0u64; (needed as usize).div_ceil(8)];
    let config = buf.as_mut_ptr().cast::<QUERY_SERVICE_CONFIGW>();
    // SAFETY: the buffer is at least `needed` bytes and aligned for QUERY_SERVICE_CONFIGW.
    let ok = unsafe { QueryServiceConfigW(service.0, config, needed, &mut needed) };
    if ok == 0 {
        return (None, None, None);
    }
    // SAFETY: the call succeeded, so the struct at the start of the buffer is filled in.
    let c = unsafe { &*config };
    let starts = match c.dwStartType {
        0 => "boot",
        1 => "system",
        2 => "auto",
        3 => "demand",
        4 => "disabled",
        _ => "other",
    };
    (
        text(c.lpDisplayName),
        Some(starts.to_string()),
        text(c.lpBinaryPathName).map(|l| program_of(&l)),
    )
}

fn state_of(current: u32) -> (State, &'static str) {
    match current {
        1 => (State::Stopped, "STOPPED"),
        2 => (State::Starting, "START_PENDING"),
        3 => (State::Stopping, "STOP_PENDING"),
        4 => (State::Running, "RUNNING"),
        5 => (State::Starting, "CONTINUE_PENDING"),
        6 => (State::Stopping, "PAUSE_PENDING"),
        7 => (State::Stopped, "PAUSED"),
        _ => (State::Failed, "UNKNOWN"),
    }
}

fn read(service: &Handle, name: &str) -> Result<ServiceState, ServiceError> {
    let status = query(service, name)?;
    let (state, words) = state_of(status.dwCurrentState);
    // "Never started" is how a service that never ran stands, not an exit code.
    let exit = match status.dwWin32ExitCode {
        ERROR_SERVICE_NEVER_STARTED => 0,
        ERROR_SERVICE_SPECIFIC_ERROR => status.dwServiceSpecificExitCode.max(1),
        code => code,
    };
    // A stopped service that exited with an error is a failure, as systemd would say.
    let state = if state == State::Stopped && exit != 0 {
        State::Failed
    } else {
        state
    };
    let detail = if exit != 0 {
        format!("{words} (exit code {exit})")
    } else {
        words.to_string()
    };
    let (description, starts, program) = config(service);
    Ok(ServiceState {
        name: name.to_string(),
        manager: Manager::Scm,
        state,
        detail,
        description,
        pid: (status.dwProcessId != 0).then_some(status.dwProcessId),
        starts,
        sources: program.into_iter().collect(),
    })
}

/// Waits up to `until` for the service to leave its pending states.
fn settle(service: &Handle, name: &str, until: Instant) -> Result<bool, ServiceError> {
    loop {
        let status = query(service, name)?;
        if !matches!(status.dwCurrentState, 2 | 3 | 5 | 6) {
            return Ok(true);
        }
        if Instant::now() >= until {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn start(service: &Handle, name: &str) -> Result<(), ServiceError> {
    // SAFETY: no arguments are passed.
    let ok = unsafe { StartServiceW(service.0, 0, std::ptr::null()) };
    if ok == 0 {
        let code = last_error();
        if code != ERROR_SERVICE_ALREADY_RUNNING {
            return Err(os_failure(name, "starting it", code));
        }
    }
    Ok(())
}

fn stop(service: &Handle, name: &str) -> Result<(), ServiceError> {
    let mut status = SERVICE_STATUS::default();
    // SAFETY: `status` is a SERVICE_STATUS the call fills in.
    let ok = unsafe { ControlService(service.0, SERVICE_CONTROL_STOP, &mut status) };
    if ok == 0 {
        let code = last_error();
        if code != ERROR_SERVICE_NOT_ACTIVE {
            return Err(os_failure(name, "stopping it", code));
        }
    }
    Ok(())
}

fn control_now(
    name: &str,
    action: Action,
    wait: Duration,
) -> Result<(Outcome, ServiceState), ServiceError> {
    if action == Action::Reload {
        return Err(ServiceError::Unsupported(format!(
            "action: Windows services have no reload; restart `{name}` instead"
        )));
    }
    let until = Instant::now() + wait;
    // Only the rights the action needs: a user may hold one and not the other.
    let rights = match action {
        Action::Start => SERVICE_START,
        Action::Stop => SERVICE_STOP,
        _ => SERVICE_START | SERVICE_STOP,
    };
    let service = open(name, SERVICE_QUERY_STATUS | SERVICE_QUERY_CONFIG | rights)?;
    // One on its way up or down accepts no control until it gets there.
    if !settle(&service, name, until)? {
        return Ok((Outcome::Pending, read(&service, name)?));
    }
    if matches!(action, Action::Stop | Action::Restart) {
        stop(&service, name)?;
        if !settle(&service, name, until)? {
            return Ok((Outcome::Pending, read(&service, name)?));
        }
    }
    if matches!(action, Action::Start | Action::Restart) {
        start(&service, name)?;
    }
    let settled = settle(&service, name, until)?;
    let state = read(&service, name)?;
    let wanted = match action {
        Action::Stop => State::Stopped,
        _ => State::Running,
    };
    // A service that stopped is stopped, whatever its last run's exit code said.
    let reached =
        state.state == wanted || (wanted == State::Stopped && state.state == State::Failed);
    let outcome = if !settled {
        Outcome::Pending
    } else if reached {
        Outcome::Done
    } else {
        Outcome::Failed
    };
    Ok((outcome, state))
}

/// How long the manager may hold a call past its own wait (a start or a stop can block
/// for about 30 s inside the SCM).
const GRACE: Duration = Duration::from_secs(40);

/// The state of service `name` in the Service Control Manager (`manager` is always
/// [`Manager::Scm`] here).
pub async fn status(_manager: Manager, name: &str) -> Result<ServiceState, ServiceError> {
    let name = name.to_string();
    crate::worker::blocking(MANAGER, GRACE, move || {
        let service = open(&name, SERVICE_QUERY_STATUS | SERVICE_QUERY_CONFIG)?;
        read(&service, &name)
    })
    .await
}

/// Does `action` to service `name`, waiting up to `settle` for it to leave its pending
/// states; answers how it ended and the state after.
pub async fn control(
    _manager: Manager,
    name: &str,
    action: Action,
    settle: Duration,
) -> Result<(Outcome, ServiceState), ServiceError> {
    let name = name.to_string();
    crate::worker::blocking(MANAGER, settle + GRACE, move || {
        control_now(&name, action, settle)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_lines_program_is_found_as_windows_finds_it() {
        assert_eq!(
            program_of(r#""C:\Program Files\A\a.exe" -k"#),
            std::path::PathBuf::from(r"C:\Program Files\A\a.exe")
        );
        assert_eq!(
            program_of(r"C:\Windows\system32\svchost.exe -k netsvcs"),
            std::path::PathBuf::from(r"C:\Windows\system32\svchost.exe")
        );
        assert_eq!(
            program_of(r"C:\tools\run --x"),
            std::path::PathBuf::from(r"C:\tools\run")
        );
    }
}
