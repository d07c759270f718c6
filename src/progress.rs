//! Progress display for long stages (indicatif on a terminal, hidden otherwise).

/// A progress bar on stderr (hidden when disabled or stderr is not a terminal).
pub fn progress_bar(enabled: bool, len: u64, what: &str) -> indicatif::ProgressBar {
    if !enabled || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!("{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {what} {{elapsed}}"))
            .expect("template"),
    );
    bar.set_prefix("compile");
    bar
}
