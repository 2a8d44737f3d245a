fn main() -> std::process::ExitCode {
    tern_cli::main()
}
