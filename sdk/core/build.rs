//! Compile-time gate for the AVX-512 and AVX-VNNI kernel sets.
//!
//! AVX-512 and AVX-VNNI intrinsics and `#[target_feature(enable = "avx512…")]` /
//! `"avxvnni"` are stable from Rust 1.89, but this crate builds with 1.85 (the aarch64 test
//! toolchain). The probe below compiles small VNNI functions (512-bit, 256-bit EVEX and VEX,
//! and the `avxvnni` run-time check) with the compiler in use and emits `tern_avx512` only if
//! that works, so newer compilers get both sets and older ones build everything else
//! unchanged. The sets are still chosen at run time, after checking the CPU.

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
        #[target_feature(enable = "avx2,avx512vl,avx512vnni")]
        pub unsafe fn probe_evex(a: __m256i) -> __m256i {
            _mm256_dpbusd_epi32(a, a, a)
        }
        #[target_feature(enable = "avx2,avxvnni")]
        pub unsafe fn probe_vex(a: __m256i) -> __m256i {
            _mm256_dpbusd_avx_epi32(a, a, a)
        }
        pub fn probe_detect() -> bool {
            std::arch::is_x86_feature_detected!("avxvnni")
        }
    "#;
    if autocfg::new().probe_raw(probe).is_ok() {
        autocfg::emit("tern_avx512");
    }
}
