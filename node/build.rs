//! Node-API's link arguments for the addon (on macOS, Node's symbols resolved at load time).

fn main() {
    napi_build::setup();
}
