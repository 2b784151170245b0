// Only actions the surface marks as writes can mint a write permit: `read` is not one.
use confine::path_policy::Resolved;

fn ask(cx: &tool_api::CallContext, target: Resolved) {
    let _ = confine::fs::WritePermit::authorize(cx, generated::core::actions::READ, target);
}

fn main() {}
