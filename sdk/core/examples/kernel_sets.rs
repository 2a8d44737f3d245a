//! Prints the kernel sets this CPU runs, one `isa` name per line (best last), then the set in
//! use as `selected <isa>` (`TERN_KERNELS` forces one). The aarch64 suite
//! (tests/aarch64/run.sh) runs the tests once per listed set.

fn main() {
    for set in tern::quant::available_kernels() {
        println!("{}", set.isa);
    }
    println!("selected {}", tern::quant::kernels().isa);
}
