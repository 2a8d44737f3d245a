use super::*;

fn opts(temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> SamplingOptions {
    SamplingOptions { temperature, top_k, top_p, min_p, repetition_penalty: 1.0, repeat_last_n: 64, seed: Some(7) }
}

fn random_logits(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::from_seed(seed);
    // Roughly normal with a spread typical of LM heads.
    (0..n).map(|_| ((0..4).map(|_| rng.next_f64()).sum::<f64>() - 2.0) as f32 * 6.0).collect()
}

fn ln_probs(p: &[f64]) -> Vec<f32> {
    p.iter().map(|x| x.ln() as f32).collect()
}

/// The transforms written out plainly over a fully sorted vocabulary.
fn reference(logits: &[f32], o: &SamplingOptions) -> Vec<(u32, f64)> {
    let mut v: Vec<(u32, f32)> =
        logits.iter().enumerate().filter(|(_, l)| !l.is_nan()).map(|(i, &l)| (i as u32, l)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if o.top_k > 0 {
        v.truncate(o.top_k);
    }
    let max = v[0].1;
    let z: f64 = v.iter().map(|c| f64::from(c.1 - max).exp()).sum();
    let p: Vec<f64> = v.iter().map(|c| f64::from(c.1 - max).exp() / z).collect();
    let mut keep = v.len();
    if o.top_p < 1.0 {
        let mut cum = 0.0;
        for (j, pj) in p.iter().enumerate() {
            cum += pj;
            if cum >= f64::from(o.top_p) {
                keep = j + 1;
                break;
            }
        }
    }
    if o.min_p > 0.0 {
        keep = keep.min(p.iter().take_while(|&&pj| pj >= f64::from(o.min_p) * p[0]).count());
    }
    v.truncate(keep);
    let w: Vec<f64> = v.iter().map(|c| (f64::from(c.1 - max) / f64::from(o.temperature)).exp()).collect();
    let total: f64 = w.iter().sum();
    v.iter().zip(w).map(|(c, w)| (c.0, w / total)).collect()
}

fn assert_matches_reference(logits: &[f32], o: &SamplingOptions) {
    let mut s = Sampler::new(o.clone()).expect("valid");
    let mut out = Vec::new();
    s.distribution(&mut logits.to_vec(), &[], &mut out);
    let want = reference(logits, o);
    let got_ids: Vec<u32> = out.iter().map(|x| x.0).collect();
    let want_ids: Vec<u32> = want.iter().map(|x| x.0).collect();
    assert_eq!(got_ids, want_ids, "{o:?}");
    for (g, w) in out.iter().zip(&want) {
        assert!((f64::from(g.1) - w.1).abs() < 1e-5, "{o:?}: {g:?} vs {w:?}");
    }
}

#[test]
fn defaults_are_greedy_llama_cpp_values() {
    let d = SamplingOptions::default();
    assert_eq!(
        d,
        SamplingOptions {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            repeat_last_n: 64,
            seed: None
        }
    );
    assert!(d.is_greedy());
    assert!(d.validate().is_ok());
    assert!(!opts(0.8, 40, 0.95, 0.05).is_greedy());
    assert!(opts(0.8, 1, 0.95, 0.05).is_greedy());
    // Partial JSON fills the rest from the defaults.
    let o: SamplingOptions = serde_json::from_str(r#"{"temperature": 0.7, "seed": 3}"#).expect("parses");
    assert_eq!((o.temperature, o.top_k, o.seed), (0.7, 40, Some(3)));
}

#[test]
fn validate_rejects_meaningless_values() {
    let bad = [
        (SamplingOptions { temperature: f32::NAN, ..Default::default() }, "temperature"),
        (SamplingOptions { temperature: -0.5, ..Default::default() }, "temperature"),
        (SamplingOptions { temperature: f32::INFINITY, ..Default::default() }, "temperature"),
        (SamplingOptions { top_p: 0.0, ..Default::default() }, "top_p"),
        (SamplingOptions { top_p: 1.01, ..Default::default() }, "top_p"),
        (SamplingOptions { top_p: f32::NAN, ..Default::default() }, "top_p"),
        (SamplingOptions { min_p: -0.01, ..Default::default() }, "min_p"),
        (SamplingOptions { min_p: 1.5, ..Default::default() }, "min_p"),
        (SamplingOptions { min_p: f32::NAN, ..Default::default() }, "min_p"),
        (SamplingOptions { repetition_penalty: 0.0, ..Default::default() }, "repetition_penalty"),
        (SamplingOptions { repetition_penalty: -1.1, ..Default::default() }, "repetition_penalty"),
        (SamplingOptions { repetition_penalty: f32::NAN, ..Default::default() }, "repetition_penalty"),
    ];
    for (o, field) in bad {
        match o.validate() {
            Err(Error::InvalidOption(msg)) => assert!(msg.contains(field), "{msg}"),
            other => panic!("{o:?} gave {other:?}"),
        }
        assert!(matches!(Sampler::new(o), Err(Error::InvalidOption(_))));
    }
    for o in [opts(0.0, 0, 1.0, 0.0), opts(2.0, 5, 1.0, 1.0), opts(1e-3, 0, 1e-6, 0.5)] {
        assert!(o.validate().is_ok(), "{o:?}");
    }
}

#[test]
fn argmax_takes_first_max_and_skips_nan() {
    assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    assert_eq!(argmax(&[f32::NAN, 1.0, 5.0, f32::NAN, 5.0]), 2);
    assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
    assert_eq!(argmax(&[-2.0, f32::INFINITY, f32::NAN]), 1);
    assert_eq!(argmax(&[f32::NAN, f32::NAN]), 0);
    assert_eq!(argmax(&[f32::NAN, f32::NEG_INFINITY]), 1);
    let long: Vec<f32> = (0..1001).map(|i| if i == 997 { 99.0 } else { (i % 13) as f32 }).collect();
    assert_eq!(argmax(&long), 997);
    assert_eq!(argmax(&[]), 0);
}

#[test]
fn greedy_is_argmax() {
    let mut s = Sampler::new(SamplingOptions::default()).expect("valid");
    for seed in 0..50 {
        let logits = random_logits(1000, seed);
        assert_eq!(s.sample(&mut logits.clone(), &[]), argmax(&logits));
        let mut out = Vec::new();
        s.distribution(&mut logits.clone(), &[], &mut out);
        assert_eq!(out, vec![(argmax(&logits), 1.0)]);
    }
}

#[test]
fn top_k_one_is_argmax() {
    let mut s = Sampler::new(opts(1.5, 1, 1.0, 0.0)).expect("valid");
    for seed in 0..50 {
        let logits = random_logits(1000, seed);
        assert_eq!(s.sample(&mut logits.clone(), &[]), argmax(&logits));
    }
}

#[test]
fn same_seed_same_sequence() {
    let logits = random_logits(500, 1);
    let run = |seed: Option<u64>| {
        let mut s = Sampler::new(SamplingOptions { seed, ..opts(1.0, 0, 1.0, 0.0) }).expect("valid");
        (0..300).map(|_| s.sample(&mut logits.clone(), &[])).collect::<Vec<_>>()
    };
    assert_eq!(run(Some(42)), run(Some(42)));
    assert_ne!(run(Some(42)), run(Some(43)));
    assert_ne!(run(None), run(None));

    let mut s = Sampler::new(SamplingOptions { seed: Some(42), ..opts(1.0, 0, 1.0, 0.0) }).expect("valid");
    let first: Vec<u32> = (0..20).map(|_| s.sample(&mut logits.clone(), &[])).collect();
    s.reseed(42);
    let again: Vec<u32> = (0..20).map(|_| s.sample(&mut logits.clone(), &[])).collect();
    assert_eq!(first, again);
}

/// Pearson's chi-square statistic of observed counts against expected probabilities.
fn chi_square(counts: &[usize], probs: &[f64]) -> f64 {
    let n: usize = counts.iter().sum();
    counts
        .iter()
        .zip(probs)
        .map(|(&c, &p)| {
            let e = n as f64 * p;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

#[test]
fn frequencies_follow_the_distribution() {
    // Critical value of chi-square with 3 degrees of freedom at p = 0.001.
    const CRITICAL_DF3: f64 = 16.27;
    const N: usize = 100_000;
    let p = [0.1, 0.2, 0.3, 0.4];
    let logits = ln_probs(&p);
    for (temperature, expected) in [(1.0f32, p.to_vec()), (0.5, p.iter().map(|x| x * x / 0.30).collect::<Vec<_>>())] {
        let mut s = Sampler::new(opts(temperature, 0, 1.0, 0.0)).expect("valid");
        let mut counts = [0usize; 4];
        for _ in 0..N {
            counts[s.sample(&mut logits.clone(), &[]) as usize] += 1;
        }
        let chi2 = chi_square(&counts, &expected);
        assert!(chi2 < CRITICAL_DF3, "T={temperature}: counts {counts:?}, chi2 {chi2}");
    }
}

#[test]
fn top_p_min_p_top_k_exclude_the_tail() {
    let logits = ln_probs(&[0.5, 0.3, 0.15, 0.05]);
    let cases: [(SamplingOptions, &[u32]); 5] = [
        (opts(1.0, 0, 0.7, 0.0), &[0, 1]),
        (opts(1.0, 0, 0.45, 0.0), &[0]),
        (opts(1.0, 0, 1.0, 0.2), &[0, 1, 2]),
        (opts(1.0, 0, 1.0, 0.7), &[0]),
        (opts(1.0, 2, 1.0, 0.0), &[0, 1]),
    ];
    for (o, kept) in cases {
        let mut s = Sampler::new(o.clone()).expect("valid");
        let mut out = Vec::new();
        s.distribution(&mut logits.clone(), &[], &mut out);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), kept, "{o:?}");
        let mut seen = [false; 4];
        for _ in 0..5_000 {
            seen[s.sample(&mut logits.clone(), &[]) as usize] = true;
        }
        for (id, &hit) in seen.iter().enumerate() {
            assert_eq!(hit, kept.contains(&(id as u32)), "{o:?}: token {id}");
        }
    }
    // Renormalised over what top-p kept: 0.5 / 0.8 and 0.3 / 0.8.
    let mut s = Sampler::new(opts(1.0, 0, 0.7, 0.0)).expect("valid");
    let mut out = Vec::new();
    s.distribution(&mut logits.clone(), &[], &mut out);
    assert!((out[0].1 - 0.625).abs() < 1e-6 && (out[1].1 - 0.375).abs() < 1e-6, "{out:?}");
}

#[test]
fn distribution_matches_the_plain_definition() {
    for (n, seed) in [(50, 1), (5_000, 2), (32_000, 3)] {
        let logits = random_logits(n, seed);
        for o in [
            opts(1.0, 0, 1.0, 0.0),
            opts(0.7, 40, 0.95, 0.05),
            opts(0.7, 0, 0.95, 0.0),
            opts(1.3, 0, 0.999, 0.0),
            opts(0.5, 0, 0.9, 0.01),
            opts(1.0, 100, 1.0, 0.1),
            opts(2.0, 0, 0.5, 0.3),
            opts(1.0, 2_000, 0.9, 0.0),
        ] {
            assert_matches_reference(&logits, &o);
        }
    }
}

#[test]
fn ties_go_to_lower_ids() {
    // Integer logits: many exact ties at every cut.
    let logits: Vec<f32> = random_logits(5_000, 11).iter().map(|l| l.round()).collect();
    for o in [opts(1.0, 10, 1.0, 0.0), opts(1.0, 2_000, 1.0, 0.0), opts(1.0, 10, 0.5, 0.0), opts(1.0, 0, 0.3, 0.0)] {
        assert_matches_reference(&logits, &o);
    }
    let mut s = Sampler::new(opts(1.0, 3, 1.0, 0.0)).expect("valid");
    let mut out = Vec::new();
    s.distribution(&mut [1.0; 6], &[], &mut out);
    assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 1, 2]);
}

#[test]
fn distribution_is_sorted_and_normalised() {
    let logits = random_logits(2_000, 9);
    let mut s = Sampler::new(opts(0.9, 0, 0.9, 0.0)).expect("valid");
    let mut out = Vec::new();
    s.distribution(&mut logits.clone(), &[], &mut out);
    assert!(out.windows(2).all(|w| w[0].1 >= w[1].1));
    let sum: f32 = out.iter().map(|x| x.1).sum();
    assert!((sum - 1.0).abs() < 1e-4, "{sum}");
    // sample() never leaves the support distribution() reports.
    let support: Vec<u32> = out.iter().map(|x| x.0).collect();
    for _ in 0..2_000 {
        assert!(support.contains(&s.sample(&mut logits.clone(), &[])));
    }
}

#[test]
fn large_vocabulary() {
    let logits = random_logits(262_144, 5);
    for o in [opts(0.8, 0, 0.95, 0.0), opts(0.8, 40, 0.95, 0.05), opts(1.0, 0, 1.0, 0.0)] {
        assert_matches_reference(&logits, &o);
        let mut s = Sampler::new(o).expect("valid");
        let id = s.sample(&mut logits.clone(), &[]);
        assert!((id as usize) < logits.len());
    }
}

#[test]
fn repetition_penalty_is_llama_cpp_style() {
    let o = SamplingOptions { repetition_penalty: 2.0, repeat_last_n: 64, ..SamplingOptions::default() };
    let mut s = Sampler::new(o).expect("valid");
    let mut logits = vec![2.0, -1.0, 0.5, 3.0, 0.0];
    // Token 0 three times: penalised once. Id 99 is outside the vocabulary.
    s.sample(&mut logits, &[0, 1, 0, 0, 4, 99]);
    assert_eq!(logits, vec![1.0, -2.0, 0.5, 3.0, 0.0]);

    // Only the last repeat_last_n tokens count.
    let o = SamplingOptions { repetition_penalty: 2.0, repeat_last_n: 1, ..SamplingOptions::default() };
    let mut s = Sampler::new(o).expect("valid");
    let mut logits = vec![2.0, -1.0];
    s.sample(&mut logits, &[0, 1]);
    assert_eq!(logits, vec![2.0, -2.0]);

    // Greedy picks the argmax after penalties.
    let o = SamplingOptions { repetition_penalty: 1.1, ..SamplingOptions::default() };
    let mut s = Sampler::new(o).expect("valid");
    assert_eq!(s.sample(&mut [3.0, 2.9], &[0]), 1);

    // Off when the penalty is 1 or the window is 0.
    for (p, n) in [(1.0, 64), (2.0, 0)] {
        let o = SamplingOptions { repetition_penalty: p, repeat_last_n: n, ..SamplingOptions::default() };
        let mut s = Sampler::new(o).expect("valid");
        let mut logits = vec![2.0, -1.0];
        s.sample(&mut logits, &[0, 1]);
        assert_eq!(logits, vec![2.0, -1.0]);
    }
}

#[test]
fn degenerate_logits_do_not_panic() {
    let mut s = Sampler::new(opts(1.0, 0, 0.9, 0.05)).expect("valid");
    assert_eq!(s.sample(&mut [], &[1, 2]), 0);
    assert_eq!(s.sample(&mut [f32::NAN, f32::NAN], &[]), 0);
    assert_eq!(s.sample(&mut [f32::NAN, 1.0, f32::NAN], &[]), 1);
    assert_eq!(s.sample(&mut [0.0, f32::INFINITY, 1.0], &[]), 1);
    assert_eq!(s.sample(&mut [f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0], &[]), 2);
    let mut out = Vec::new();
    s.distribution(&mut [], &[], &mut out);
    assert!(out.is_empty());
    s.distribution(&mut [f32::NAN, 2.0], &[], &mut out);
    assert_eq!(out, vec![(1, 1.0)]);
    // A temperature so small that 1/T overflows behaves like greedy.
    let mut s = Sampler::new(opts(1e-45, 0, 1.0, 0.0)).expect("valid");
    assert_eq!(s.sample(&mut [1.0, 2.0, 1.5], &[]), 1);
}

#[test]
fn draw_from_explicit_distribution() {
    let mut s = Sampler::new(opts(1.0, 0, 1.0, 0.0)).expect("valid");
    assert_eq!(s.draw(&[]), None);
    assert_eq!(s.draw(&[(3, 0.0), (4, f32::NAN)]), None);
    assert_eq!(s.draw(&[(3, 0.0), (4, 2.0)]), Some(4));
    let mut counts = [0usize; 2];
    for _ in 0..20_000 {
        counts[s.draw(&[(0, 1.0), (1, 3.0)]).unwrap_or(9) as usize] += 1;
    }
    assert!(chi_square(&counts, &[0.25, 0.75]) < 10.83, "{counts:?}");
}

#[test]
fn scratch_buffers_are_reused() {
    let logits = random_logits(10_000, 4);
    let history: Vec<u32> = (0..64).collect();
    let o = SamplingOptions { repetition_penalty: 1.1, ..opts(0.8, 0, 0.95, 0.0) };
    let mut s = Sampler::new(o).expect("valid");
    s.sample(&mut logits.clone(), &history);
    let (cand, window) = ((s.cand.as_ptr(), s.cand.capacity()), (s.window.as_ptr(), s.window.capacity()));
    let mut out = Vec::new();
    for _ in 0..100 {
        s.sample(&mut logits.clone(), &history);
        s.distribution(&mut logits.clone(), &history, &mut out);
    }
    assert_eq!((s.cand.as_ptr(), s.cand.capacity()), cand);
    assert_eq!((s.window.as_ptr(), s.window.capacity()), window);
}

/// The grammar constraint inside the sampler, on a toy vocabulary: masks, `accept`, `allows`,
/// and the verification loop a speculative decoder runs.
#[cfg(feature = "structured")]
mod constrained {
    use super::*;
    use crate::constrain::{Grammar, TokenBytes, Vocabulary};

    const EOS: u32 = 0;

    /// `<eos>`, the letters a..z (ids 1..=26), then "ab" (27) and "bc" (28).
    fn vocab() -> Vocabulary {
        let mut tokens = vec![TokenBytes::Special(b"<eos>".to_vec())];
        tokens.extend((b'a'..=b'z').map(|c| TokenBytes::Text(vec![c])));
        tokens.push(TokenBytes::Text(b"ab".to_vec()));
        tokens.push(TokenBytes::Text(b"bc".to_vec()));
        Vocabulary::new(tokens, &[EOS]).expect("vocabulary")
    }

    fn letter(c: u8) -> u32 {
        u32::from(c - b'a') + 1
    }

    fn text_of(ids: &[u32]) -> String {
        ids.iter()
            .map(|&t| match t {
                27 => "ab".to_owned(),
                28 => "bc".to_owned(),
                t => char::from(b'a' + (t - 1) as u8).to_string(),
            })
            .collect()
    }

    fn sampler_for(rx: &str, o: SamplingOptions) -> Sampler {
        let grammar = Grammar::Regex(rx.into()).compile(&vocab()).expect("compiles");
        let mut s = Sampler::new(o).expect("sampler");
        s.set_constraint(Some(grammar.start()));
        s
    }

    /// Whether `text` can still grow into a sentence of `ab+c`.
    fn viable(text: &str) -> bool {
        let b = text.as_bytes();
        let Some(rest) = b.strip_prefix(b"a") else { return b.is_empty() };
        let n_b = rest.iter().take_while(|&&c| c == b'b').count();
        match &rest[n_b..] {
            [] => true,
            [b'c'] => n_b > 0,
            _ => false,
        }
    }

    #[test]
    fn sampled_answers_always_follow_the_grammar() {
        for (seed, o) in [(1, opts(0.0, 40, 0.95, 0.05)), (2, opts(1.5, 0, 1.0, 0.0)), (3, opts(0.8, 5, 0.9, 0.0))] {
            let mut s = sampler_for("ab+c", SamplingOptions { seed: Some(seed), ..o });
            let mut ids = Vec::new();
            for step in 0..40 {
                let mut logits = random_logits(29, seed * 100 + step);
                let t = s.sample(&mut logits, &ids);
                assert!(logits.iter().enumerate().all(|(i, l)| *l == f32::NEG_INFINITY || s.allows(i as u32)));
                if t == EOS {
                    break;
                }
                s.accept(t).expect("a sampled token is allowed");
                ids.push(t);
                assert!(viable(&text_of(&ids)), "{}", text_of(&ids));
                if s.constraint_complete() {
                    break;
                }
            }
            let text = text_of(&ids);
            assert!(text.len() >= 3 && text.starts_with('a') && text.ends_with('c'), "{text}");
            assert!(s.constraint_complete());
        }
    }

    #[test]
    fn speculative_verification_never_keeps_a_forbidden_draft() {
        let mut s = sampler_for("ab+c", SamplingOptions::default());
        // The draft "a x b": each row's logits favour the drafted token strongly.
        let draft = [letter(b'a'), letter(b'x'), letter(b'b')];
        let mut kept = Vec::new();
        for &d in &draft {
            let mut row = vec![0.0f32; 29];
            row[d as usize] = 10.0;
            row[letter(b'b') as usize] = 1.0;
            let t = s.sample(&mut row, &kept);
            s.accept(t).expect("the verifier's own choice is allowed");
            kept.push(t);
            if t != d {
                break;
            }
        }
        assert_eq!(kept, [letter(b'a'), letter(b'b')], "x is replaced by the best allowed token");
        assert!(!s.allows(letter(b'x')) && s.allows(letter(b'c')) && s.allows(28));
        assert!(matches!(s.accept(letter(b'x')), Err(Error::Constraint(_))));
    }

    #[test]
    fn complete_grammar_allows_only_the_end() {
        let mut s = sampler_for("ab", SamplingOptions::default());
        s.accept(27).expect("\"ab\" in one token");
        assert!(s.constraint_complete());
        let mut row = vec![1.0f32; 29];
        assert_eq!(s.sample(&mut row, &[]), EOS);
        assert!((1..29).all(|t| !s.allows(t)));
    }

    #[test]
    fn without_a_constraint_everything_is_allowed() {
        let mut s = Sampler::new(SamplingOptions::default()).expect("sampler");
        assert!(s.allows(123_456) && s.accept(5).is_ok() && !s.constraint_complete());
        let mut logits = random_logits(100, 9);
        let want = argmax(&logits);
        assert_eq!(s.sample(&mut logits, &[]), want);
    }
}
