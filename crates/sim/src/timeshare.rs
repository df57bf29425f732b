//! Which threads take turns on a CPU when a set holds more threads than CPUs.
//!
//! Linux keeps whole threads on CPUs: 9 busy threads on 8 CPUs leave two of them sharing
//! one, each at half speed, and the load balancer does not move either (moving one of
//! the pair leaves the imbalance as it was). *Which* two is not decided by anything a
//! placement controls — the order they woke in, where they last ran — so the model does
//! not let a fixed order decide it. Threads of processes given the same CPU set are
//! interchangeable: the CPUs the load balancer fills for them (`snapshot::balance`) are
//! dealt among them at random, and each process runs at the share that gives its
//! expected run time over every such deal, E[1 / mean share of its threads]. A
//! single-threaded process on 3 threads' worth of 2 CPUs then runs 5/3 times as long
//! (alone with chance 1/3, at half speed otherwise), a many-threaded one close to the
//! even split's 3/2, because its threads' turns average out. Run times are averaged the
//! same way over the kernel's CPU-balanced starts (`eval`), so a policy's placement and
//! the kernel's are scored alike. Before this, the pair was the first and the last
//! process in snapshot order, an order the oracle could exploit and no policy can see.

/// The run share that gives a process of `k` threads its expected run time when they
/// are dealt `k` of `slots` at random, without replacement (`slots`: each CPU's share,
/// one per thread of the pool). `None` when every slot has the same share (the deal
/// changes nothing), or `k` is 0 or more than the slots.
pub fn expected_share(slots: &[f64], k: usize) -> Option<f64> {
    let n = slots.len();
    if k == 0 || k > n {
        return None;
    }
    let mut levels: Vec<(f64, usize)> = Vec::new();
    for &s in slots {
        match levels
            .iter_mut()
            .find(|(v, _)| (*v - s).abs() <= 1e-12 * s.abs().max(1.0))
        {
            Some((_, c)) => *c += 1,
            None => levels.push((s, 1)),
        }
    }
    if levels.len() < 2 {
        return None;
    }
    let ln_fact: Vec<f64> = std::iter::once(0.0)
        .chain((1..=n).scan(0.0, |acc, i| {
            *acc += (i as f64).ln();
            Some(*acc)
        }))
        .collect();
    let ln_choose = |a: usize, b: usize| ln_fact[a] - ln_fact[b] - ln_fact[a - b];
    let total = ln_choose(n, k);
    let mut deal = Deal {
        levels: &levels,
        k,
        ln_choose: &ln_choose,
        total,
        budget: ENUMERATION_LIMIT,
        expected: 0.0,
    };
    if deal.sum(0, k, 0.0, 0.0) {
        return Some(1.0 / deal.expected);
    }
    // Too many ways to deal (many share levels and threads): the second-order
    // expansion of E[1/X] about the mean, X the mean of k draws without replacement.
    let mean = slots.iter().sum::<f64>() / n as f64;
    let var = slots.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n as f64;
    let var_x = if n > 1 {
        var / k as f64 * (n - k) as f64 / (n - 1) as f64
    } else {
        0.0
    };
    Some(1.0 / (1.0 / mean + var_x / mean.powi(3)))
}

/// Compositions enumerated before falling back to the expansion: far more than the
/// two or three share levels of any set the evaluation builds need.
const ENUMERATION_LIMIT: usize = 200_000;

/// The multivariate hypergeometric sum over how many of the `k` threads land on each
/// share level.
struct Deal<'a> {
    levels: &'a [(f64, usize)],
    k: usize,
    ln_choose: &'a dyn Fn(usize, usize) -> f64,
    total: f64,
    budget: usize,
    expected: f64,
}

impl Deal<'_> {
    /// Adds the terms with `left` threads still to deal from level `at` on, `ln_ways`
    /// the log of the ways so far and `share` their shares' sum; false when the budget
    /// ran out.
    fn sum(&mut self, at: usize, left: usize, ln_ways: f64, share: f64) -> bool {
        let Some(&(value, count)) = self.levels.get(at) else {
            return true;
        };
        if at + 1 == self.levels.len() {
            if left > count {
                return true;
            }
            if self.budget == 0 {
                return false;
            }
            self.budget -= 1;
            let ways = ln_ways + (self.ln_choose)(count, left) - self.total;
            let mean = (share + left as f64 * value) / self.k as f64;
            self.expected += ways.exp() / mean;
            return true;
        }
        let rest: usize = self.levels[at + 1..].iter().map(|&(_, c)| c).sum();
        let low = left.saturating_sub(rest);
        for j in low..=left.min(count) {
            let ways = ln_ways + (self.ln_choose)(count, j);
            if !self.sum(at + 1, left - j, ways, share + j as f64 * value) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_of_three_on_two_cpus_runs_five_thirds_as_long() {
        // CPU 0 alone, CPU 1 shared by two: slots 1, 1/2, 1/2.
        let s = expected_share(&[1.0, 0.5, 0.5], 1).unwrap();
        assert!((1.0 / s - 5.0 / 3.0).abs() < 1e-12, "{}", 1.0 / s);
    }

    #[test]
    fn a_process_holding_every_slot_runs_at_their_mean() {
        let s = expected_share(&[1.0, 0.5, 0.5], 3).unwrap();
        assert!((s - 2.0 / 3.0).abs() < 1e-12, "{s}");
    }

    #[test]
    fn more_threads_average_their_turns_out() {
        // 12 threads on 8 CPUs: 4 CPUs run one thread, 4 take turns between two.
        let mut slots = vec![1.0; 4];
        slots.extend(vec![0.5; 8]);
        let one = 1.0 / expected_share(&slots, 1).unwrap();
        let four = 1.0 / expected_share(&slots, 4).unwrap();
        let eight = 1.0 / expected_share(&slots, 8).unwrap();
        let even = 12.0 / 8.0;
        assert!(
            one > four && four > eight && eight > even,
            "{one} {four} {eight}"
        );
        // One thread: alone with chance 4/12, else twice as long.
        assert!((one - (4.0 + 16.0) / 12.0).abs() < 1e-12, "{one}");
    }

    #[test]
    fn equal_shares_need_no_deal() {
        assert_eq!(expected_share(&[0.5, 0.5], 1), None);
        assert_eq!(expected_share(&[1.0], 1), None);
        assert_eq!(expected_share(&[1.0, 0.5], 0), None);
        assert_eq!(expected_share(&[1.0, 0.5], 3), None);
    }

    #[test]
    fn the_expansion_is_close_to_the_sum_it_replaces() {
        // Three levels, a large pool: enumerate, then compare with the expansion.
        let mut slots = vec![1.0; 30];
        slots.extend(vec![0.5; 40]);
        slots.extend(vec![1.0 / 3.0; 30]);
        let exact = expected_share(&slots, 20).unwrap();
        let mean = slots.iter().sum::<f64>() / 100.0;
        let var = slots.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / 100.0;
        let var_x = var / 20.0 * 80.0 / 99.0;
        let approx = 1.0 / (1.0 / mean + var_x / mean.powi(3));
        assert!((exact - approx).abs() / exact < 0.01, "{exact} {approx}");
    }
}
