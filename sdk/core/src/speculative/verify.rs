//! Acceptance: which token follows a verified tree node, given the model's logits there.
//!
//! The sampler decides exactly as in plain decoding, with the history of the tokens accepted
//! so far (its constraint, if any, has accepted them too), so its penalties and masks apply,
//! and it draws one random number per token as plain decoding does. If a child drafted the
//! chosen token the walk goes on there; otherwise the step ends with that token.
//!
//! Drafts here are deterministic (a point mass on the drafted token), so this is speculative
//! sampling in its simplest form: a child is accepted with probability p(child), the same rate
//! as the residual form of Leviathan et al. 2023 / SpecInfer, and the tokens are those plain
//! decoding draws. With a seed, the output is token for token that of plain decoding,
//! whether or not (and however much) speculation ran.

use crate::sampling::Sampler;

/// The token chosen after a node and, if a child drafted it, that child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub token: u32,
    pub child: Option<usize>,
}

/// Chooses the token after a node whose logits are `row`, among its drafted `children`
/// ((node index, token)).
pub fn choose(sampler: &mut Sampler, row: &mut [f32], history: &[u32], children: &[(usize, u32)]) -> Choice {
    let token = sampler.sample(row, history);
    let child = children.iter().find(|&&(_, t)| t == token).map(|&(c, _)| c);
    Choice { token, child }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::SamplingOptions;

    fn sampler(temperature: f32, seed: u64) -> Sampler {
        let opts =
            SamplingOptions { temperature, top_k: 0, top_p: 1.0, min_p: 0.0, seed: Some(seed), ..Default::default() };
        Sampler::new(opts).expect("valid options")
    }

    /// Pearson's chi-square statistic of `counts` against probabilities `p`.
    fn chi_square(counts: &[u64], p: &[f64]) -> f64 {
        let n: u64 = counts.iter().sum();
        counts.iter().zip(p).map(|(&c, &p)| (c as f64 - n as f64 * p).powi(2) / (n as f64 * p)).sum()
    }

    fn softmax(logits: &[f32], temperature: f32) -> Vec<f64> {
        let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let w: Vec<f64> = logits.iter().map(|&l| (f64::from(l - m) / f64::from(temperature)).exp()).collect();
        let z: f64 = w.iter().sum();
        w.iter().map(|x| x / z).collect()
    }

    #[test]
    fn greedy_takes_the_samplers_choice() {
        let mut s = sampler(0.0, 1);
        let mut row = vec![0.0, 3.0, 1.0, 2.0];
        assert_eq!(choose(&mut s, &mut row.clone(), &[], &[(7, 3), (8, 1)]), Choice { token: 1, child: Some(8) });
        assert_eq!(choose(&mut s, &mut row, &[], &[(7, 3)]), Choice { token: 1, child: None });
    }

    /// With any set of drafted children the chosen token follows the sampler's distribution:
    /// chi-square over 6 tokens (5 degrees of freedom; 20.5 is the 0.999 quantile), for
    /// several drafts, against the same test applied to plain sampling.
    #[test]
    fn sampling_keeps_the_distribution_exactly() {
        let logits = [1.0f32, 0.2, -0.5, 2.0, 0.0, -1.5];
        let t = 0.8;
        let p = softmax(&logits, t);
        let n = 60_000;
        let drafts: [&[u32]; 5] = [&[], &[3], &[5], &[0, 3, 1], &[5, 2, 4, 1, 0]];
        for (k, draft) in drafts.iter().enumerate() {
            let children: Vec<(usize, u32)> = draft.iter().enumerate().map(|(i, &t)| (i + 1, t)).collect();
            let mut s = sampler(t, 100 + k as u64);
            let mut counts = [0u64; 6];
            let mut accepted = 0u64;
            for _ in 0..n {
                let mut row = logits.to_vec();
                let c = choose(&mut s, &mut row, &[], &children);
                counts[c.token as usize] += 1;
                if let Some(child) = c.child {
                    accepted += 1;
                    assert_eq!(children[child - 1].1, c.token, "the accepted child holds the token");
                }
            }
            let x2 = chi_square(&counts, &p);
            assert!(x2 < 20.5, "draft {draft:?}: chi-square {x2:.1}, counts {counts:?}");
            // A drafted token is accepted whenever it is the outcome: the acceptance rate is
            // the drafted tokens' total probability.
            let want: f64 = draft.iter().map(|&t| p[t as usize]).sum();
            assert!((accepted as f64 / n as f64 - want).abs() < 0.01, "draft {draft:?}");
        }
        // The same statistic on plain sampling, as a sanity check of the test itself.
        let mut s = sampler(t, 7);
        let mut counts = [0u64; 6];
        for _ in 0..n {
            counts[s.sample(&mut logits.to_vec(), &[]) as usize] += 1;
        }
        assert!(chi_square(&counts, &p) < 20.5);
    }

    /// Two steps through a tree: the pair of tokens follows the joint distribution of plain
    /// sampling (the second step's logits depend on the first token), with drafts that branch.
    #[test]
    fn sampling_through_a_tree_keeps_the_joint_distribution() {
        let t = 1.0;
        let first = [0.5f32, 1.5, 0.0];
        let second = |a: u32| -> [f32; 3] {
            match a {
                0 => [2.0, 0.0, 0.0],
                1 => [0.0, 0.3, 1.2],
                _ => [-1.0, 1.0, 0.5],
            }
        };
        let mut joint = [0.0f64; 9];
        let p1 = softmax(&first, t);
        for a in 0..3 {
            let p2 = softmax(&second(a), t);
            for b in 0..3 {
                joint[(a * 3 + b) as usize] = p1[a as usize] * p2[b as usize];
            }
        }
        // Tree: root ─ 1:(tok 1) ─ 3:(tok 2)
        //            └ 2:(tok 2) ─ 4:(tok 1)
        let children_of = |node: usize| -> Vec<(usize, u32)> {
            match node {
                0 => vec![(1, 1), (2, 2)],
                1 => vec![(3, 2)],
                2 => vec![(4, 1)],
                _ => vec![],
            }
        };
        let token_of = [0u32, 1, 2, 2, 1];
        let mut s = sampler(t, 42);
        let mut counts = [0u64; 9];
        let n = 60_000;
        for _ in 0..n {
            let c1 = choose(&mut s, &mut first.to_vec(), &[], &children_of(0));
            let a = c1.token;
            let kids = c1.child.map(children_of).unwrap_or_default();
            if let Some(node) = c1.child {
                assert_eq!(token_of[node], a);
            }
            let c2 = choose(&mut s, &mut second(a).to_vec(), &[a], &kids);
            counts[(a * 3 + c2.token) as usize] += 1;
        }
        // 8 degrees of freedom: 26.1 is the 0.999 quantile.
        let x2 = chi_square(&counts, &joint);
        assert!(x2 < 26.1, "chi-square {x2:.1}, counts {counts:?}");
    }
}
