//! `session`: search and read recorded sessions. gantry's own calls are always visible to
//! it; an imported transcript only when its working directory lies inside an approved root
//! (or `[session] all_directories` is on): transcripts hold pasted secrets.

use std::path::Path;

use confine::path_policy::Roots;
use generated::core::{SessionArgs, SessionArgsAction, SessionOutput, actions, limits};
use generated::resources::Session;
use recordings::store::SessionInfo;
use recordings::{Budgets, Search, ViewError};
use tool_api::{CallContext, ErrorCode, Reply, ToolError};

use crate::recorder::Recorder;

const BUDGETS: Budgets = Budgets {
    search_tokens: limits::session::SEARCH_TOKENS,
    read_tokens: limits::session::READ_TOKENS,
    newest: limits::session::NEWEST,
};

fn error_of(e: ViewError) -> ToolError {
    match e {
        ViewError::UnknownSession(_) => {
            ToolError::new(ErrorCode::NotFound, format!("session_id: {e}"))
        }
        ViewError::BadCursor(..) => ToolError::new(ErrorCode::InvalidInput, format!("cursor: {e}")),
        ViewError::UnknownRef(_) => ToolError::new(ErrorCode::InvalidInput, format!("query: {e}")),
        ViewError::Store(e) => ToolError::new(ErrorCode::Internal, e.to_string()),
    }
}

pub(super) fn run(
    recorder: &Recorder,
    roots: &Roots,
    cx: &CallContext,
    args: SessionArgs,
) -> Result<Reply<SessionOutput>, ToolError> {
    let (store, redactor) = recorder.store()?;
    recorder.refresh_for_lookup();
    let all = recorder.all_directories;
    // Each session listed or searched must also pass the policies a read of it would: a rule
    // that forbids a session hides it from search too (asked, not recorded as a target).
    let visible = |s: &SessionInfo| {
        (s.source == "gantry"
            || all
            || s.cwd
                .as_deref()
                .is_some_and(|c| roots.holds_as_written(Path::new(c))))
            && cx.permits(actions::SESSION, &Session { id: s.id.clone() })
    };
    let page = match args.action {
        SessionArgsAction::Search => store
            .search(
                Search {
                    query: args.query.as_deref(),
                    source: args.source.map(|s| s.as_str()),
                    cursor: args.cursor.as_deref(),
                },
                &visible,
                redactor,
                BUDGETS,
            )
            .map_err(error_of)?,
        SessionArgsAction::Read => {
            let Some(id) = args.session_id else {
                return Err(ToolError::new(
                    ErrorCode::InvalidInput,
                    "session_id: required to read (search lists the sessions)",
                ));
            };
            let id = cx
                .authorize(actions::SESSION, &Session { id: id.clone() }, id)?
                .into_inner();
            store
                .read_session(
                    &id,
                    args.cursor.as_deref(),
                    args.query.as_deref(),
                    &visible,
                    redactor,
                    BUDGETS,
                )
                .map_err(error_of)?
        }
    };
    Ok(Reply::rendered(
        SessionOutput {
            next_cursor: page.next_cursor,
            update_cursor: page.update_cursor,
        },
        page.text,
    ))
}
