//! Builds the bridge to the system's libjpeg-turbo (`src/image/jpeg_turbo.c`) when the `image`
//! feature is on: DCT-scaled and cropped JPEG decoding, which pure-Rust decoders lack.
//! Needs libjpeg-turbo's headers and library (Debian/Ubuntu: `libjpeg62-turbo-dev` or
//! `libjpeg-turbo8-dev`; any libjpeg-turbo >= 1.5, which added cropping and skipping).

fn main() {
    println!("cargo:rerun-if-changed=src/image/jpeg_turbo.c");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_IMAGE");
    if std::env::var_os("CARGO_FEATURE_IMAGE").is_none() {
        return;
    }
    cc::Build::new()
        .file("src/image/jpeg_turbo.c")
        .opt_level(2)
        .warnings(true)
        .compile("streamload_jpeg_turbo");
    println!("cargo:rustc-link-lib=jpeg");
}
