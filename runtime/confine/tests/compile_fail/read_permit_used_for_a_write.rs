// A permit minted for a read (any `Authorized<Resolved>`) is not a write permit.
use confine::path_policy::Resolved;

fn overwrite(read_permit: &tool_api::Authorized<Resolved>) {
    let _ = confine::fs::write_atomic(read_permit, b"x", None);
}

fn main() {}
