//! Compiles the small C helpers in `src/native/` (see each file for why it is C).

fn main() {
    println!("cargo:rerun-if-changed=src/native/longdouble.c");
    cc::Build::new()
        .file("src/native/longdouble.c")
        .warnings(true)
        .compile("cairn_native");
}
