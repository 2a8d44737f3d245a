//! Stop sequences over streamed text: text that might be the start of a stop sequence is held
//! back until it is known not to be.

pub(super) struct StopMatcher {
    stops: Vec<String>,
    held: String,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        StopMatcher { stops, held: String::new() }
    }

    /// Adds new text; returns what can be emitted and whether a stop sequence was found (the
    /// text from the stop sequence on is dropped).
    pub fn push(&mut self, text: &str) -> (String, bool) {
        self.held.push_str(text);
        if self.stops.is_empty() {
            return (std::mem::take(&mut self.held), false);
        }
        if let Some(at) = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min() {
            let out = self.held[..at].to_owned();
            self.held.clear();
            return (out, true);
        }
        // Hold back the longest suffix that is a prefix of some stop sequence.
        let keep_from = self
            .held
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| {
                let suffix = &self.held[i..];
                self.stops.iter().any(|s| s.starts_with(suffix))
            })
            .unwrap_or(self.held.len());
        let rest = self.held.split_off(keep_from);
        (std::mem::replace(&mut self.held, rest), false)
    }

    /// End of stream: the held text plus `rest`, cut at a stop sequence if one completes.
    pub fn finish(&mut self, rest: &str) -> String {
        let (mut out, hit) = self.push(rest);
        if !hit {
            out.push_str(&std::mem::take(&mut self.held));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], chunks: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for c in chunks {
            let (t, hit) = m.push(c);
            out.push_str(&t);
            if hit {
                return (out, true);
            }
        }
        out.push_str(&m.finish(""));
        (out, false)
    }

    #[test]
    fn stop_split_across_chunks_is_cut() {
        assert_eq!(run(&["END"], &["abc E", "N", "D more"]), ("abc ".to_string(), true));
    }

    #[test]
    fn partial_prefix_is_released_when_it_diverges() {
        assert_eq!(run(&["END"], &["abc E", "x"]), ("abc Ex".to_string(), false));
        let mut m = StopMatcher::new(vec!["END".into()]);
        assert_eq!(m.push("abc E"), ("abc ".to_string(), false));
        assert_eq!(m.push("x"), ("Ex".to_string(), false));
    }

    #[test]
    fn earliest_stop_wins_and_multibyte_is_safe() {
        assert_eq!(run(&["b", "a"], &["xxab"]), ("xx".to_string(), true));
        assert_eq!(run(&["é!"], &["café", " ok"]), ("café ok".to_string(), false));
    }

    #[test]
    fn no_stops_passes_everything() {
        assert_eq!(run(&[], &["a", "b"]), ("ab".to_string(), false));
    }
}
