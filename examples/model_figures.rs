//! Prints the figures quoted in docs/model.md: solo behaviour of every built-in profile
//! on the Nehalem, the WL9 allocation-map study, the E5345 bus study, and the model's
//! speed. `cargo run --release --example model_figures`.

use std::time::Instant;

use numasched::sim::{params_for, simulate, MachineParams, ProfileSet, SimProcess};
use numasched::topology::{self, Topology};

fn proc(set: &ProfileSet, name: &str, home: usize, cpu: usize) -> SimProcess {
    SimProcess {
        profile: set.get(name).expect("built-in").clone(),
        memory: vec![(home, 1.0)],
        cpus: vec![cpu],
        run_share: None,
    }
}

fn run(t: &Topology, p: &MachineParams, set: &ProfileSet, w: &[(&str, usize, usize)]) -> Vec<f64> {
    let procs: Vec<SimProcess> = w.iter().map(|&(n, h, c)| proc(set, n, h, c)).collect();
    let o = simulate(t, p, &procs);
    assert!(o.converged);
    o.processes.iter().map(|x| x.slowdown).collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn main() {
    let set = ProfileSet::builtin();
    let t = topology::machine("nehalem-e5520").unwrap();
    let p = params_for(&t);
    println!("== solo on nehalem-e5520 (local | remote)");
    println!(
        "{:<11} {:>6} {:>7} {:>7} {:>7} {:>6}",
        "program", "CPI", "GB/s", "lat ns", "np", "MPKI/2"
    );
    for prof in set.iter() {
        let one = |cpu| {
            simulate(
                &t,
                &p,
                &[SimProcess {
                    profile: prof.clone(),
                    memory: vec![(0, 1.0)],
                    cpus: vec![cpu],
                    run_share: None,
                }],
            )
        };
        let (l, r) = (one(0), one(4));
        let (l, r) = (&l.processes[0], &r.processes[0]);
        let half = prof.misses_per_instruction(4.0 * 1048576.0) * 1000.0;
        println!(
            "{:<11} {:>6.2} {:>7.2} {:>7.1} {:>7.3} {:>6.1}",
            prof.name,
            1.0 / l.ipc,
            l.bandwidth_gbps,
            l.latency_ns,
            l.ipc / r.ipc,
            half
        );
    }

    println!("\n== WL9 (mcf milc soplex lbm), all homed on node 0");
    let wl9 = ["mcf", "milc", "soplex", "lbm"];
    let place = |nodes: [usize; 4]| -> Vec<f64> {
        let mut next = [0usize, 4];
        let w: Vec<(&str, usize, usize)> = wl9
            .iter()
            .zip(nodes)
            .map(|(&n, node)| {
                let c = next[node];
                next[node] += 1;
                (n, 0, c)
            })
            .collect();
        run(&t, &p, &set, &w)
    };
    let maxlocal = place([0, 0, 0, 0]);
    let nmass = place([1, 0, 0, 0]);
    let mut linux = vec![0.0; 4];
    let mut count = 0;
    for a in 0..4 {
        for b in a + 1..4 {
            let mut nodes = [1; 4];
            nodes[a] = 0;
            nodes[b] = 0;
            let s = place(nodes);
            println!("  balanced {:?}: {:?} avg {:.3}", nodes, fmt(&s), mean(&s));
            for i in 0..4 {
                linux[i] += s[i] / 6.0;
            }
            count += 1;
        }
    }
    assert_eq!(count, 6);
    println!(
        "  linux avg     : {:?} avg {:.3}",
        fmt(&linux),
        mean(&linux)
    );
    println!(
        "  maximum-local : {:?} avg {:.3}",
        fmt(&maxlocal),
        mean(&maxlocal)
    );
    println!(
        "  n-mass (mcf→1): {:?} avg {:.3}",
        fmt(&nmass),
        mean(&nmass)
    );
    let imp = |pol: &[f64]| -> Vec<f64> {
        (0..4)
            .map(|i| 1.0 - (1.0 + pol[i]) / (1.0 + linux[i]))
            .collect()
    };
    println!(
        "  improvement over linux: maxlocal {:?}, n-mass {:?}",
        fmt(&imp(&maxlocal)),
        fmt(&imp(&nmass))
    );
    for map in ["1100", "1010", "1001"] {
        let homes: Vec<usize> = map.bytes().map(|b| (b - b'0') as usize).collect();
        let mut next = [0usize, 4];
        let w: Vec<(&str, usize, usize)> = wl9
            .iter()
            .zip(&homes)
            .map(|(&n, &h)| {
                let c = next[h];
                next[h] += 1;
                (n, h, c)
            })
            .collect();
        let ml = run(&t, &p, &set, &w);
        println!(
            "  map {map}: maximum-local avg {:.3} {:?}",
            mean(&ml),
            fmt(&ml)
        );
    }

    println!("\n== xeon-e5345 bus study");
    let e = topology::machine("xeon-e5345").unwrap();
    let ep = params_for(&e);
    // CPUs 0,1 = die 0; 2,3 = die 1 (package 0); 4..7 = package 1.
    for (label, w) in [
        ("lbm alone", vec![("lbm", 0, 0)]),
        (
            "lbm + lbm, same package, other die",
            vec![("lbm", 0, 0), ("lbm", 0, 2)],
        ),
        ("lbm + lbm, same die", vec![("lbm", 0, 0), ("lbm", 0, 1)]),
        (
            "lbm + lbm, other package",
            vec![("lbm", 0, 0), ("lbm", 0, 4)],
        ),
        (
            "lbm + gromacs, same package",
            vec![("lbm", 0, 0), ("gromacs", 0, 2)],
        ),
        (
            "lbm + hmmer, same package",
            vec![("lbm", 0, 0), ("hmmer", 0, 2)],
        ),
        (
            "soplex + soplex, same package",
            vec![("soplex", 0, 0), ("soplex", 0, 2)],
        ),
        (
            "soplex + hmmer, same package",
            vec![("soplex", 0, 0), ("hmmer", 0, 2)],
        ),
        (
            "libquantum + libquantum, same package",
            vec![("libquantum", 0, 0), ("libquantum", 0, 2)],
        ),
        (
            "stream + stream, same package",
            vec![("stream", 0, 0), ("stream", 0, 2)],
        ),
    ] {
        let s = run(&e, &ep, &set, &w);
        println!("  {label:<40} slowdowns {:?}", fmt(&s));
    }

    println!("\n== speed");
    let wl11 = [
        "mcf",
        "milc",
        "soplex",
        "lbm",
        "gobmk",
        "perlbench",
        "namd",
        "povray",
    ];
    for n in [4usize, 8] {
        let procs: Vec<SimProcess> = wl11[..n]
            .iter()
            .enumerate()
            .map(|(i, &x)| proc(&set, x, 0, i))
            .collect();
        let reps = 20000;
        let start = Instant::now();
        let mut acc = 0.0;
        let mut iters = 0;
        for _ in 0..reps {
            let o = simulate(&t, &p, &procs);
            acc += o.avg_slowdown;
            iters = o.iterations;
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / reps as f64;
        println!(
            "  {n} processes on nehalem: {us:.1} µs per simulate() ({iters} sweeps) [{acc:.1}]"
        );
    }
}

fn fmt(v: &[f64]) -> Vec<String> {
    v.iter().map(|x| format!("{x:.3}")).collect()
}
