// The tool-level permit on `Host` says nothing about any path.
fn remove(host_permit: &tool_api::Authorized<()>) {
    let _ = confine::fs::remove_file(host_permit);
}

fn main() {}
