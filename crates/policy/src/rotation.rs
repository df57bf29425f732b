//! Time-sharing by slices, as Tudu, Majo, Gauch, Chen & Gross's memory-bus-aware
//! scheduler does when tasks outnumber cores ("Memory bus aware scheduling"): every
//! slice (200 ms there) it runs the tasks at the head of a round-robin list, stops the
//! others (SIGSTOP), and on each bus pairs a high-bandwidth task with a low one; the
//! tasks that ran go to the back of the list, so every task gets its turn.
//!
//! Algorithm, per slice: for each bus (a package's front-side bus), its CPUs one per
//! die first, the first CPU takes the task at the head of the list; every further CPU
//! takes the first task in the list of the class the bus has fewer of so far (a low
//! beside a high, a high beside a low) that did not run in the last slice, or the head
//! of the list if there is none. The chosen tasks then move, in their order, behind the others.
//!
//! This is a schedule across slices, not a placement: the daemon never stops a
//! process, so only the simulator runs it (the `membus-rr` row of the `membus` suite,
//! which reproduces the published setup of 8 tasks on 4 cores).

use crate::membus::Class;
use numasched_model::topology::{CpuId, Topology};

/// The round-robin list of tasks (indices), head first.
#[derive(Debug, Clone, PartialEq)]
pub struct Rotation {
    order: Vec<usize>,
    /// The tasks of the last slice: the pairing does not reach for them out of turn,
    /// or a lone low task would run in every slice.
    last: Vec<usize>,
}

impl Rotation {
    /// Tasks `0..n`, in that order.
    pub fn new(n: usize) -> Rotation {
        Rotation {
            order: (0..n).collect(),
            last: Vec::new(),
        }
    }

    /// The tasks that run in the next slice, each with its CPU, in bus order; `classes`
    /// holds each task's class. At most one task per CPU; all tasks when they fit.
    pub fn next_slice(&mut self, classes: &[Class], buses: &[Vec<CpuId>]) -> Vec<(usize, CpuId)> {
        let mut waiting = self.order.clone();
        // Turns matter only when some task must wait.
        let rotating = waiting.len() > buses.iter().map(Vec::len).sum::<usize>();
        let mut slice = Vec::new();
        for bus in buses {
            let (mut highs, mut lows) = (0usize, 0usize);
            for (k, &cpu) in bus.iter().enumerate() {
                if waiting.is_empty() {
                    break;
                }
                let want = match highs.cmp(&lows) {
                    std::cmp::Ordering::Greater => Some(Class::Low),
                    std::cmp::Ordering::Less => Some(Class::High),
                    std::cmp::Ordering::Equal => None,
                };
                let at = want
                    .filter(|_| k > 0)
                    .and_then(|c| {
                        waiting.iter().position(|&t| {
                            classes.get(t) == Some(&c) && !(rotating && self.last.contains(&t))
                        })
                    })
                    .unwrap_or(0);
                let task = waiting.remove(at);
                match classes.get(task) {
                    Some(Class::High) => highs += 1,
                    _ => lows += 1,
                }
                slice.push((task, cpu));
            }
        }
        let ran: Vec<usize> = self
            .order
            .iter()
            .copied()
            .filter(|t| slice.iter().any(|&(s, _)| s == *t))
            .collect();
        self.order = waiting;
        self.order.extend(&ran);
        self.last = ran;
        slice
    }
}

/// The CPUs of each bus (package), one per die (LLC) before a die's second: so two
/// tasks on one bus share its bandwidth but not a die's cache and bus controller.
pub fn buses(topo: &Topology) -> Vec<Vec<CpuId>> {
    let mut packages: Vec<u32> = topo.llcs().iter().map(|l| l.package).collect();
    packages.sort_unstable();
    packages.dedup();
    packages
        .into_iter()
        .map(|pkg| {
            let mut cpus: Vec<(usize, usize, CpuId)> = topo
                .llcs()
                .iter()
                .filter(|l| l.package == pkg)
                .flat_map(|l| l.cpus.iter().enumerate().map(|(k, &c)| (k, l.index, c)))
                .collect();
            cpus.sort_unstable();
            cpus.into_iter().map(|(_, _, c)| c).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use numasched_model::topology;
    use Class::{High, Low};

    /// lbm, soplex (high) and gromacs, hmmer (low), two of each, interleaved.
    fn paper() -> Vec<Class> {
        vec![High, Low, High, Low, High, Low, High, Low]
    }

    fn four_cores() -> Vec<Vec<CpuId>> {
        vec![vec![0, 2], vec![4, 6]]
    }

    #[test]
    fn buses_list_one_cpu_per_die_first() {
        let t = topology::machine("xeon-e5345").unwrap();
        assert_eq!(buses(&t), vec![vec![0, 2, 1, 3], vec![4, 6, 5, 7]]);
    }

    #[test]
    fn every_bus_pairs_a_high_with_a_low() {
        let classes = paper();
        let mut r = Rotation::new(classes.len());
        for _ in 0..20 {
            let slice = r.next_slice(&classes, &four_cores());
            assert_eq!(slice.len(), 4);
            for pair in slice.chunks(2) {
                let c: Vec<Class> = pair.iter().map(|&(t, _)| classes[t]).collect();
                assert!(c.contains(&High) && c.contains(&Low), "{slice:?}");
            }
        }
    }

    #[test]
    fn every_task_gets_its_turn() {
        // All high but one: pairing cannot be had, fairness still must be.
        let classes = vec![High, High, High, High, High, High, High, Low];
        let mut r = Rotation::new(classes.len());
        let mut ran = vec![0; classes.len()];
        for _ in 0..40 {
            for (t, _) in r.next_slice(&classes, &four_cores()) {
                ran[t] += 1;
            }
        }
        // 160 turns over 8 tasks: 20 each, give or take the pairing's preference.
        assert!(ran.iter().all(|&n| (17..=23).contains(&n)), "{ran:?}");
        // No task waits more than two slices in a row.
        let mut r = Rotation::new(classes.len());
        let mut waited = vec![0; classes.len()];
        for _ in 0..40 {
            let slice = r.next_slice(&classes, &four_cores());
            for (t, w) in waited.iter_mut().enumerate() {
                *w = if slice.iter().any(|&(s, _)| s == t) {
                    0
                } else {
                    *w + 1
                };
            }
            assert!(waited.iter().all(|&w| w <= 2), "{waited:?}");
        }
    }

    #[test]
    fn all_tasks_run_when_they_fit() {
        let classes = paper();
        let mut r = Rotation::new(classes.len());
        let buses = buses(&topology::machine("xeon-e5345").unwrap());
        let mut slice = r.next_slice(&classes, &buses);
        slice.sort_unstable();
        let tasks: Vec<usize> = slice.iter().map(|&(t, _)| t).collect();
        assert_eq!(tasks, (0..8).collect::<Vec<_>>());
        let mut cpus: Vec<CpuId> = slice.iter().map(|&(_, c)| c).collect();
        cpus.sort_unstable();
        assert_eq!(cpus, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_to_run_is_an_empty_slice() {
        let mut r = Rotation::new(0);
        assert!(r.next_slice(&[], &four_cores()).is_empty());
        let mut r = Rotation::new(3);
        assert_eq!(r.next_slice(&[Low, Low, Low], &[]), vec![]);
    }
}
