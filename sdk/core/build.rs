//! Compile-time gate for the AVX-512 kernel set.
//!
//! AVX-512 intrinsics and `#[target_feature(enable = "avx512…")]` are stable from Rust 1.89, but
//! this crate builds with 1.85 (the aarch64 test toolchain). The probe below compiles a small
//! VNNI function with the compiler in use and emits `tern_avx512` only if that works, so newer
//! compilers get the AVX-512 set and older ones build everything else unchanged. The set is
//! still chosen at run time, after checking the CPU.

fn main() {
    autocfg::emit_possibility("tern_avx512");
    autocfg::rerun_path("build.rs");
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        return;
    }
    let probe = r#"
        use std::arch::x86_64::*;
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
        pub unsafe fn probe(a: __m512i, k: __mmask64) -> __m512i {
            _mm512_mask_add_epi8(_mm512_dpbusd_epi32(a, a, a), k, a, a)
        }
    "#;
    if autocfg::new().probe_raw(probe).is_ok() {
        autocfg::emit("tern_avx512");
    }
}
