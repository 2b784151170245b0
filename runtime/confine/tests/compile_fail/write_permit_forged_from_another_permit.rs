// A write permit cannot be assembled from a permit Cedar gave for something else.
use confine::path_policy::Resolved;

fn forge(other: tool_api::Authorized<Resolved>) -> confine::fs::WritePermit {
    confine::fs::WritePermit(other)
}

fn main() {}
