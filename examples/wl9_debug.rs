use numasched::sim::{params_for, simulate, ProfileSet, SimProcess};
use numasched::topology;
fn main() {
    let set = ProfileSet::builtin();
    let t = topology::machine("nehalem-e5520").unwrap();
    let p = params_for(&t);
    for cpus in [[0usize, 1, 2, 3], [4, 0, 1, 2], [0, 1, 4, 5], [4, 5, 0, 1]] {
        let procs: Vec<SimProcess> = ["mcf", "milc", "soplex", "lbm"].iter().zip(cpus).map(|(n, c)| SimProcess { profile: set.get(n).unwrap().clone(), memory: vec![(0, 1.0)], cpus: vec![c] }).collect();
        let o = simulate(&t, &p, &procs);
        println!("cpus {:?} avg {:.3}", cpus, o.avg_slowdown);
        for (n, x) in ["mcf", "milc", "soplex", "lbm"].iter().zip(&o.processes) {
            println!("  {n:<7} sd {:.3} mpki {:5.1} llc {:5.2}MB lat {:5.1} bw {:.2}", x.slowdown, x.effective_mpki, x.llc_bytes / 1048576.0, x.latency_ns, x.bandwidth_gbps);
        }
        for r in &o.resources { println!("  {:?} {:.2} GB/s rho {:.2} W {:.1}", r.kind, r.gbps, r.utilisation, r.delay_ns); }
    }
}
