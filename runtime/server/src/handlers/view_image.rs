//! `view_image`: one image, checked, bounded and returned as image content with a line of
//! text beside it (some clients show the model only the text).

use generated::core::{ViewImageArgs, ViewImageOutput, actions, limits};
use tool_api::{CallContext, Content, ErrorCode, Reply, ToolError};

use crate::ops::image::{self, Bounds};
use crate::ops::path_policy::{Kind, Roots};

/// The bounds `view_image` applies (and `read` uses for images among its paths).
pub(super) fn bounds() -> Bounds {
    Bounds {
        max_file_bytes: limits::view_image::MAX_FILE.get(),
        max_pixels: limits::view_image::MAX_PIXELS as u64,
        max_decode_bytes: limits::view_image::MAX_DECODE.get(),
        max_dimension: u32::try_from(limits::view_image::MAX_DIMENSION).unwrap_or(u32::MAX),
    }
}

pub(super) fn run(
    roots: &Roots,
    cx: &CallContext,
    args: ViewImageArgs,
) -> Result<Reply<ViewImageOutput>, ToolError> {
    let resolved = roots.resolve(&args.path, None)?;
    let resource = resolved.resource();
    let target = cx
        .authorize(actions::VIEW_IMAGE, &resource, resolved)
        .map_err(|e| {
            let roots = if e.code == ErrorCode::PathNotAllowed {
                format!(" ({} approved root(s))", roots.len())
            } else {
                String::new()
            };
            ToolError::new(e.code, format!("{}: {}{roots}", args.path, e.message))
        })?;
    match target.kind {
        Kind::File => {}
        Kind::Missing => {
            return Err(ToolError::new(
                ErrorCode::NotFound,
                format!("{}: no such file", args.path),
            ));
        }
        Kind::Dir => {
            return Err(ToolError::invalid_input(format!(
                "{}: is a directory",
                args.path
            )));
        }
        Kind::Special | Kind::Link => {
            return Err(ToolError::new(
                ErrorCode::PathNotAllowed,
                format!("{}: not a regular file", args.path),
            ));
        }
    }
    let prepared = image::prepare(&target, bounds())?;
    let text = prepared.describe(&args.path);
    let output = ViewImageOutput {
        path: args.path,
        mime: prepared.mime.to_string(),
        width: i64::from(prepared.width),
        height: i64::from(prepared.height),
        original_width: Some(i64::from(prepared.original_width)),
        original_height: Some(i64::from(prepared.original_height)),
    };
    let mut reply = Reply::rendered(output, text);
    reply.extra.push(Content::Image {
        data: prepared.data,
        mime: prepared.mime.to_string(),
    });
    Ok(reply)
}
