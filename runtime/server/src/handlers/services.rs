//! `service.status` and `service.control` (the Shell connector, seed 002's milestone 2): the
//! services `[services] allowed` names, through [`services`], each call decided by Cedar on
//! `Service::"name"`.

use generated::resources::Service;
use generated::shell::{
    ServiceControlArgs, ServiceControlArgsAction, ServiceControlOperation, ServiceControlOutput,
    ServiceControlOutputResult, ServiceStatusArgs, ServiceStatusOutput, limits,
};
use generated::types::{ServiceState, ServiceStateManager, ServiceStateState};
use services::{Action, Manager, Outcome, ServiceError, State};
use tool_api::{CallContext, ErrorCode, Reply, ToolError};

use crate::ops::path_policy::Roots;

/// `[services]`: which services may be reached, in which manager.
#[derive(Debug, Default)]
pub struct ServiceTools {
    config: config::services::ServicesConfig,
}

impl ServiceTools {
    /// The services `config` allows.
    pub fn new(config: config::services::ServicesConfig) -> Self {
        ServiceTools { config }
    }

    fn manager(&self) -> Manager {
        if cfg!(windows) {
            Manager::Scm
        } else if self.config.user_manager() {
            Manager::User
        } else {
            Manager::System
        }
    }

    /// The service `name` names, bare (no `.service`), as Cedar sees it.
    fn resource(&self, name: &str) -> Result<Service, ToolError> {
        let bare = config::services::service_name(name)
            .map_err(|why| ToolError::invalid_input(format!("name: {why}")))?;
        // An allowed name as the config spells it (Windows matches without case), so a
        // policy naming that spelling holds whatever case the call used.
        let allowed = self.config.allowed_as(bare);
        Ok(Service {
            id: allowed.unwrap_or(bare).to_string(),
            allowed: allowed.is_some(),
            manager: self.manager().as_str().to_string(),
        })
    }

    /// The base policy refuses services the config does not name; this is its fail-closed
    /// twin, so no policy set can reach the manager for one.
    fn allowed(service: &Service) -> Result<(), ToolError> {
        if service.allowed {
            Ok(())
        } else {
            Err(ToolError::new(
                ErrorCode::CommandNotAllowed,
                format!(
                    "name: `{}` is not allowed under [services] in the config",
                    service.id
                ),
            ))
        }
    }

    /// An alias answers as the unit it names: that unit must be allowed too.
    fn same_unit(
        &self,
        service: &Service,
        state: &services::ServiceState,
    ) -> Result<(), ToolError> {
        let unit = state.bare_name();
        if unit == service.id || self.config.allows(unit) {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::CommandNotAllowed,
            format!(
                "name: `{}` is another name of `{}`, which [services] in the config does not allow",
                service.id, state.name
            ),
        ))
    }

    pub(super) async fn status(
        &self,
        cx: &CallContext,
        args: ServiceStatusArgs,
    ) -> Result<Reply<ServiceStatusOutput>, ToolError> {
        let service = self.resource(&args.name)?;
        cx.authorize(generated::shell::actions::SERVICE_STATUS, &service, ())
            .map_err(|e| e.at(&format!("name `{}`", service.id)))?;
        Self::allowed(&service)?;
        let state = services::status(self.manager(), &service.id)
            .await
            .map_err(|e| refusal(&args.name, e))?;
        self.same_unit(&service, &state)?;
        Ok(Reply::new(ServiceStatusOutput {
            service: shown(state),
        }))
    }

    pub(super) async fn control(
        &self,
        roots: &Roots,
        cx: &CallContext,
        args: ServiceControlArgs,
    ) -> Result<Reply<ServiceControlOutput>, ToolError> {
        let service = self.resource(&args.name)?;
        let (operation, action) = match args.action {
            ServiceControlArgsAction::Start => (ServiceControlOperation::Start, Action::Start),
            ServiceControlArgsAction::Stop => (ServiceControlOperation::Stop, Action::Stop),
            ServiceControlArgsAction::Restart => {
                (ServiceControlOperation::Restart, Action::Restart)
            }
            ServiceControlArgsAction::Reload => (ServiceControlOperation::Reload, Action::Reload),
        };
        cx.authorize(operation.action(), &service, ())
            .map_err(|e| e.at(&format!("name `{}`", service.id)))?;
        Self::allowed(&service)?;
        // What a start would run is read first: an alias of a unit not allowed, or a unit
        // whose files lie where the model can write, is refused before the manager acts.
        let before = services::status(self.manager(), &service.id)
            .await
            .map_err(|e| refusal(&args.name, e))?;
        self.same_unit(&service, &before)?;
        if let Some(source) = before.sources.iter().find(|p| roots.holds_as_written(p)) {
            return Err(ToolError::new(
                ErrorCode::CommandNotAllowed,
                format!(
                    "name: `{}` is defined or run from {}, inside an approved root where the model can write; gantry does not drive it",
                    service.id,
                    source.display()
                ),
            ));
        }
        let settle = limits::service_control::SETTLE.duration();
        let (outcome, state) = services::control(self.manager(), &service.id, action, settle)
            .await
            .map_err(|e| refusal(&args.name, e))?;
        Ok(Reply::new(ServiceControlOutput {
            result: match outcome {
                Outcome::Done => ServiceControlOutputResult::Done,
                Outcome::Failed => ServiceControlOutputResult::Failed,
                Outcome::Pending => ServiceControlOutputResult::Pending,
            },
            service: shown(state),
        }))
    }
}

/// The manager's answer as the tool's error, naming the input at fault.
fn refusal(name: &str, e: ServiceError) -> ToolError {
    let code = match &e {
        ServiceError::NotFound { .. } => ErrorCode::NotFound,
        ServiceError::Unsupported(_) => ErrorCode::InvalidInput,
        ServiceError::Timeout { .. } => ErrorCode::Timeout,
        ServiceError::Refused { .. } | ServiceError::Unavailable { .. } => ErrorCode::OsError,
    };
    let message = match &e {
        ServiceError::Unsupported(why) => why.clone(),
        _ => format!("name: `{name}`: {e}"),
    };
    ToolError::new(code, message)
}

/// A service's state as the tool's output shows it.
fn shown(s: services::ServiceState) -> ServiceState {
    ServiceState {
        name: s.name,
        manager: match s.manager {
            Manager::System => ServiceStateManager::System,
            Manager::User => ServiceStateManager::User,
            Manager::Scm => ServiceStateManager::Scm,
        },
        state: match s.state {
            State::Running => ServiceStateState::Running,
            State::Stopped => ServiceStateState::Stopped,
            State::Starting => ServiceStateState::Starting,
            State::Stopping => ServiceStateState::Stopping,
            State::Reloading => ServiceStateState::Reloading,
            State::Failed => ServiceStateState::Failed,
        },
        detail: s.detail,
        description: s.description,
        pid: s.pid.map(i64::from),
        starts: s.starts,
    }
}
