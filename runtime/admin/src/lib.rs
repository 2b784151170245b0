//! The control page: one place, on loopback only, where the user sees and switches what the
//! model may do (permissions, roots, read-only mode, tokens, client setups) and watches the
//! audit tail. It changes the config the way a hand edit would, so the server reloads it like
//! any other change; no tool reaches it.

mod connections;
mod control;
mod page;

pub use control::{Control, Running, SERVING_FILE, URL_FILE, answers, bind_port, running, start};
