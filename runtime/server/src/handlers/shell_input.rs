//! The Shell connector's screen and input tools (seed 002's milestone 2): the Desktop
//! connector's frames and steps in seed 002's shapes, each decided by the tool's own action
//! on the window it reaches, so a policy can tell them from `observe` and `computer`.

use generated::shell::{
    InputClickArgs, InputClickArgsButton, InputClickOperation, InputKeyArgs, InputKeyOperation,
    InputMoveArgs, InputTypeArgs, ScreenCaptureArgs, ScreenCaptureOutput, actions,
};
use generated::types::{ComputerAction, ComputerActionAction as Action, ComputerActionButton};
use tool_api::{CallContext, Reply, ToolError};

use super::DesktopTools;
use super::desktop::StepActions;

/// A step of `action` with nothing else set.
fn blank(action: Action) -> ComputerAction {
    ComputerAction {
        action,
        frame: None,
        x: None,
        y: None,
        to_x: None,
        to_y: None,
        button: None,
        dx: None,
        dy: None,
        r#ref: None,
        window: None,
        text: None,
        keys: None,
        ms: None,
    }
}

/// Every step of a tool decided by its own action; what a paste (a paste chord, a middle
/// click) reads by `paste`.
fn decided_by(action: tool_api::ActionId, paste: tool_api::ActionId) -> StepActions {
    StepActions {
        pointer: action,
        keyboard: action,
        read_clipboard: paste,
        write_clipboard: paste,
    }
}

pub(super) async fn screen_capture(
    desktop: &DesktopTools,
    cx: &CallContext,
    args: ScreenCaptureArgs,
) -> Result<Reply<ScreenCaptureOutput>, ToolError> {
    let shot = desktop
        .capture(cx, actions::SCREEN_CAPTURE, args.window.as_deref())
        .await?;
    let o = &shot.output;
    let (Some(frame), Some(width), Some(height), Some(source_width), Some(source_height)) = (
        o.frame.clone(),
        o.width,
        o.height,
        o.source_width,
        o.source_height,
    ) else {
        return Err(ToolError::new(
            tool_api::ErrorCode::Internal,
            "a screenshot came back without its frame",
        ));
    };
    Ok(Reply {
        output: ScreenCaptureOutput {
            frame,
            width,
            height,
            source_width,
            source_height,
        },
        text: shot.text,
        extra: shot.extra,
        failed: false,
    })
}

pub(super) async fn input_click(
    desktop: &DesktopTools,
    cx: &CallContext,
    args: InputClickArgs,
) -> Result<Reply<tool_api::NoOutput>, ToolError> {
    let step = ComputerAction {
        frame: Some(args.frame),
        x: Some(args.x),
        y: Some(args.y),
        button: Some(match args.button.unwrap_or(InputClickArgsButton::Left) {
            InputClickArgsButton::Left => ComputerActionButton::Left,
            InputClickArgsButton::Right => ComputerActionButton::Right,
            InputClickArgsButton::Middle => ComputerActionButton::Middle,
        }),
        ..blank(if args.double == Some(true) {
            Action::DoubleClick
        } else {
            Action::Click
        })
    };
    let actions = decided_by(
        InputClickOperation::Click.action(),
        InputClickOperation::Paste.action(),
    );
    let line = desktop.step(cx, &step, actions).await?;
    Ok(Reply::rendered(tool_api::NoOutput {}, line))
}

pub(super) async fn input_move(
    desktop: &DesktopTools,
    cx: &CallContext,
    args: InputMoveArgs,
) -> Result<Reply<tool_api::NoOutput>, ToolError> {
    let step = ComputerAction {
        frame: Some(args.frame),
        x: Some(args.x),
        y: Some(args.y),
        ..blank(Action::Move)
    };
    let actions = decided_by(actions::INPUT_MOVE, actions::INPUT_MOVE);
    let line = desktop.step(cx, &step, actions).await?;
    Ok(Reply::rendered(tool_api::NoOutput {}, line))
}

pub(super) async fn input_type(
    desktop: &DesktopTools,
    cx: &CallContext,
    args: InputTypeArgs,
) -> Result<Reply<tool_api::NoOutput>, ToolError> {
    let step = ComputerAction {
        text: Some(args.text),
        ..blank(Action::Type)
    };
    let actions = decided_by(actions::INPUT_TYPE, actions::INPUT_TYPE);
    let line = desktop.step(cx, &step, actions).await?;
    Ok(Reply::rendered(tool_api::NoOutput {}, line))
}

pub(super) async fn input_key(
    desktop: &DesktopTools,
    cx: &CallContext,
    args: InputKeyArgs,
) -> Result<Reply<tool_api::NoOutput>, ToolError> {
    let step = ComputerAction {
        keys: Some(args.keys),
        ..blank(Action::Keypress)
    };
    let actions = decided_by(
        InputKeyOperation::Press.action(),
        InputKeyOperation::Paste.action(),
    );
    let line = desktop.step(cx, &step, actions).await?;
    Ok(Reply::rendered(tool_api::NoOutput {}, line))
}
